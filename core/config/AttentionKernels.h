#pragma once
// What the engine's attention kernels take, shared with the estimator (which cannot include torch).
#include <cstdint>

namespace pb {

// The widest head the flash and cuDNN kernels take; past it only the memory-efficient kernel, which
// has no grouped heads, avoids SDPA's math path (Gemma 4's global heads of 512): the engine then
// expands the key/value heads (engine/TorchCompat.h's sharedHeadsKernel), and the estimator counts it.
constexpr int64_t kSharedHeadsMaxHeadDim = 256;

} // namespace pb
