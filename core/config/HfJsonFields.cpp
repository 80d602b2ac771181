#include "config/HfJsonFields.h"

#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <cmath>

namespace pb {

std::string hfField(const std::string &where, const char *key) { return where + ": " + key; }

int64_t requiredInt(const QJsonObject &json, const std::string &where, const char *key)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        throw InvalidInputError(hfField(where, key), "required field is missing");
    const double d = v.toDouble(-1);
    if (!v.isDouble() || std::floor(d) != d || d <= 0 || d > static_cast<double>(kMaxExactJsonInteger))
        throw InvalidInputError(hfField(where, key), "expected a positive integer, got " + jsonTypeName(v));
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
        throw InvalidInputError(hfField(where, key), "expected a number, got " + jsonTypeName(v));
    return v.toDouble();
}

bool optionalBool(const QJsonObject &json, const std::string &where, const char *key, bool fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return fallback;
    if (!v.isBool())
        throw InvalidInputError(hfField(where, key), "expected true or false, got " + jsonTypeName(v));
    return v.toBool();
}

bool present(const QJsonObject &json, const char *key)
{
    const QJsonValue v = json.value(QLatin1String(key));
    return !v.isUndefined() && !v.isNull();
}

ModelShape hfCommonShape(const QJsonObject &json, const std::string &where, const std::string &family, const HfShapeDefaults &d)
{
    ModelShape m;
    m.family = family;
    m.preset = "hf-import";
    m.vocabSize = optionalInt(json, where, "vocab_size", d.vocab);
    m.hiddenSize = optionalInt(json, where, "hidden_size", d.hidden);
    m.intermediateSize = optionalInt(json, where, "intermediate_size", d.intermediate);
    m.layers = optionalInt(json, where, "num_hidden_layers", d.layers);
    if (m.layers > kMaxModelLayers)
        throw InvalidInputError(hfField(where, "num_hidden_layers"), "at most " + std::to_string(kMaxModelLayers) + " layers are supported, got " + std::to_string(m.layers));
    m.attentionHeads = optionalInt(json, where, "num_attention_heads", d.heads);
    m.kvHeads = optionalInt(json, where, "num_key_value_heads", d.kvHeads);
    m.headDim = optionalInt(json, where, "head_dim", d.headDim);
    m.maxPositions = optionalInt(json, where, "max_position_embeddings", d.maxPositions);
    m.normEps = optionalNumber(json, where, "rms_norm_eps", d.normEps);
    m.tieEmbeddings = optionalBool(json, where, "tie_word_embeddings", d.tied);
    return m;
}

} // namespace pb
