#pragma once
// Training data as samples of token ids. Sources: synthetic tokens with a length distribution,
// pre-tokenized token files (raw uint16/uint32, .npy; memory-mapped, never read whole), and JSONL
// with `input_ids` or `text` (byte-level fallback tokenizer). No torch here: the engine turns
// batches into tensors on its loader thread.
#include "config/RunConfig.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pb {

class TokenDataset {
public:
    virtual ~TokenDataset() = default;
    // Number of samples. Each sample holds up to seqLen + 1 tokens (inputs and shifted targets).
    virtual int64_t size() const = 0;
    virtual int64_t length(int64_t index) const = 0;
    // Appends sample `index`'s tokens to `out`.
    virtual void read(int64_t index, std::vector<int32_t> &out) const = 0;
    // Content hash of the data (the data revision recorded with every run).
    virtual std::string revision() const = 0;
    virtual std::string description() const = 0;
    // Tokens over all samples (the size of one epoch for JobUnit::Epochs). The default sums length().
    virtual int64_t totalTokens() const;
    // read() may be called from several threads at once (training and validation loaders);
    // revision() too (it is computed once, on first use, for files: hashing reads every byte).
};

// Opens the configured source for a model (token ids must stay below vocabSize) and sequence
// length. Throws InvalidInputError naming the file or field (missing file, wrong dtype, token id
// out of range, empty data, ...). Fields named in messages: data.path, data.token_dtype,
// data.synthetic_samples, data.min_length, data.lengths_file, model.vocab_size, train.seq_len.
// Token ids are checked in full by read(); at open only the first and last MiB of a token file.
std::unique_ptr<TokenDataset> openDataset(const DataConfig &data, int64_t vocabSize, int64_t seqLen, uint64_t seed);

} // namespace pb
