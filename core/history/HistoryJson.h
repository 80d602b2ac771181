#pragma once
// JSON shapes of history records, shared by export, import, the CLI and the writer.
#include "result/ResultJson.h"
#include "history/HistoryTypes.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QString>

namespace pb::history {

using pb::phaseFromString;
using pb::toJson;

QString isoUtc(const QDateTime &time);          // 2024-05-01T12:00:00.123Z
QDateTime parseIsoUtc(const QString &text);     // invalid on "" or bad text
QString compactJson(const QJsonObject &object);
QJsonObject parseJsonObject(const QString &text); // {} on "" or bad text

// Qt binds a null QString as SQL NULL; text columns are NOT NULL, so bind "" instead.
QString sqlText(const QString &text);

// The run row (no samples): the "runs" entries of `history --json` and of exports.
QJsonObject toJson(const RunRecord &run);
// Column name -> array, in the CSV column order.
QJsonObject samplesToJson(const std::vector<StepSample> &samples);
const QStringList &sampleColumnNames();

} // namespace pb::history
