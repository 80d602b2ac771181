#include "data/Batcher.h"

#include "data/DataSupport.h"
#include "util/Errors.h"

#include <algorithm>

namespace pb {

namespace {
constexpr int64_t kIgnoreIndex = -100; // the cross-entropy ignore index: padding never counts
constexpr int64_t kPadToken = 0;
} // namespace

Batcher::Batcher(const TokenDataset &dataset, std::vector<int64_t> samples, int64_t microBatch, bool longestFirst, uint64_t shuffleSeed)
    : m_dataset(dataset), m_samples(std::move(samples)), m_microBatch(microBatch), m_longestFirst(longestFirst)
{
    if (microBatch < 1)
        throw InvalidInputError("train.micro_batch", "must be at least 1 (got " + std::to_string(microBatch) + ")");
    if (m_samples.empty())
        throw InvalidInputError("data", "no samples to batch (the split left this set empty)");
    const int64_t n = dataset.size();
    for (int64_t s : m_samples)
        if (s < 0 || s >= n)
            throw PilotBenchError(ExitCode::Failure, "Batcher: sample index " + std::to_string(s) + " outside the dataset (0.." + std::to_string(n - 1) + ")");
    if (m_longestFirst) {
        std::vector<std::pair<int64_t, int64_t>> byLength; // (length, index)
        byLength.reserve(m_samples.size());
        for (int64_t s : m_samples)
            byLength.emplace_back(dataset.length(s), s);
        const auto k = static_cast<size_t>(std::min<int64_t>(microBatch, static_cast<int64_t>(byLength.size())));
        // Longest first; ties by index so the choice does not depend on the order given.
        std::partial_sort(byLength.begin(), byLength.begin() + static_cast<std::ptrdiff_t>(k), byLength.end(),
                          [](const auto &a, const auto &b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
        for (size_t i = 0; i < byLength.size(); ++i)
            (i < k ? m_longest : m_rest).push_back(byLength[i].second);
        std::sort(m_rest.begin(), m_rest.end()); // the shuffle then depends only on the set and the seed
    }
    m_position.shuffleSeed = shuffleSeed;
    orderEpoch();
}

void Batcher::orderEpoch()
{
    const uint64_t seed = m_position.shuffleSeed + static_cast<uint64_t>(m_position.epoch);
    if (m_longestFirst) {
        std::vector<int64_t> rest = m_rest;
        data::seededShuffle(rest, seed);
        m_order = m_longest;
        m_order.insert(m_order.end(), rest.begin(), rest.end());
    } else {
        m_order = m_samples;
        data::seededShuffle(m_order, seed);
    }
}

int64_t Batcher::batchesPerEpoch() const
{
    return (static_cast<int64_t>(m_samples.size()) + m_microBatch - 1) / m_microBatch;
}

DataPosition Batcher::position() const
{
    return m_position;
}

void Batcher::seek(const DataPosition &position)
{
    if (position.epoch < 0 || position.index < 0 || position.index > batchesPerEpoch())
        throw InvalidInputError("checkpoint.data_position", "epoch " + std::to_string(position.epoch) + ", batch " + std::to_string(position.index)
                                                                + " is outside this data set's " + std::to_string(batchesPerEpoch()) + " batches per epoch");
    const bool reorder = position.epoch != m_position.epoch || position.shuffleSeed != m_position.shuffleSeed;
    m_position = position;
    if (reorder)
        orderEpoch();
}

Batch Batcher::next()
{
    if (m_position.index >= batchesPerEpoch()) {
        ++m_position.epoch;
        m_position.index = 0;
        orderEpoch();
    }
    const auto first = static_cast<size_t>(m_position.index * m_microBatch);
    const size_t last = std::min(first + static_cast<size_t>(m_microBatch), m_order.size());

    // Read every sample first: the padded width is the longest of them.
    std::vector<size_t> ends;
    m_tokens.clear();
    for (size_t i = first; i < last; ++i) {
        m_dataset.read(m_order[i], m_tokens);
        ends.push_back(m_tokens.size());
    }
    int64_t width = 0;
    size_t begin = 0;
    for (size_t end : ends) {
        width = std::max<int64_t>(width, static_cast<int64_t>(end - begin) - 1);
        begin = end;
    }

    Batch batch;
    batch.batchSize = static_cast<int64_t>(last - first);
    batch.seqLen = width;
    batch.inputs.assign(static_cast<size_t>(batch.batchSize * width), kPadToken);
    batch.targets.assign(static_cast<size_t>(batch.batchSize * width), kIgnoreIndex);
    begin = 0;
    for (size_t row = 0; row < ends.size(); ++row) {
        const size_t n = ends[row] - begin;
        int64_t *inputs = batch.inputs.data() + row * static_cast<size_t>(width);
        int64_t *targets = batch.targets.data() + row * static_cast<size_t>(width);
        for (size_t t = 0; t + 1 < n; ++t) {
            inputs[t] = m_tokens[begin + t];
            targets[t] = m_tokens[begin + t + 1];
        }
        batch.tokens += static_cast<int64_t>(n) - 1;
        begin = ends[row];
    }
    ++m_position.index; // only once the batch is complete: a read error leaves the position as it was
    return batch;
}

void splitSamples(const TokenDataset &dataset, int64_t validationPerMille, uint64_t seed, std::vector<int64_t> &train, std::vector<int64_t> &validation)
{
    if (validationPerMille < 0 || validationPerMille > 999)
        throw InvalidInputError("data.validation_fraction", "is per mille of the samples and must be in 0..999 (got " + std::to_string(validationPerMille) + ")");
    const int64_t n = dataset.size();
    int64_t held = (n * validationPerMille + 500) / 1000;
    if (validationPerMille > 0 && held == 0)
        held = 1; // asked for validation: a set too small for the fraction still validates on one sample
    if (validationPerMille > 0 && n - held < 1)
        throw InvalidInputError("data.validation_fraction", "the data set holds " + std::to_string(n)
                                                                + " sample(s): too few to hold out validation and still train; use 0");
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        order[static_cast<size_t>(i)] = i;
    data::seededShuffle(order, data::mix64(seed ^ 0x53504c4954ULL));
    validation.assign(order.begin(), order.begin() + held);
    train.assign(order.begin() + held, order.end());
    std::sort(validation.begin(), validation.end());
    std::sort(train.begin(), train.end());
}

} // namespace pb
