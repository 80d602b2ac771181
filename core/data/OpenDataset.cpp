#include "data/JsonlDataset.h"
#include "data/SyntheticDataset.h"
#include "data/TokenDataset.h"
#include "data/TokenFileDataset.h"
#include "util/Errors.h"

#include <limits>
#include <spdlog/spdlog.h>

namespace pb {

int64_t TokenDataset::totalTokens() const
{
    int64_t total = 0;
    for (int64_t i = 0, n = size(); i < n; ++i)
        total += length(i);
    return total;
}

std::unique_ptr<TokenDataset> openDataset(const DataConfig &data, int64_t vocabSize, int64_t seqLen, uint64_t seed)
{
    // Token ids travel as int32 to the engine; two ids at least, or nothing is learnable.
    if (vocabSize < 2 || vocabSize > std::numeric_limits<int32_t>::max())
        throw InvalidInputError("model.vocab_size", "must be between 2 and 2147483647 for a data source (got " + std::to_string(vocabSize) + ")");
    if (seqLen < 1 || seqLen > std::numeric_limits<int32_t>::max() - 1)
        throw InvalidInputError("train.seq_len", "must be between 1 and 2147483646 (got " + std::to_string(seqLen) + ")");
    std::unique_ptr<TokenDataset> dataset;
    switch (data.kind) {
    case DataKind::Synthetic:
        dataset = std::make_unique<data::SyntheticDataset>(data, vocabSize, seqLen, seed);
        break;
    case DataKind::TokenFile:
        if (data.path.empty())
            throw InvalidInputError("data.path", "is empty; a token file source needs the path of a .bin or .npy file");
        dataset = std::make_unique<data::TokenFileDataset>(data.path, data.tokenDtype, vocabSize, seqLen);
        break;
    case DataKind::Jsonl:
        if (data.path.empty())
            throw InvalidInputError("data.path", "is empty; a JSONL source needs the path of a .jsonl file");
        dataset = std::make_unique<data::JsonlDataset>(data.path, vocabSize, seqLen);
        break;
    }
    if (!dataset)
        throw InvalidInputError("data.kind", "unknown data source kind");
    spdlog::debug("data: opened {}", dataset->description());
    return dataset;
}

} // namespace pb
