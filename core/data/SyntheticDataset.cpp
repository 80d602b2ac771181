#include "data/SyntheticDataset.h"

#include "data/DataSupport.h"
#include "data/MappedFile.h"
#include "util/Errors.h"

#include <QByteArray>
#include <QFile>
#include <QFileInfo>

#include <algorithm>
#include <spdlog/spdlog.h>

namespace pb::data {

namespace {

// Distinct streams per purpose, so a sample's length and its tokens are independent draws.
constexpr uint64_t kLengthSalt = 0x4c454e47544853ULL;
constexpr uint64_t kTokenSalt = 0x544f4b454e53ULL;

uint64_t sampleSeed(uint64_t seed, int64_t index, uint64_t salt)
{
    return mix64(mix64(seed ^ salt) + static_cast<uint64_t>(index));
}

} // namespace

std::vector<int32_t> readLengthsFile(const std::string &path, int64_t seqLen, std::string *contentHash)
{
    QFile file(QString::fromStdString(path));
    if (!QFileInfo::exists(file.fileName()))
        throw InvalidInputError(path, "lengths file does not exist");
    if (!file.open(QIODevice::ReadOnly))
        throw InvalidInputError(path, "lengths file cannot be read: " + file.errorString().toStdString());
    const QByteArray bytes = file.readAll(); // a text file of numbers: small by nature
    if (contentHash)
        *contentHash = sha256Of(bytes.toStdString());
    std::vector<int32_t> lengths;
    const QList<QByteArray> lines = bytes.split('\n');
    for (qsizetype i = 0; i < lines.size(); ++i) {
        const QByteArray line = lines[i].trimmed();
        if (line.isEmpty())
            continue;
        const std::string where = path;
        const std::string lineText = "line " + std::to_string(i + 1) + ": ";
        bool ok = false;
        const qlonglong v = line.toLongLong(&ok);
        if (!ok)
            throw InvalidInputError(where, lineText + "'" + line.left(40).toStdString() + "' is not an integer length");
        if (v < 2 || v > seqLen + 1)
            throw InvalidInputError(where, lineText + "length " + std::to_string(v) + " is outside 2.." + std::to_string(seqLen + 1)
                                               + " (a sample holds at least one input and its target, and at most train.seq_len + 1 tokens)");
        lengths.push_back(static_cast<int32_t>(v));
    }
    if (lengths.empty())
        throw InvalidInputError(path, "lengths file holds no lengths");
    return lengths;
}

SyntheticDataset::SyntheticDataset(const DataConfig &config, int64_t vocabSize, int64_t seqLen, uint64_t seed)
    : m_lengths(config.lengths), m_learnable(config.learnable), m_samples(config.syntheticSamples), m_vocabSize(vocabSize), m_seqLen(seqLen), m_seed(seed)
{
    if (m_samples <= 0)
        throw InvalidInputError("data.synthetic_samples", "must be at least 1 (got " + std::to_string(m_samples) + ")");
    std::string lengthText;
    std::string lengthKey;
    switch (m_lengths) {
    case LengthDistribution::Fixed:
        lengthText = "fixed length " + groupThousands(seqLen + 1);
        lengthKey = "fixed";
        break;
    case LengthDistribution::Uniform:
        m_minLength = config.minLength;
        if (m_minLength < 1 || m_minLength > seqLen)
            throw InvalidInputError("data.min_length", "uniform lengths need 1 <= data.min_length <= train.seq_len (" + std::to_string(seqLen) + "); got "
                                                           + std::to_string(m_minLength));
        lengthText = "uniform length " + groupThousands(m_minLength + 1) + ".." + groupThousands(seqLen + 1);
        lengthKey = "uniform:" + std::to_string(m_minLength);
        break;
    case LengthDistribution::FromFile: {
        if (config.lengthsFile.empty())
            throw InvalidInputError("data.lengths_file", "is empty; lengths 'file' needs a file with one sample length per line");
        std::string fileHash;
        m_fileLengths = readLengthsFile(config.lengthsFile, seqLen, &fileHash);
        const auto [lo, hi] = std::minmax_element(m_fileLengths.begin(), m_fileLengths.end());
        lengthText = "lengths from " + baseName(config.lengthsFile) + " (" + groupThousands(static_cast<int64_t>(m_fileLengths.size())) + " values, "
            + std::to_string(*lo) + ".." + std::to_string(*hi) + ")";
        lengthKey = "file:" + fileHash;
        if (static_cast<int64_t>(m_fileLengths.size()) > m_samples)
            spdlog::warn("data: {} holds {} lengths but data.synthetic_samples is {}; only the first {} are used", config.lengthsFile,
                         m_fileLengths.size(), m_samples, m_samples);
        break;
    }
    }
    m_description = "synthetic, " + groupThousands(m_samples) + " samples, " + lengthText + (m_learnable ? "" : ", uniform random tokens");
    // The data is a function of these parameters alone, so their hash is its content hash.
    m_revision = sha256Of("pilotbench-synthetic-v1;samples=" + std::to_string(m_samples) + ";lengths=" + lengthKey + ";seq_len=" + std::to_string(seqLen)
                          + ";vocab=" + std::to_string(vocabSize) + ";learnable=" + (m_learnable ? "1" : "0") + ";seed=" + std::to_string(seed));
}

int64_t SyntheticDataset::length(int64_t index) const
{
    if (index < 0 || index >= m_samples)
        throw PilotBenchError(ExitCode::Failure, "sample index " + std::to_string(index) + " outside 0.." + std::to_string(m_samples - 1));
    switch (m_lengths) {
    case LengthDistribution::Fixed:
        return m_seqLen + 1;
    case LengthDistribution::Uniform: {
        SplitMix64 rng(sampleSeed(m_seed, index, kLengthSalt));
        return m_minLength + 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(m_seqLen - m_minLength + 1)));
    }
    case LengthDistribution::FromFile:
        return m_fileLengths[static_cast<size_t>(index) % m_fileLengths.size()];
    }
    return m_seqLen + 1;
}

void SyntheticDataset::read(int64_t index, std::vector<int32_t> &out) const
{
    const int64_t n = length(index);
    SplitMix64 rng(sampleSeed(m_seed, index, kTokenSalt));
    out.reserve(out.size() + static_cast<size_t>(n));
    const uint64_t vocab = static_cast<uint64_t>(m_vocabSize);
    if (!m_learnable) {
        for (int64_t i = 0; i < n; ++i)
            out.push_back(static_cast<int32_t>(rng.below(vocab)));
        return;
    }
    const uint64_t start = rng.below(vocab);
    const uint64_t stride = 1 + rng.below(static_cast<uint64_t>(std::min<int64_t>(kMaxStride, m_vocabSize - 1)));
    uint64_t token = start;
    for (int64_t i = 0; i < n; ++i) {
        out.push_back(static_cast<int32_t>(token));
        token = (token + stride) % vocab;
    }
}

} // namespace pb::data
