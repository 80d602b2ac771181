#pragma once
// The one JSON form of a pilot's results: the CLI's --jsonl events, the history's summary column,
// exports and the report all read and write these, so a figure has one name everywhere.
#include "result/PilotTypes.h"

#include <QJsonObject>
#include <QString>

#include <optional>

namespace pb {

QJsonObject toJson(const StepSample &sample);
QJsonObject toJson(const PhaseMark &mark);
QJsonObject toJson(const ValidationResult &result);
QJsonObject toJson(const CheckpointWrite &write);
QJsonObject toJson(const PilotSummary &summary);

std::optional<Phase> phaseFromString(const QString &text);
std::optional<Verdict> verdictFromString(const QString &text);

} // namespace pb
