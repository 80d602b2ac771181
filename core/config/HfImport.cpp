#include "config/HfImport.h"

#include "config/HfHubCache.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "config/JsonText.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>

namespace pb {
namespace {

std::string field(const std::string &where, const char *key) { return where + ": " + key; }

int64_t requiredInt(const QJsonObject &json, const std::string &where, const char *key)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        throw InvalidInputError(field(where, key), "required field is missing");
    const double d = v.toDouble(-1);
    if (!v.isDouble() || std::floor(d) != d || d <= 0 || d > static_cast<double>(kMaxExactJsonInteger))
        throw InvalidInputError(field(where, key), "expected a positive integer, got " + jsonTypeName(v));
    return static_cast<int64_t>(d);
}

// Optional fields: absent or null keep `fallback`.
int64_t optionalInt(const QJsonObject &json, const std::string &where, const char *key, int64_t fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    return v.isUndefined() || v.isNull() ? fallback : requiredInt(json, where, key);
}

double optionalNumber(const QJsonObject &json, const std::string &where, const char *key, double fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return fallback;
    if (!v.isDouble())
        throw InvalidInputError(field(where, key), "expected a number, got " + jsonTypeName(v));
    return v.toDouble();
}

bool optionalBool(const QJsonObject &json, const std::string &where, const char *key, bool fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return fallback;
    if (!v.isBool())
        throw InvalidInputError(field(where, key), "expected true or false, got " + jsonTypeName(v));
    return v.toBool();
}

ActivationKind activationOf(const QJsonObject &json, const std::string &where)
{
    const QJsonValue v = json.value(QLatin1String("hidden_act"));
    const QString act = v.isString() ? v.toString() : QStringLiteral("silu");
    if (!v.isUndefined() && !v.isNull() && !v.isString())
        throw InvalidInputError(field(where, "hidden_act"), "expected a string, got " + jsonTypeName(v));
    // These families' MLPs are gated (gate_proj * act(up_proj)), so the activation names the gate.
    if (act == QLatin1String("silu") || act == QLatin1String("swish"))
        return ActivationKind::SwiGlu;
    if (act == QLatin1String("gelu") || act == QLatin1String("gelu_new") || act == QLatin1String("gelu_pytorch_tanh"))
        return ActivationKind::GeGlu;
    throw InvalidInputError(field(where, "hidden_act"), "unsupported activation '" + act.toStdString() + "' (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)");
}

// One number of rope_scaling, required by its type.
double ropeNumber(const QJsonObject &scaling, const std::string &where, const char *key)
{
    const std::string name = std::string("rope_scaling.") + key;
    const QJsonValue v = scaling.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        throw InvalidInputError(field(where, name.c_str()), "required field is missing");
    if (!v.isDouble() || !(v.toDouble() > 0))
        throw InvalidInputError(field(where, name.c_str()), "expected a positive number, got " + jsonTypeName(v));
    return v.toDouble();
}

// Transformers reads `rope_type`, or the older `type`, and fills the missing one from the other.
// Types whose frequencies depend on the sequence length at run time (dynamic) or that also scale
// attention (yarn, longrope) are refused rather than trained with the wrong positions.
RopeScaling ropeScalingOf(const QJsonObject &json, const std::string &where)
{
    const QJsonValue v = json.value(QLatin1String("rope_scaling"));
    if (v.isUndefined() || v.isNull())
        return {};
    if (!v.isObject())
        throw InvalidInputError(field(where, "rope_scaling"), "expected an object with rope_type, or null, got " + jsonTypeName(v));
    const QJsonObject o = v.toObject();
    const char *typeKey = o.contains(QLatin1String("rope_type")) ? "rope_type" : "type";
    const QJsonValue typeValue = o.value(QLatin1String(typeKey));
    const std::string typeField = std::string("rope_scaling.") + typeKey;
    if (typeValue.isUndefined())
        throw InvalidInputError(field(where, "rope_scaling.rope_type"), "required field is missing (supported: default, linear, llama3)");
    if (!typeValue.isString())
        throw InvalidInputError(field(where, typeField.c_str()), "expected a string, got " + jsonTypeName(typeValue));
    const std::string type = typeValue.toString().toStdString();

    RopeScaling s;
    if (type == "default")
        return s;
    if (type == "linear") {
        s.type = RopeScalingType::Linear;
        s.factor = ropeNumber(o, where, "factor");
    } else if (type == "llama3") {
        s.type = RopeScalingType::Llama3;
        s.factor = ropeNumber(o, where, "factor");
        s.lowFreqFactor = ropeNumber(o, where, "low_freq_factor");
        s.highFreqFactor = ropeNumber(o, where, "high_freq_factor");
        const double original = ropeNumber(o, where, "original_max_position_embeddings");
        if (std::floor(original) != original || original > static_cast<double>(kMaxExactJsonInteger))
            throw InvalidInputError(field(where, "rope_scaling.original_max_position_embeddings"), "expected a positive integer, got " + jsonTypeName(o.value(QLatin1String("original_max_position_embeddings"))));
        s.originalMaxPositions = static_cast<int64_t>(original);
    } else {
        throw InvalidInputError(field(where, typeField.c_str()), "'" + type + "' is not supported (supported: default, linear, llama3); "
                                "training without it would give the model other positions than it was trained with");
    }
    return s;
}

QJsonObject readConfigJson(const QString &file)
{
    // A config.json is a few KiB; 16 MiB refuses /dev/zero and FIFOs without a hang.
    QJsonParseError error;
    const QByteArray text = readRegularFile(file, 16 * 1024 * 1024);
    const QJsonDocument doc = QJsonDocument::fromJson(text, &error);
    if (error.error == QJsonParseError::NoError)
        checkJsonText(text, file.toStdString());
    if (error.error != QJsonParseError::NoError)
        throw InvalidInputError(file.toStdString(), "not valid JSON at offset " + std::to_string(error.offset) + ": " + error.errorString().toStdString());
    if (!doc.isObject())
        throw InvalidInputError(file.toStdString(), "expected a JSON object at the top level");
    return doc.object();
}

} // namespace

const std::vector<std::string> &hfSupportedModelTypes()
{
    static const std::vector<std::string> types {"llama", "mistral", "qwen2"};
    return types;
}

ModelShape hfModelShape(const QJsonObject &json, const std::string &where)
{
    const QJsonValue typeValue = json.value(QLatin1String("model_type"));
    if (!typeValue.isString())
        throw InvalidInputError(field(where, "model_type"), typeValue.isUndefined() ? "required field is missing" : "expected a string, got " + jsonTypeName(typeValue));
    const std::string type = typeValue.toString().toStdString();
    const auto &types = hfSupportedModelTypes();
    if (std::find(types.begin(), types.end(), type) == types.end())
        throw InvalidInputError(field(where, "model_type"), "unsupported model type '" + type + "' (supported: llama, mistral, qwen2)");

    ModelShape m;
    m.family = type;
    m.preset = "hf-import";
    m.hiddenSize = requiredInt(json, where, "hidden_size");
    m.layers = requiredInt(json, where, "num_hidden_layers");
    m.attentionHeads = requiredInt(json, where, "num_attention_heads");
    m.kvHeads = optionalInt(json, where, "num_key_value_heads", m.attentionHeads);
    m.intermediateSize = requiredInt(json, where, "intermediate_size");
    m.vocabSize = requiredInt(json, where, "vocab_size");
    m.maxPositions = requiredInt(json, where, "max_position_embeddings");
    m.headDim = optionalInt(json, where, "head_dim", 0);
    m.tieEmbeddings = optionalBool(json, where, "tie_word_embeddings", false);
    m.ropeTheta = optionalNumber(json, where, "rope_theta", 10000.0);
    m.ropeScaling = ropeScalingOf(json, where);
    m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-6);
    m.activation = activationOf(json, where);
    m.norm = NormKind::RmsNorm;
    if (type == "qwen2") {
        // Qwen2 always has q/k/v biases and no o_proj bias; its config has no switch for them.
        m.attentionBias = true;
    } else if (optionalBool(json, where, "attention_bias", false)) {
        // Llama's attention_bias also adds an o_proj bias, which the parameter table does not model.
        throw InvalidInputError(field(where, "attention_bias"), "true is not supported for " + type + " (it adds an o_proj bias the model does not have)");
    }
    if (optionalBool(json, where, "mlp_bias", false))
        throw InvalidInputError(field(where, "mlp_bias"), "true is not supported (MLP biases are not modelled)");
    return m;
}

std::string hfRevision(const QString &folder, const QJsonObject &json)
{
    QFile revisionFile(QDir(folder).filePath(QStringLiteral("revision")));
    if (revisionFile.open(QIODevice::ReadOnly)) {
        const QString first = QString::fromUtf8(revisionFile.readLine()).trimmed();
        if (!first.isEmpty())
            return first.toStdString();
    }
    const QJsonValue commit = json.value(QLatin1String("_commit_hash"));
    if (commit.isString() && !commit.toString().isEmpty())
        return commit.toString().toStdString();
    // The Hugging Face cache keeps each revision in models--ORG--NAME/snapshots/<commit hash>/.
    const QFileInfo info(QDir::cleanPath(QFileInfo(folder).absoluteFilePath()));
    static const QRegularExpression hash(QStringLiteral("^[0-9a-f]{40}$"));
    if (info.dir().dirName() == QLatin1String("snapshots") && hash.match(info.fileName()).hasMatch())
        return info.fileName().toStdString();
    return "";
}

RunConfig hfRunConfig(const QJsonObject &json, const std::string &where)
{
    RunConfig c;
    c.model = hfModelShape(json, where);
    // Training defaults stay RunConfig's, except a sequence the model cannot hold.
    c.train.seqLen = std::min(c.train.seqLen, c.model.maxPositions);
    const auto issues = validateRunConfig(c);
    if (!issues.empty())
        throw InvalidInputError(where + " -> " + issues.front().field, issues.front().message);
    return c;
}

RunConfig importHfConfig(const QString &path)
{
    const QFileInfo info(path);
    if (!info.exists()) {
        if (const auto repo = parseHfRepoId(path)) {
            const HfCachedSnapshot snapshot = findHfCachedSnapshot(*repo);
            RunConfig c = importHfConfig(snapshot.folder);
            c.model.revision = snapshot.commit;
            return c;
        }
        throw InvalidInputError(path.toStdString(), "no such file or folder (expected a model folder with config.json, or a Hugging Face repository id OWNER/NAME[@REVISION] in the local cache)");
    }
    const QString folder = info.isDir() ? info.absoluteFilePath() : info.absolutePath();
    const QString file = info.isDir() ? QDir(folder).filePath(QStringLiteral("config.json")) : info.absoluteFilePath();
    if (!QFileInfo::exists(file))
        throw InvalidInputError(path.toStdString(), "no config.json in this folder");
    const QJsonObject json = readConfigJson(file);

    RunConfig c = hfRunConfig(json, file.toStdString());
    c.model.revision = hfRevision(folder, json);
    if (!QDir(folder).entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
        c.model.weightsPath = folder.toStdString();
    const QJsonValue nameOrPath = json.value(QLatin1String("_name_or_path"));
    c.name = QFileInfo(folder).fileName().toStdString();
    const QDir snapshots = QFileInfo(folder).dir();
    const QString repoDir = QFileInfo(snapshots.absolutePath()).absoluteDir().dirName();
    if (nameOrPath.isString() && !nameOrPath.toString().isEmpty())
        c.name = nameOrPath.toString().toStdString();
    else if (snapshots.dirName() == QLatin1String("snapshots") && repoDir.startsWith(QLatin1String("models--")))
        c.name = repoDir.mid(8).replace(QStringLiteral("--"), QStringLiteral("/")).toStdString();
    return c;
}

} // namespace pb
