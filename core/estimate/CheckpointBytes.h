#pragma once
// The size of one checkpoint of the planned job, from the run config alone (no torch), so the
// rental window can scale a measured write throughput to a model the pilot did not run.
#include "config/RunConfig.h"

#include <cstdint>

namespace pb {

// Every parameter in its storage dtype (ModelStates: fp32 masters under fp32 and mixed precision,
// frozen weights in 16 bits when the compute is 16-bit, all bf16 under pure bf16) plus the
// optimizer state of the trainable ones (AdamW: two tensors per parameter; SGD with momentum:
// one; ...). It is the whole job's checkpoint: the same total on any card count, whether a
// sharded strategy splits it across ranks or a replicated one writes it once from rank 0.
// Counted as tensor bytes only: step counters, RNG state, state.json, config.json and the
// serialisation's framing are left out (a few KB; under 2 % of preset:tiny, nothing on a real model).
int64_t checkpointBytesFor(const RunConfig &config);

} // namespace pb
