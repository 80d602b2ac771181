#pragma once
// Helpers of the config.json import tests: the committed published configs (tests/data/hf/<name>),
// the message an import is refused with, the first validation issue, and Transformers' own counts
// of a published model (tests/data/hf-parity/published-counts.json, written on the device by
// tests/bench/hf_family_fixtures.py --counts).
#include "config/HfImport.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace pbtest {

inline QString hf(const char *name) { return QStringLiteral(PB_TEST_DATA_DIR "/hf/") + QLatin1String(name); }

// tests/data/hf/<name>/config.json as an object; empty when it cannot be read.
inline QJsonObject fixture(const char *name)
{
    QFile f(hf(name) + QStringLiteral("/config.json"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// The message of the error `json` is refused with; empty when it imports.
inline QString refusal(const QJsonObject &json)
{
    try {
        pb::hfRunConfig(json, "config.json");
    } catch (const pb::InvalidInputError &e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

// "field: message" of the first validation issue; empty when the config is valid.
inline QString invalid(const pb::RunConfig &c)
{
    const auto issues = pb::validateRunConfig(c);
    return issues.empty() ? QString() : QString::fromStdString(issues.front().field + ": " + issues.front().message);
}

// The entry of published-counts.json for a repository id; empty when there is none yet.
inline QJsonObject publishedCounts(const QString &repo)
{
    QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/published-counts.json"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object().value(repo).toObject();
}

} // namespace pbtest
