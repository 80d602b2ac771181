#pragma once
// Config comparison for the history views: both configs flattened to dotted paths, then only the
// paths whose values differ, with both values.
#include "history/HistoryTypes.h"

#include <QJsonObject>
#include <QMap>

#include <vector>

namespace pb {

// {"train": {"seq_len": 2048}, "lora": {"targets": ["q", "v"]}} -> train.seq_len, lora.targets[0], lora.targets[1].
// Empty objects and arrays are kept as leaves so that adding one shows up in a diff.
QMap<QString, QJsonValue> flattenJson(const QJsonObject &object);
// Sorted by path; a path only one side has gets QJsonValue::Undefined on the other.
std::vector<ConfigDifference> diffJson(const QJsonObject &left, const QJsonObject &right);

} // namespace pb
