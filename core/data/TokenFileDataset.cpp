#include "data/TokenFileDataset.h"

#include "data/DataSupport.h"
#include "util/Errors.h"

#include <QString>

#include <algorithm>
#include <cstring>

namespace pb::data {

namespace {

bool endsWithNpy(const std::string &path)
{
    return QString::fromStdString(path).endsWith(QStringLiteral(".npy"), Qt::CaseInsensitive);
}

} // namespace

TokenFileDataset::TokenFileDataset(const std::string &path, const std::string &tokenDtype, int64_t vocabSize, int64_t seqLen)
    : m_file(path), m_vocabSize(vocabSize), m_seqLen(seqLen)
{
    m_npy = tokenDtype == "npy" || endsWithNpy(path);
    const int64_t sampleLimit = seqLen + 1;
    if (m_npy) {
        const NpyArrayInfo info = parseNpyHeader(m_file.data(), m_file.sizeBytes(), path);
        m_type = info.type;
        m_dataOffsetBytes = info.dataOffsetBytes;
        m_fileTokens = info.elementCount;
        if (info.shape.size() == 2) {
            m_rowTokens = info.shape[1];
            if (m_rowTokens < 2)
                throw InvalidInputError(path, "rows of " + std::to_string(m_rowTokens) + " token(s): a sample needs at least 2 (one input and its target)");
            m_sampleTokens = std::min(m_rowTokens, sampleLimit);
            m_samples = info.shape[0];
        }
    } else {
        if (tokenDtype == "uint16")
            m_type = TokenType::UInt16;
        else if (tokenDtype == "uint32")
            m_type = TokenType::UInt32;
        else
            throw InvalidInputError("data.token_dtype", "unknown token dtype '" + tokenDtype + "' (use uint16, uint32 or npy)");
        static const char kNpyMagic[] = "\x93NUMPY";
        if (m_file.sizeBytes() >= 6 && std::memcmp(m_file.data(), kNpyMagic, 6) == 0)
            throw InvalidInputError(path, "the file is a .npy array, not raw " + tokenDtype + " tokens; set data.token_dtype to npy");
        const int64_t itemBytes = tokenTypeBytes(m_type);
        if (m_file.sizeBytes() % itemBytes != 0)
            throw InvalidInputError(path, "size " + std::to_string(m_file.sizeBytes()) + " bytes is not a multiple of " + std::to_string(itemBytes)
                                              + " (" + tokenDtype + "): the file is truncated or data.token_dtype is wrong");
        m_fileTokens = m_file.sizeBytes() / itemBytes;
    }
    if (m_rowTokens == 0) {
        m_sampleTokens = sampleLimit;
        m_samples = m_fileTokens / sampleLimit;
        if (m_samples == 0)
            throw InvalidInputError(path, "holds " + std::to_string(m_fileTokens) + " tokens, fewer than one sample of train.seq_len + 1 = "
                                              + std::to_string(sampleLimit));
    }
    // Bounded check of token ids at open: the first and the last MiB of the array. A full scan
    // would page the whole file in and defeat the mapping; read() checks every token it serves.
    const int64_t itemBytes = tokenTypeBytes(m_type);
    const int64_t windowTokens = std::min<int64_t>(m_fileTokens, (int64_t(1) << 20) / itemBytes);
    scanForRange(0, windowTokens);
    scanForRange(m_fileTokens - windowTokens, windowTokens);
}

int64_t TokenFileDataset::length(int64_t index) const
{
    if (index < 0 || index >= m_samples)
        throw PilotBenchError(ExitCode::Failure, "sample index " + std::to_string(index) + " outside 0.." + std::to_string(m_samples - 1));
    return m_sampleTokens;
}

int64_t TokenFileDataset::tokenAt(int64_t tokenOffset) const
{
    const unsigned char *p = m_file.data() + m_dataOffsetBytes + tokenOffset * tokenTypeBytes(m_type);
    // memcpy: a raw file's tokens need not be aligned for the wider types in a 2-D .npy either.
    switch (m_type) {
    case TokenType::UInt16: { uint16_t v; std::memcpy(&v, p, sizeof v); return v; }
    case TokenType::UInt32: { uint32_t v; std::memcpy(&v, p, sizeof v); return v; }
    case TokenType::Int32: { int32_t v; std::memcpy(&v, p, sizeof v); return v; }
    case TokenType::Int64: { int64_t v; std::memcpy(&v, p, sizeof v); return v; }
    }
    return 0;
}

void TokenFileDataset::checkRange(int64_t tokenOffset, int64_t value) const
{
    if (value < 0 || value >= m_vocabSize)
        throw InvalidInputError(m_file.path(), "token id " + std::to_string(value) + " at token offset " + std::to_string(tokenOffset) + " (byte offset "
                                                   + std::to_string(m_dataOffsetBytes + tokenOffset * tokenTypeBytes(m_type))
                                                   + ") is outside the vocabulary: ids must be in 0.." + std::to_string(m_vocabSize - 1)
                                                   + " (model.vocab_size " + std::to_string(m_vocabSize) + ")");
}

void TokenFileDataset::scanForRange(int64_t firstToken, int64_t count) const
{
    for (int64_t i = firstToken; i < firstToken + count; ++i)
        checkRange(i, tokenAt(i));
}

void TokenFileDataset::read(int64_t index, std::vector<int32_t> &out) const
{
    const int64_t n = length(index);
    const int64_t first = m_rowTokens > 0 ? index * m_rowTokens : index * m_sampleTokens;
    out.reserve(out.size() + static_cast<size_t>(n));
    for (int64_t i = first; i < first + n; ++i) {
        const int64_t v = tokenAt(i);
        checkRange(i, v);
        out.push_back(static_cast<int32_t>(v));
    }
}

std::string TokenFileDataset::revision() const
{
    std::call_once(m_revisionOnce, [this] { m_revision = m_file.sha256(); });
    return m_revision;
}

std::string TokenFileDataset::description() const
{
    const std::string name = baseName(m_file.path());
    const std::string type = std::string(tokenTypeName(m_type)) + (m_npy ? " (npy)" : "");
    if (m_rowTokens > 0) {
        std::string s = name + ": " + groupThousands(m_samples) + " rows x " + groupThousands(m_rowTokens) + " tokens " + type + ", "
            + groupThousands(m_samples) + " samples";
        if (m_sampleTokens < m_rowTokens)
            s += ", rows truncated to " + groupThousands(m_sampleTokens) + " tokens";
        return s;
    }
    return name + ": " + groupThousands(m_fileTokens) + " tokens " + type + ", " + groupThousands(m_samples) + " samples";
}

} // namespace pb::data
