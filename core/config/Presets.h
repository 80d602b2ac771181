#pragma once
// Model presets shipped in resources/presets/*.json, with the exact public shapes.
#include "config/RunConfig.h"

#include <QStringList>

namespace pb {

QStringList presetNames();
// A complete, valid RunConfig for the preset. Throws InvalidInputError for an unknown name,
// listing the known ones.
RunConfig presetConfig(const QString &name);
// The embedded default that `scripts/run` runs headless: a small preset on CPU.
inline QString defaultPresetName() { return QStringLiteral("tiny"); }

} // namespace pb
