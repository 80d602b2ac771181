#pragma once
// pilot --memory-snapshot: the measured attribution of a pilot's peak beside the estimator's
// breakdown of the same config on the same device, part by part, so a wrong term shows by name;
// and each phase of the run (construction, the training steps, validation, checkpoint writes) with
// its measured peak beside its estimate.
#include "config/RunConfig.h"
#include "engine/Environment.h"
#include "result/MemoryAttribution.h"

#include <QJsonObject>

#include <map>
#include <string>

namespace pb {

// The estimate's side is left out (with the estimator's refusal as "estimate_error") when the
// estimator cannot size the config.
// `measuredByPhase`: the pilot's peak allocated per phase (PilotSummary::peakAllocatedByPhase).
QJsonObject memorySnapshotJson(const RunConfig &config, const Environment &env, const MemoryAttribution &measured,
                               const std::map<std::string, int64_t> &measuredByPhase = {});

} // namespace pb
