#include "config/Presets.h"

#include "config/RunConfigJson.h"
#include "config/RunConfigParse.h"
#include "util/Errors.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>

namespace pb {
namespace {

// Compiled into pb_resources (resources/CMakeLists.txt) under this prefix.
const QString kPresetDir = QStringLiteral(":/presets");

} // namespace

QStringList presetNames()
{
    QStringList names;
    for (const QString &file : QDir(kPresetDir).entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name))
        names << file.chopped(5);
    return names;
}

QJsonObject presetJson(const QString &name)
{
    QFile file(kPresetDir + QLatin1Char('/') + name + QStringLiteral(".json"));
    if (name.isEmpty() || name.contains(QLatin1Char('/')) || !file.open(QIODevice::ReadOnly))
        throw InvalidInputError("preset:" + name.toStdString(), "unknown preset (known: " + presetNames().join(QStringLiteral(", ")).toStdString() + ")");
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject())
        throw PilotBenchError(ExitCode::Failure, "built-in preset " + name.toStdString() + " is not a JSON object: " + error.errorString().toStdString());
    return doc.object();
}

RunConfig presetConfig(const QString &name)
{
    return loadRunConfig(QStringLiteral("preset:") + name);
}

} // namespace pb
