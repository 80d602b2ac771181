#pragma once
// The residual a finished single-process pilot leaves for the estimator: its measured peak against
// the estimator's raw figure for the same config on the same local device, and the framework bytes
// the device used beyond the allocator's reserve.
#include "config/RunConfig.h"
#include "engine/Environment.h"
#include "result/PilotTypes.h"
#include "estimate/MemoryEstimate.h"
#include "history/HistoryEvidence.h"

#include <optional>

namespace pb {

// Points `options` at a local device (kind, fused attention, capacity, name, LibTorch version) as
// `pilotbench-cli estimate --device` does, so a stored residual compares like with like.
void setLocalDevice(EstimateOptions &options, const std::string &device, const Environment &env);
// The estimator's tensor peak for `config` on that local device (no capacity search).
MemoryEstimate localTensorEstimate(const RunConfig &config, const std::string &device, const Environment &env);
// CUDA: peak device used minus peak reserved; CPU: 0 (no device context). Unset where the pilot had
// no device-used reading or it was below the reserve.
std::optional<int64_t> measuredFrameworkBytes(const std::string &device, const PilotSummary &summary);
// Throws InvalidInputError when the estimator cannot size this config, or the summary has no
// positive peak to compare.
CalibrationRecord calibrationRecord(const RunConfig &config, const std::string &device, const Environment &env,
                                    const PilotSummary &summary, int64_t runId);

} // namespace pb
