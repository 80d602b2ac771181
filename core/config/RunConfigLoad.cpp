// Reading a config named by a file path or `preset:NAME`, and the `--set PATH=VALUE` overrides.
#include "config/RunConfigJson.h"
#include "config/ModelTraitsJson.h"
#include "config/RunConfigParse.h"
#include "config/JsonText.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

namespace pb {
namespace {

constexpr qint64 kMaxConfigFileBytes = 16 * 1024 * 1024;

std::string lineColumn(const QByteArray &text, int offset)
{
    int line = 1;
    int column = 1;
    for (int i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The value of --set for a field whose default in a complete config is `schema`.
QJsonValue overrideValue(const QJsonValue &schema, const QString &text)
{
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(QStringLiteral("[%1]").arg(text).toUtf8(), &error);
    const bool isJson = error.error == QJsonParseError::NoError && doc.array().size() == 1;
    const QJsonValue parsed = isJson ? doc.array().at(0) : QJsonValue(text);
    if (schema.isString())
        return parsed.isString() ? parsed : QJsonValue(text);
    if (schema.isArray() && !parsed.isArray()) {
        QJsonArray list;
        for (const QString &part : text.split(QLatin1Char(','), Qt::SkipEmptyParts))
            list.append(part.trimmed());
        return list;
    }
    return parsed;
}

QString knownKeys(const QJsonObject &schema)
{
    return schema.keys().join(QStringLiteral(", "));
}

void setPath(QJsonObject &target, const QJsonObject &schema, const QStringList &parts, int index, const QString &text, const QString &fullPath)
{
    const QString &key = parts[index];
    if (!schema.contains(key)) {
        const QString parent = parts.mid(0, index).join(QLatin1Char('.'));
        throw InvalidInputError("--set " + fullPath.toStdString(),
                                "unknown path (known keys" + (parent.isEmpty() ? std::string() : " under " + parent.toStdString()) + ": " + knownKeys(schema).toStdString() + ")");
    }
    const QJsonValue schemaValue = schema.value(key);
    if (index + 1 == parts.size()) {
        target.insert(key, overrideValue(schemaValue, text));
        return;
    }
    if (!schemaValue.isObject())
        throw InvalidInputError("--set " + fullPath.toStdString(), "unknown path: " + parts.mid(0, index + 1).join(QLatin1Char('.')).toStdString() + " is not an object");
    QJsonObject child = target.value(key).isObject() ? target.value(key).toObject() : QJsonObject();
    if (target.contains(key) && !target.value(key).isObject())
        throw InvalidInputError(parts.mid(0, index + 1).join(QLatin1Char('.')).toStdString(), "expected an object, got something else; cannot apply --set " + fullPath.toStdString());
    setPath(child, schemaValue.toObject(), parts, index + 1, text, fullPath);
    target.insert(key, child);
}

} // namespace

QJsonObject readRunConfigObject(const QString &spec)
{
    if (spec.startsWith(QLatin1String("preset:")))
        return presetJson(spec.mid(7));
    const std::string where = spec.toStdString();
    if (!QFileInfo(spec).exists() && !QFileInfo(spec).isSymLink())
        throw InvalidInputError(where, "no such file (a config is a JSON file or preset:NAME)");
    const QByteArray text = readRegularFile(spec, kMaxConfigFileBytes);
    if (text.trimmed().isEmpty())
        throw InvalidInputError(where, "the file is empty");
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(text, &error);
    if (error.error == QJsonParseError::NoError)
        checkJsonText(text, where);
    if (error.error != QJsonParseError::NoError) {
        const bool atEnd = error.offset >= text.trimmed().size() - 1 || error.error == QJsonParseError::UnterminatedObject || error.error == QJsonParseError::UnterminatedArray || error.error == QJsonParseError::UnterminatedString;
        throw InvalidInputError(where, "not valid JSON at " + lineColumn(text, error.offset) + ": " + error.errorString().toStdString() + (atEnd ? " (is the file truncated?)" : ""));
    }
    if (!doc.isObject())
        throw InvalidInputError(where, "expected a JSON object at the top level");
    return doc.object();
}

void applyOverride(QJsonObject &json, const QString &assignment)
{
    const auto eq = assignment.indexOf(QLatin1Char('='));
    if (eq <= 0)
        throw InvalidInputError("--set " + assignment.toStdString(), "expected PATH=VALUE, e.g. train.lora.rank=16");
    const QString path = assignment.left(eq).trimmed();
    const QStringList parts = path.split(QLatin1Char('.'));
    if (parts.contains(QString()))
        throw InvalidInputError("--set " + path.toStdString(), "empty segment in the path");
    // Every path --set may name: the defaults, plus the optional sections they leave out.
    static const QJsonObject schema = [] {
        RunConfig full;
        // longrope's record carries every rope_scaling key but llama3's two, added here.
        full.model.ropeScaling.type = RopeScalingType::LongRope;
        full.model.traits = everyModelTraitSet();
        full.model.qkNorm = QkNorm::Head;
        full.model.moe.experts = 1;
        // The routing and expert variants, written only when set (gpt-oss's, DeepSeek-V3's, Llama 4's).
        MoeConfig &variants = full.model.moe;
        variants.routerBias = variants.softmaxAfterTopK = variants.stackedExperts = variants.interleavedGateUp = variants.expertBias = true;
        variants.swigluLimit = variants.swigluAlpha = 1;
        variants.scoring = RouterScoring::Sigmoid;
        variants.groups = variants.groupsPerToken = 2;
        variants.scoreCorrectionBias = variants.scaleExpertInput = true;
        variants.routedScale = 2;
        full.model.checkpointQuantization = "mxfp4";
        full.model.linear.keyHeads = 1; // Qwen3-Next / Qwen3.5's linear_attention section
        full.model.linear.fullLayers = {4, {0}};
        full.train.kernels = KernelPath::Fused;
        full.train.cudaGraph = true;
        QJsonObject json = toJson(full);
        QJsonObject model = json.value(QStringLiteral("model")).toObject();
        QJsonObject rope = model.value(QStringLiteral("rope_scaling")).toObject();
        for (const char *key : {"low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"})
            rope.insert(QLatin1String(key), 1.0);
        rope.insert(QStringLiteral("truncate"), true);
        model.insert(QStringLiteral("rope_scaling"), rope);
        json.insert(QStringLiteral("model"), model);
        return json;
    }();
    setPath(json, schema, parts, 0, assignment.mid(eq + 1), path);
}

RunConfig parseRunConfigSpec(const QString &spec, const QStringList &overrides)
{
    QJsonObject json = readRunConfigObject(spec);
    for (const QString &o : overrides)
        applyOverride(json, o);
    try {
        return parseRunConfigJson(json);
    } catch (const InvalidInputError &e) {
        throw InvalidInputError(e.where(), e.message() + " (in " + spec.toStdString() + ")");
    }
}

} // namespace pb
