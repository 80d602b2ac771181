#pragma once
// Synthetic token samples, generated on demand from (seed, index): nothing is stored, so a
// million-sample set costs nothing. Learnable samples are arithmetic progressions modulo the
// vocabulary (a per-sample start and a stride of 1..8), so the next token follows from the
// previous two and a tiny transformer's loss must fall quickly; otherwise tokens are uniform noise.
#include "data/TokenDataset.h"

#include <QtGlobal>

namespace pb::data {

class SyntheticDataset final : public TokenDataset {
public:
    SyntheticDataset(const DataConfig &config, int64_t vocabSize, int64_t seqLen, uint64_t seed);
    Q_DISABLE_COPY_MOVE(SyntheticDataset)

    int64_t size() const override { return m_samples; }
    int64_t length(int64_t index) const override;
    void read(int64_t index, std::vector<int32_t> &out) const override;
    std::string revision() const override { return m_revision; }
    std::string description() const override { return m_description; }

    static constexpr int64_t kMaxStride = 8;

private:
    LengthDistribution m_lengths;
    bool m_learnable;
    int64_t m_samples;
    int64_t m_vocabSize;
    int64_t m_seqLen;
    int64_t m_minLength = 0;
    uint64_t m_seed;
    std::vector<int32_t> m_fileLengths;  // FromFile: sample i takes m_fileLengths[i % size]
    std::string m_revision;
    std::string m_description;
};

// One length per line (blank lines skipped); each must be 2..seqLen + 1 tokens. Throws
// InvalidInputError naming the file and the line. `contentHash` receives the file's sha256.
std::vector<int32_t> readLengthsFile(const std::string &path, int64_t seqLen, std::string *contentHash);

} // namespace pb::data
