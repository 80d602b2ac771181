#pragma once
// JSON shapes of history records, shared by export, import, the CLI and the writer.
#include "engine/PilotTypes.h"
#include "history/HistoryTypes.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QString>

namespace pb::history {

QString isoUtc(const QDateTime &time);          // 2024-05-01T12:00:00.123Z
QDateTime parseIsoUtc(const QString &text);     // invalid on "" or bad text
QString compactJson(const QJsonObject &object);
QJsonObject parseJsonObject(const QString &text); // {} on "" or bad text

std::optional<Phase> phaseFromString(const QString &text);
// Qt binds a null QString as SQL NULL; text columns are NOT NULL, so bind "" instead.
QString sqlText(const QString &text);

QJsonObject toJson(const PilotSummary &summary);
QJsonObject toJson(const PhaseMark &mark);
QJsonObject toJson(const ValidationResult &result);
QJsonObject toJson(const CheckpointWrite &write);
// The run row (no samples): the "runs" entries of `history --json` and of exports.
QJsonObject toJson(const RunRecord &run);
// Column name -> array, in the CSV column order.
QJsonObject samplesToJson(const std::vector<StepSample> &samples);
const QStringList &sampleColumnNames();

} // namespace pb::history
