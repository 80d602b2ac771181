#pragma once
// pilot --memory-snapshot: the measured attribution of a pilot's peak beside the estimator's
// breakdown of the same config on the same device, part by part, so a wrong term shows by name.
#include "config/RunConfig.h"
#include "engine/Environment.h"
#include "result/MemoryAttribution.h"

#include <QJsonObject>

namespace pb {

// The estimate's side is left out (with the estimator's refusal as "estimate_error") when the
// estimator cannot size the config.
QJsonObject memorySnapshotJson(const RunConfig &config, const Environment &env, const MemoryAttribution &measured);

} // namespace pb
