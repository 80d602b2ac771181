#pragma once
// JSON forms of the pilot's results: the CLI's --jsonl events, the history's summary column and the
// report all use these, so a figure has one name everywhere.
#include "engine/PilotEngine.h"

#include <QJsonObject>

namespace pb {

QJsonObject toJson(const StepSample &sample);
QJsonObject toJson(const PhaseMark &mark);
QJsonObject toJson(const ValidationResult &result);
QJsonObject toJson(const CheckpointWrite &write);
QJsonObject toJson(const PilotSummary &summary);
// The summary plus environment, revisions, optimizer and attention paths.
QJsonObject summaryJson(const PilotRun &run);

} // namespace pb
