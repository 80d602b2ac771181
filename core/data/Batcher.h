#pragma once
// Orders samples into micro-batches and remembers where it is, so a checkpoint can restore the
// exact data position. Longest-first puts the batch that sets the memory peak first: every epoch
// starts with the micro-batch of the longest samples, and the rest follow in the seeded shuffle
// (shuffleSeed + epoch), so the steps after the first stay representative of the data instead of
// shrinking steadily as a fully sorted order would. A Batcher is used from one thread; several
// Batchers may share one dataset across threads. The dataset must outlive the Batcher.
#include "data/TokenDataset.h"

#include <cstdint>
#include <vector>

namespace pb {

struct DataPosition {
    int64_t epoch = 0;
    int64_t index = 0;       // next batch within the epoch
    uint64_t shuffleSeed = 0;
    bool operator==(const DataPosition &o) const { return epoch == o.epoch && index == o.index && shuffleSeed == o.shuffleSeed; }
};

struct Batch {
    int64_t batchSize = 0;
    int64_t seqLen = 0;              // padded length of this batch (longest sample - 1)
    std::vector<int64_t> inputs;     // batchSize * seqLen, row-major
    std::vector<int64_t> targets;    // same shape; -100 where padded (ignored by the loss)
    int64_t tokens = 0;              // targets that count
};

class Batcher {
public:
    // `samples` is the subset of dataset indices this batcher serves (training or validation split).
    // The last batch of an epoch holds the remainder (batchSize < microBatch) so every sample is
    // served once per epoch. Throws InvalidInputError for microBatch < 1 or no samples.
    Batcher(const TokenDataset &dataset, std::vector<int64_t> samples, int64_t microBatch, bool longestFirst, uint64_t shuffleSeed);
    Batch next();                    // wraps into the next epoch (reshuffled, or longest-first again)
    DataPosition position() const;
    // Restores a saved position: the next next() returns the batch the saved run would have got.
    // Throws InvalidInputError("checkpoint.data_position", ...) for a position this batcher cannot hold.
    void seek(const DataPosition &position);
    int64_t batchesPerEpoch() const;

private:
    void orderEpoch();
    const TokenDataset &m_dataset;
    std::vector<int64_t> m_samples;
    std::vector<int64_t> m_longest;  // longestFirst: the first batch of every epoch
    std::vector<int64_t> m_rest;     // longestFirst: the other samples, shuffled per epoch
    std::vector<int64_t> m_order;
    std::vector<int32_t> m_tokens;   // reused read buffer
    int64_t m_microBatch;
    bool m_longestFirst;
    DataPosition m_position;
};

// Deterministic train/validation split of a dataset's indices (validationPerMille of them held out,
// rounded to nearest; at least one when validation is asked for at all). Both lists come back
// sorted. Throws InvalidInputError("data.validation_fraction") for a per-mille outside 0..999 or a
// set too small to keep a training sample.
void splitSamples(const TokenDataset &dataset, int64_t validationPerMille, uint64_t seed,
                  std::vector<int64_t> &train, std::vector<int64_t> &validation);

} // namespace pb
