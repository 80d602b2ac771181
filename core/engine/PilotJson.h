#pragma once
// The summary of a whole pilot run with its environment and revisions (the plain result types'
// JSON lives in result/ResultJson.h).
#include "engine/PilotEngine.h"
#include "result/ResultJson.h"

#include <QJsonObject>

namespace pb {

// The summary plus environment, revisions, optimizer and attention paths.
QJsonObject summaryJson(const PilotRun &run);

} // namespace pb
