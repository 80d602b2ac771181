#include "config/HfGemma4.h"

#include "config/HfDenseFamilies.h"
#include "config/HfJsonFields.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

namespace pb {
namespace {

// One entry of rope_parameters (keyed by layer type): its rope_type, base and partial factor.
struct LayerRope {
    std::string type;
    double theta = 0;
    double partial = 1.0;
};

LayerRope layerRope(const QJsonObject &rope, const std::string &where, const char *layerType, const LayerRope &fallback)
{
    const QJsonValue v = rope.value(QLatin1String(layerType));
    if (v.isUndefined() || v.isNull())
        return fallback;
    const std::string field = std::string("rope_parameters.") + layerType;
    if (!v.isObject())
        throw InvalidInputError(hfField(where, field.c_str()), "expected an object with rope_type and rope_theta, got " + jsonTypeName(v));
    const QJsonObject o = v.toObject();
    LayerRope r;
    const QJsonValue type = o.value(QLatin1String("rope_type"));
    r.type = type.isString() ? type.toString().toStdString() : "default";
    r.theta = optionalNumber(o, where + " " + field, "rope_theta", fallback.theta);
    r.partial = optionalNumber(o, where + " " + field, "partial_rotary_factor", 1.0);
    if (!(r.theta > 0))
        throw InvalidInputError(hfField(where, (field + ".rope_theta").c_str()), "expected a positive number");
    if (!(r.partial > 0 && r.partial <= 1))
        throw InvalidInputError(hfField(where, (field + ".partial_rotary_factor").c_str()), "expected a number in (0, 1]");
    const double factor = optionalNumber(o, where + " " + field, "factor", 1.0);
    if (factor != 1.0)
        throw InvalidInputError(hfField(where, (field + ".factor").c_str()), "a scaled Gemma 4 rotary is not modelled (expected 1)");
    for (auto it = o.begin(); it != o.end(); ++it)
        if (it.key() != QLatin1String("rope_type") && it.key() != QLatin1String("rope_theta") && it.key() != QLatin1String("partial_rotary_factor") &&
            it.key() != QLatin1String("factor"))
            throw InvalidInputError(hfField(where, (field + "." + it.key().toStdString()).c_str()), "is a rotary key this import does not model");
    return r;
}

// A count that may be 0 (0 turns the feature off); absent or null: `fallback`.
int64_t optionalCount(const QJsonObject &json, const std::string &where, const char *key, int64_t fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return fallback;
    const double d = v.toDouble(-1);
    if (!v.isDouble() || d < 0 || std::floor(d) != d || d > 1e15)
        throw InvalidInputError(hfField(where, key), "expected a whole number of at least 0, got " + jsonTypeName(v));
    return static_cast<int64_t>(d);
}

} // namespace

ModelShape hfGemma4TextShape(const QJsonObject &json, const std::string &where)
{
    for (const char *key : {"quantization_config"})
        if (present(json, key))
            throw InvalidInputError(hfField(where, key), "quantised checkpoints are not modelled (a bf16 or fp32 base is)");
    if (optionalNumber(json, where, "attention_dropout", 0) != 0)
        throw InvalidInputError(hfField(where, "attention_dropout"), "dropout is not modelled (expected 0)");
    if (optionalBool(json, where, "enable_moe_block", false))
        throw InvalidInputError(hfField(where, "enable_moe_block"), "the experts beside the dense MLP (Gemma 4 26B-A4B) are not modelled yet (expected false)");
    const QJsonValue bidirectional = json.value(QLatin1String("use_bidirectional_attention"));
    if (bidirectional.isString() && bidirectional.toString() == QLatin1String("all"))
        throw InvalidInputError(hfField(where, "use_bidirectional_attention"), "\"all\" is not modelled (a causal language model is; \"vision\" leaves text causal)");
    if (!bidirectional.isUndefined() && !bidirectional.isNull() && !(bidirectional.isString() && bidirectional.toString() == QLatin1String("vision")))
        throw InvalidInputError(hfField(where, "use_bidirectional_attention"), "expected null, \"vision\" or \"all\", got " + jsonTypeName(bidirectional));

    // Gemma4TextConfig's defaults.
    ModelShape m = hfCommonShape(json, where, "gemma4_text", {262144, 2304, 9216, 30, 8, 4, 256, 131072, 1e-6, true});
    m.attentionBias = m.traits.outputBias = optionalBool(json, where, "attention_bias", false);
    m.norm = NormKind::RmsNorm;
    const QJsonValue act = json.value(QLatin1String("hidden_activation"));
    const QString activation = act.isString() ? act.toString() : QStringLiteral("gelu_pytorch_tanh");
    if (!act.isUndefined() && !act.isNull() && !act.isString())
        throw InvalidInputError(hfField(where, "hidden_activation"), "expected a string, got " + jsonTypeName(act));
    if (activation == QLatin1String("gelu_pytorch_tanh") || activation == QLatin1String("gelu_new"))
        m.activation = ActivationKind::GeGlu;
    else if (activation == QLatin1String("gelu"))
        m.activation = ActivationKind::GeGluErf;
    else
        throw InvalidInputError(hfField(where, "hidden_activation"), "expected gelu_pytorch_tanh or gelu, got '" + activation.toStdString() + "'");

    // layer_types: five sliding layers then a full one by default. The last layer is always full
    // (Gemma4TextConfig.__post_init__ overrides it), at any depth: that is model.last_layer_global,
    // not the selection, so a pilot cut to fewer layers moves it with the depth as Transformers does.
    std::vector<bool> full(static_cast<size_t>(m.layers));
    if (auto read = hfFullLayers(json, where, m.layers))
        full = std::move(*read);
    else
        for (int64_t i = 0; i < m.layers; ++i)
            full[static_cast<size_t>(i)] = (i + 1) % 6 == 0;
    if (std::all_of(full.begin(), full.end() - 1, [](bool f) { return f; }))
        throw InvalidInputError(hfField(where, "layer_types"), "every layer is full attention: the global layers' shapes need sliding layers beside them (not a published Gemma 4 layout)");
    ModelTraits &t = m.traits;
    t.slidingWindow = optionalInt(json, where, "sliding_window", 512);
    t.globalLayers = hfLayerSelection(full);
    t.lastLayerGlobal = true;

    // Gemma4TextAttention: the global layers' head width and, under attention_k_eq_v, their own
    // key/value heads and values taken from k_proj. Transformers 5.17 writes them per layer
    // (per_layer_config: {"5": {"head_dim": 512, "num_key_value_heads": 4}, ...}); its converter's
    // form names them global_head_dim and num_global_key_value_heads.
    t.globalValuesFromKeys = optionalBool(json, where, "attention_k_eq_v", false);
    // Gemma4TextAttention takes head_dim where global_head_dim is null or 0.
    int64_t globalHeadDim = optionalCount(json, where, "global_head_dim", json.contains(QLatin1String("global_head_dim")) ? m.headDim : 512);
    if (globalHeadDim == 0)
        globalHeadDim = m.headDim;
    int64_t globalKv = m.kvHeads;
    if (t.globalValuesFromKeys && present(json, "num_global_key_value_heads"))
        globalKv = optionalInt(json, where, "num_global_key_value_heads", m.kvHeads);
    const QJsonValue perLayer = json.value(QLatin1String("per_layer_config"));
    if (perLayer.isObject()) {
        // Only the global layers may differ, all alike: one head width and one key/value count.
        const QJsonObject layers = perLayer.toObject();
        std::optional<int64_t> dim, kv;
        for (auto it = layers.begin(); it != layers.end(); ++it) {
            const std::string field = "per_layer_config." + it.key().toStdString();
            bool ok = false;
            const int64_t layer = it.key().toLongLong(&ok);
            if (!ok || layer < 0 || layer >= m.layers)
                throw InvalidInputError(hfField(where, field.c_str()), "expected a layer index from 0 to " + std::to_string(m.layers - 1));
            if (!full[static_cast<size_t>(layer)])
                throw InvalidInputError(hfField(where, field.c_str()), "gives a sliding layer its own shape: only the full-attention layers may differ here");
            if (!it.value().isObject())
                throw InvalidInputError(hfField(where, field.c_str()), "expected an object, got " + jsonTypeName(it.value()));
            const QJsonObject o = it.value().toObject();
            for (auto k = o.begin(); k != o.end(); ++k)
                if (k.key() != QLatin1String("head_dim") && k.key() != QLatin1String("num_key_value_heads"))
                    throw InvalidInputError(hfField(where, (field + "." + k.key().toStdString()).c_str()), "is a per-layer key this import does not model");
            const int64_t d = optionalInt(o, where + " " + field, "head_dim", m.headDim), h = optionalInt(o, where + " " + field, "num_key_value_heads", m.kvHeads);
            if ((dim && *dim != d) || (kv && *kv != h))
                throw InvalidInputError(hfField(where, field.c_str()), "differs from another global layer's shape: the global layers must share one");
            dim = d;
            kv = h;
        }
        for (size_t i = 0; i < full.size() && dim; ++i)
            if (full[i] && !layers.contains(QString::number(i)))
                throw InvalidInputError(hfField(where, "per_layer_config"), "lists some full-attention layers but not layer " + std::to_string(i));
        if (dim) {
            globalHeadDim = *dim;
            globalKv = *kv;
        }
    } else if (!perLayer.isUndefined() && !perLayer.isNull()) {
        throw InvalidInputError(hfField(where, "per_layer_config"), "expected an object keyed by layer index, got " + jsonTypeName(perLayer));
    }
    if (globalHeadDim != m.headDim)
        t.globalHeadDim = globalHeadDim;
    if (globalKv != m.kvHeads)
        t.globalKvHeads = globalKv;

    // rope_parameters per layer type: the sliding layers' default rotary over head_dim, the global
    // layers' proportional one over global_head_dim.
    const QJsonValue ropeValue = json.value(QLatin1String("rope_parameters"));
    if (present(json, "rope_scaling") || present(json, "rope_theta"))
        throw InvalidInputError(hfField(where, present(json, "rope_theta") ? "rope_theta" : "rope_scaling"),
                                "Gemma 4 reads its rotary from rope_parameters (one entry per layer type) only");
    QJsonObject rope;
    if (ropeValue.isObject())
        rope = ropeValue.toObject();
    else if (!ropeValue.isUndefined() && !ropeValue.isNull())
        throw InvalidInputError(hfField(where, "rope_parameters"), "expected an object keyed by layer type, got " + jsonTypeName(ropeValue));
    for (auto it = rope.begin(); it != rope.end(); ++it)
        if (it.key() != QLatin1String("full_attention") && it.key() != QLatin1String("sliding_attention"))
            throw InvalidInputError(hfField(where, ("rope_parameters." + it.key().toStdString()).c_str()),
                                    "is not a layer type of Gemma 4 (expected full_attention and sliding_attention)");
    const LayerRope sliding = layerRope(rope, where, "sliding_attention", {"default", 10000.0, 1.0});
    const LayerRope global = layerRope(rope, where, "full_attention", {"proportional", 1000000.0, 0.25});
    if (sliding.type != "default" || sliding.partial != 1.0)
        throw InvalidInputError(hfField(where, "rope_parameters.sliding_attention"), "expected the default rotary over whole heads (rope_type default), got " + sliding.type);
    if (global.type != "proportional")
        throw InvalidInputError(hfField(where, "rope_parameters.full_attention.rope_type"), "expected proportional (Gemma 4's global layers), got " + global.type);
    t.ropeProportional = true;
    t.partialRotary = global.partial;
    m.ropeTheta = global.theta;
    t.localRopeTheta = sliding.theta;

    // Gemma4RMSNorm: x * (mean(x^2) + eps)^-0.5 * weight in fp32, no unit offset; four per layer.
    t.normPlacement = NormPlacement::Sandwich;
    t.normScaleInFp32 = true;
    m.qkNorm = QkNorm::Head;
    t.valueNorm = true;
    t.attentionScale = 1.0; // Gemma4TextAttention.scaling
    t.embeddingScale = std::sqrt(static_cast<double>(m.hiddenSize));
    t.embeddingScaleRounded = true;
    t.layerScalar = true;
    const QJsonValue cap = json.value(QLatin1String("final_logit_softcapping"));
    if (!cap.isUndefined() && !cap.isNull()) {
        if (!cap.isDouble() || !(cap.toDouble() > 0))
            throw InvalidInputError(hfField(where, "final_logit_softcapping"), "expected a positive number or null, got " + jsonTypeName(cap));
        t.finalSoftcap = cap.toDouble();
    }
    // Per-layer embeddings (E2B, E4B): Gemma4TextConfig's default of 256 turns them on; 0 (the 31B) off.
    t.perLayerInput = optionalCount(json, where, "hidden_size_per_layer_input", 256);
    const int64_t perLayerVocab = optionalCount(json, where, "vocab_size_per_layer_input", 262144);
    if (t.perLayerInput > 0 && perLayerVocab != m.vocabSize) {
        if (perLayerVocab < m.vocabSize)
            throw InvalidInputError(hfField(where, "vocab_size_per_layer_input"), std::to_string(perLayerVocab) + " rows cannot embed every token id of vocab_size " +
                                                                                      std::to_string(m.vocabSize) + " (not a published Gemma 4 layout)");
        t.perLayerVocab = perLayerVocab;
    }
    // Shared keys and values (E2B: the last 20 of 35 layers), and their double-wide MLPs (E2B only):
    // Transformers widens only the shared layers, so without sharing the flag has no effect.
    const int64_t shared = optionalCount(json, where, "num_kv_shared_layers", 0);
    if (shared >= m.layers)
        throw InvalidInputError(hfField(where, "num_kv_shared_layers"), "got " + std::to_string(shared) + " of " + std::to_string(m.layers) +
                                                                         " layers: at least one must compute its own keys and values");
    t.kvSharedLayers = shared;
    t.doubleWideMlp = shared > 0 && optionalBool(json, where, "use_double_wide_mlp", false);
    return m;
}

} // namespace pb
