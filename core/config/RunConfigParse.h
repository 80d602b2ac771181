#pragma once
// The steps behind loadRunConfig, for callers that need them apart: `config validate` parses
// without validating so it can list every broken rule, not only the first.
#include "config/RunConfig.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace pb {

// Types, enum names, unknown keys and the schema version are checked; the rules are not
// (see validateRunConfig). Missing keys keep the RunConfig defaults. Throws InvalidInputError.
RunConfig parseRunConfigJson(const QJsonObject &json);
// The JSON object of a file (errors name the file: missing, empty, truncated, malformed with line
// and column, not an object) or of `preset:NAME`.
QJsonObject readRunConfigObject(const QString &spec);
// Applies one "PATH=VALUE" (PATH dotted, e.g. train.lora.rank). VALUE is read as JSON when it
// parses (numbers, true/false, arrays), otherwise as a string; for string fields the text is taken
// as it is, for list fields "a,b" is a list. An unknown PATH is an error naming it.
void applyOverride(QJsonObject &json, const QString &assignment);
// readRunConfigObject + overrides + parseRunConfigJson, without validation. Errors name the file.
RunConfig parseRunConfigSpec(const QString &spec, const QStringList &overrides = {});
// The JSON text written to files and printed by `config new`: indented, keys in the documented
// order with schema_version first. toJson() holds the same content.
QByteArray formatRunConfig(const RunConfig &config);
// The raw JSON of a shipped preset (resources/presets/NAME.json). Throws for an unknown name.
QJsonObject presetJson(const QString &name);

} // namespace pb
