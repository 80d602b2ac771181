#pragma once
// RunConfig <-> readable JSON (snake_case keys, a schema version so older files still load), the
// `preset:NAME` / file + `--set PATH=VALUE` loading used everywhere a config is named, and the
// stable content hash recorded with every run.
#include "config/RunConfig.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace pb {

QJsonObject toJson(const RunConfig &config);
// Throws InvalidInputError naming the field path (e.g. "train.seq_len") and the rule broken.
// Performs full validation (validateRunConfig) before returning.
RunConfig runConfigFromJson(const QJsonObject &json);
// `spec` is a file path or `preset:NAME`; `overrides` are "PATH=VALUE" strings applied in order
// before validation. Throws InvalidInputError naming the file or field.
RunConfig loadRunConfig(const QString &spec, const QStringList &overrides = {});
// Atomic write (QSaveFile). Throws PilotBenchError on I/O failure naming the file.
void saveRunConfig(const RunConfig &config, const QString &path);
// SHA-256 (hex) of the canonical compact JSON; independent of key order and of the file's formatting.
std::string configHash(const RunConfig &config);

} // namespace pb
