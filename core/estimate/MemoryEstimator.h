#pragma once
// The per-device peak of a training step: model states from the parameter table, activations
// from the engine's block structure, sharded by the parallel strategy, with the phase that sets
// the peak, the fit against a card with headroom and the largest micro-batch that fits.
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"

#include <memory>

namespace pb {

// Throws InvalidInputError for an unknown card, gpus < 1, a strategy that needs gpus > 1 given
// one GPU is fine (it degenerates), headroom outside [0, 1), or a config without layers.
MemoryEstimate estimateMemory(const RunConfig &config, const EstimateOptions &options);
// The tensor peak alone for `microBatch` (no search, no capacity): what the search walks.
int64_t estimatePeakAllocatedBytes(const RunConfig &config, const EstimateOptions &options, int64_t microBatch);

// Estimates of one config for many cards, card counts, strategies and micro-batches (compare's
// and the report's card x count x strategy search, each estimate's bisection for the largest
// micro-batch), with the figures and errors of estimateMemory(), which is
// ConfigEstimator(config).estimate(options). What an estimate reads from the parameter table (the
// model states, which projections of each block train or carry an adapter, the weights the FLOPs
// count) depends on the config alone, and building that table is most of the work for a large
// mixture of experts (Qwen3-Next-80B-A3B: 48 layers x 512 experts x 3 matrices): the estimator
// reads it once, on its first estimate. The activation walk depends only on the micro-batch and
// on the device's attention and kernel paths, so every card and strategy on CUDA shares it: each
// walk is made once. Thread-safe.
class ConfigEstimator {
public:
    explicit ConfigEstimator(RunConfig config);
    ~ConfigEstimator();
    ConfigEstimator(const ConfigEstimator &) = delete;
    ConfigEstimator &operator=(const ConfigEstimator &) = delete;

    const RunConfig &config() const { return m_config; }
    // estimateMemory(config(), options).
    MemoryEstimate estimate(const EstimateOptions &options) const;
    // estimatePeakAllocatedBytes(config(), options, microBatch).
    int64_t peakAllocatedBytes(const EstimateOptions &options, int64_t microBatch) const;

    struct Memo;   // what the estimates share, made on first use (MemoryEstimator.cpp)
private:
    RunConfig m_config;
    std::unique_ptr<Memo> m_memo;
};

} // namespace pb
