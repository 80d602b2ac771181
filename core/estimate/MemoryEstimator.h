#pragma once
// The per-device peak of a training step: model states from the parameter table, activations
// from the engine's block structure, sharded by the parallel strategy, with the phase that sets
// the peak, the fit against a card with headroom and the largest micro-batch that fits.
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"

namespace pb {

// Throws InvalidInputError for an unknown card, gpus < 1, a strategy that needs gpus > 1 given
// one GPU is fine (it degenerates), headroom outside [0, 1), or a config without layers.
MemoryEstimate estimateMemory(const RunConfig &config, const EstimateOptions &options);
// The tensor peak alone for `microBatch` (no search, no capacity): what the search walks.
int64_t estimatePeakAllocatedBytes(const RunConfig &config, const EstimateOptions &options, int64_t microBatch);

} // namespace pb
