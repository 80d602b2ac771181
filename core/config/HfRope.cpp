#include "config/HfRope.h"

#include "config/HfJsonFields.h"
#include "config/JsonReader.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <cmath>

namespace pb {
namespace {

constexpr const char *kSupported = "default, linear, llama3, yarn, longrope";

double ropeNumber(const QJsonObject &o, const std::string &where, const std::string &prefix, const char *key)
{
    const std::string name = prefix + key;
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        throw InvalidInputError(hfField(where, name.c_str()), "required field is missing");
    if (!v.isDouble() || !(v.toDouble() > 0))
        throw InvalidInputError(hfField(where, name.c_str()), "expected a positive number, got " + jsonTypeName(v));
    return v.toDouble();
}

double optionalRopeNumber(const QJsonObject &o, const std::string &where, const std::string &prefix, const char *key, double fallback)
{
    const QJsonValue v = o.value(QLatin1String(key));
    return v.isUndefined() || v.isNull() ? fallback : ropeNumber(o, where, prefix, key);
}

int64_t ropeInteger(const QJsonObject &o, const std::string &where, const std::string &prefix, const char *key)
{
    const double d = ropeNumber(o, where, prefix, key);
    if (std::floor(d) != d || d > static_cast<double>(kMaxExactJsonInteger))
        throw InvalidInputError(hfField(where, (prefix + key).c_str()), "expected a positive integer, got " + jsonTypeName(o.value(QLatin1String(key))));
    return static_cast<int64_t>(d);
}

std::vector<double> factorList(const QJsonObject &o, const std::string &where, const std::string &prefix, const char *key)
{
    const QJsonValue v = o.value(QLatin1String(key));
    const std::string name = prefix + key;
    if (!v.isArray())
        throw InvalidInputError(hfField(where, name.c_str()), v.isUndefined() ? "required field is missing" : "expected an array of numbers, got " + jsonTypeName(v));
    std::vector<double> out;
    const QJsonArray a = v.toArray();
    for (qsizetype i = 0; i < a.size(); ++i) {
        if (!a[i].isDouble() || !(a[i].toDouble() > 0))
            throw InvalidInputError(hfField(where, (name + "[" + std::to_string(i) + "]").c_str()), "expected a positive number, got " + jsonTypeName(a[i]));
        out.push_back(a[i].toDouble());
    }
    return out;
}

// One rope object (rope_scaling, or an entry of rope_parameters). `original` is the config's own
// original_max_position_embeddings (Phi-3 keeps it at the top level), 0 when absent.
RopeScaling scalingOf(const QJsonObject &o, const std::string &where, const std::string &prefix, int64_t maxPositions, int64_t original)
{
    // Transformers reads `rope_type`, or the older `type`.
    const char *typeKey = o.contains(QLatin1String("rope_type")) ? "rope_type" : "type";
    const QJsonValue typeValue = o.value(QLatin1String(typeKey));
    const std::string typeField = prefix + typeKey;
    if (typeValue.isUndefined() || typeValue.isNull())
        return {};
    if (!typeValue.isString())
        throw InvalidInputError(hfField(where, typeField.c_str()), "expected a string, got " + jsonTypeName(typeValue));
    const std::string type = typeValue.toString().toStdString();
    RopeScaling s;
    if (type == "default") {
        return s;
    } else if (type == "linear") {
        s.type = RopeScalingType::Linear;
        s.factor = ropeNumber(o, where, prefix, "factor");
    } else if (type == "llama3") {
        s.type = RopeScalingType::Llama3;
        s.factor = ropeNumber(o, where, prefix, "factor");
        s.lowFreqFactor = ropeNumber(o, where, prefix, "low_freq_factor");
        s.highFreqFactor = ropeNumber(o, where, prefix, "high_freq_factor");
        s.originalMaxPositions = ropeInteger(o, where, prefix, "original_max_position_embeddings");
    } else if (type == "yarn") {
        // _compute_yarn_parameters: the pre-training context from the rope object, else the config's.
        s.type = RopeScalingType::Yarn;
        s.factor = ropeNumber(o, where, prefix, "factor");
        // standardize_rope_params: the config's own original_max_position_embeddings overrides the rope object's.
        s.originalMaxPositions = original > 0 ? original
                                 : present(o, "original_max_position_embeddings") ? ropeInteger(o, where, prefix, "original_max_position_embeddings")
                                                                                   : maxPositions;
        s.betaFast = optionalRopeNumber(o, where, prefix, "beta_fast", 32);
        s.betaSlow = optionalRopeNumber(o, where, prefix, "beta_slow", 1);
        s.mscale = optionalRopeNumber(o, where, prefix, "mscale", 0);
        s.mscaleAllDim = optionalRopeNumber(o, where, prefix, "mscale_all_dim", 0);
        s.attentionFactor = optionalRopeNumber(o, where, prefix, "attention_factor", 0);
        const QJsonValue truncate = o.value(QLatin1String("truncate"));
        if (!truncate.isUndefined() && !truncate.isNull()) {
            if (!truncate.isBool())
                throw InvalidInputError(hfField(where, (prefix + "truncate").c_str()), "expected true or false, got " + jsonTypeName(truncate));
            s.truncate = truncate.toBool();
        }
    } else if (type == "longrope") {
        // _compute_longrope_parameters: the config's own original_max_position_embeddings overrides the
        // rope object's (Phi-3); without a factor it is max_position_embeddings / original.
        s.type = RopeScalingType::LongRope;
        s.originalMaxPositions = original > 0 ? original
                                 : present(o, "original_max_position_embeddings") ? ropeInteger(o, where, prefix, "original_max_position_embeddings")
                                                                                   : maxPositions;
        s.factor = optionalRopeNumber(o, where, prefix, "factor", static_cast<double>(maxPositions) / static_cast<double>(s.originalMaxPositions));
        s.attentionFactor = optionalRopeNumber(o, where, prefix, "attention_factor", 0);
        s.shortFactor = factorList(o, where, prefix, "short_factor");
        s.longFactor = factorList(o, where, prefix, "long_factor");
    } else {
        throw InvalidInputError(hfField(where, typeField.c_str()), "'" + type + "' is not supported (supported: " + kSupported +
                                "); training without it would give the model other positions than it was trained with");
    }
    return s;
}

} // namespace

HfRope hfRope(const QJsonObject &json, const std::string &where, double defaultTheta, const char *localThetaKey, double defaultLocalTheta)
{
    HfRope out;
    const int64_t maxPositions = optionalInt(json, where, "max_position_embeddings", 0);
    const int64_t original = optionalInt(json, where, "original_max_position_embeddings", 0);
    const QJsonValue parameters = json.value(QLatin1String("rope_parameters"));
    // convert_rope_params_to_dict: rope_scaling, where given, wins over rope_parameters.
    const bool legacyWins = present(json, "rope_scaling");
    const double localDefault = localThetaKey && present(json, localThetaKey) ? optionalNumber(json, where, localThetaKey, 0)
                                : defaultLocalTheta > 0                       ? defaultLocalTheta
                                                                              : 0;
    if (!legacyWins && !parameters.isUndefined() && !parameters.isNull()) {
        if (!parameters.isObject())
            throw InvalidInputError(hfField(where, "rope_parameters"), "expected an object, got " + jsonTypeName(parameters));
        const QJsonObject p = parameters.toObject();
        auto read = [&](const QJsonObject &o, const std::string &prefix, double &theta, RopeScaling &scaling, bool local = false) {
            const double fallback = local && localDefault > 0 ? localDefault : optionalNumber(json, where, "rope_theta", defaultTheta);
            theta = optionalRopeNumber(o, where, prefix, "rope_theta", fallback);
            scaling = scalingOf(o, where, prefix, maxPositions, original);
            if (present(o, "partial_rotary_factor"))
                out.partialRotary = ropeNumber(o, where, prefix, "partial_rotary_factor");
        };
        if (p.contains(QLatin1String("full_attention")) || p.contains(QLatin1String("sliding_attention"))) {
            // One entry per layer type (Gemma 3, OLMo 3): the full layers' is the model's rotary; the
            // sliding layers' must be unscaled, and its base is theirs.
            for (auto it = p.begin(); it != p.end(); ++it)
                if (it.key() != QLatin1String("full_attention") && it.key() != QLatin1String("sliding_attention"))
                    throw InvalidInputError(hfField(where, ("rope_parameters." + it.key().toStdString()).c_str()),
                                            "is a layer type this import does not model (known: full_attention, sliding_attention)");
            read(p.value(QLatin1String("full_attention")).toObject(), "rope_parameters.full_attention.", out.theta, out.scaling);
            if (p.contains(QLatin1String("sliding_attention"))) {
                RopeScaling localScaling;
                read(p.value(QLatin1String("sliding_attention")).toObject(), "rope_parameters.sliding_attention.", out.localTheta, localScaling, true);
                if (localScaling.type != RopeScalingType::None)
                    throw InvalidInputError(hfField(where, "rope_parameters.sliding_attention.rope_type"),
                                            "scaled rotary on sliding layers is not modelled (expected default)");
            }
        } else {
            read(p, "rope_parameters.", out.theta, out.scaling);
        }
        return out;
    }
    out.theta = optionalNumber(json, where, "rope_theta", defaultTheta);
    const QJsonValue legacy = json.value(QLatin1String("rope_scaling"));
    if (!legacy.isUndefined() && !legacy.isNull()) {
        if (!legacy.isObject())
            throw InvalidInputError(hfField(where, "rope_scaling"), "expected an object with rope_type, or null, got " + jsonTypeName(legacy));
        const QJsonObject o = legacy.toObject();
        if (!o.contains(QLatin1String("rope_type")) && !o.contains(QLatin1String("type")))
            throw InvalidInputError(hfField(where, "rope_scaling.rope_type"), std::string("required field is missing (supported: ") + kSupported + ")");
        out.scaling = scalingOf(o, where, "rope_scaling.", maxPositions, original);
    }
    out.localTheta = localDefault;
    return out;
}

} // namespace pb
