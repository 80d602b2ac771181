#pragma once
// Pre-tokenized files: raw little-endian uint16/uint32 arrays and .npy (1-D stream or 2-D rows),
// memory-mapped. A 1-D stream is cut into consecutive samples of seqLen + 1 tokens (the last
// partial one is dropped); a 2-D array gives one sample per row, truncated to seqLen + 1 tokens.
#include "data/MappedFile.h"
#include "data/NpyHeader.h"
#include "data/TokenDataset.h"

#include <mutex>

namespace pb::data {

class TokenFileDataset final : public TokenDataset {
public:
    // tokenDtype: "uint16", "uint32" or "npy" (a .npy suffix selects npy whatever it says).
    TokenFileDataset(const std::string &path, const std::string &tokenDtype, int64_t vocabSize, int64_t seqLen);
    Q_DISABLE_COPY_MOVE(TokenFileDataset)

    int64_t size() const override { return m_samples; }
    int64_t length(int64_t index) const override;
    void read(int64_t index, std::vector<int32_t> &out) const override;
    std::string revision() const override;
    std::string description() const override;
    int64_t totalTokens() const override { return m_samples * m_sampleTokens; }

    int64_t fileTokens() const { return m_fileTokens; }

private:
    int64_t tokenAt(int64_t tokenOffset) const;
    void checkRange(int64_t tokenOffset, int64_t value) const;
    void scanForRange(int64_t firstToken, int64_t count) const;

    MappedFile m_file;
    TokenType m_type = TokenType::UInt16;
    bool m_npy = false;
    int64_t m_dataOffsetBytes = 0;
    int64_t m_fileTokens = 0;
    int64_t m_rowTokens = 0;     // 2-D: tokens per row in the file; 1-D: 0
    int64_t m_sampleTokens = 0;  // tokens per sample as served
    int64_t m_samples = 0;
    int64_t m_vocabSize = 0;
    int64_t m_seqLen = 0;
    mutable std::once_flag m_revisionOnce;
    mutable std::string m_revision;
};

} // namespace pb::data
