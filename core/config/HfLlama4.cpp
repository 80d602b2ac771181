#include "config/HfLlama4.h"

#include "config/HfDenseFamilies.h"
#include "config/HfJsonFields.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>

namespace pb {
namespace {

// A per-layer list of a config (no_rope_layers, moe_layers, layer_types) as flags, each entry checked.
std::vector<bool> layerFlags(const QJsonObject &json, const std::string &where, const char *key, int64_t layers, bool indices)
{
    const QJsonArray a = json.value(QLatin1String(key)).toArray();
    std::vector<bool> flags(static_cast<size_t>(layers), false);
    if (!indices && a.size() < layers) // Llama4TextAttention indexes no_rope_layers by layer
        throw InvalidInputError(hfField(where, key), "has " + std::to_string(a.size()) + " entries for " + std::to_string(layers) + " layers (num_hidden_layers)");
    for (qsizetype i = 0; i < a.size(); ++i) {
        const QJsonValue e = a.at(i);
        const double d = e.toDouble(-1);
        const std::string name = std::string(key) + "[" + std::to_string(i) + "]";
        if (indices) {
            if (!e.isDouble() || std::floor(d) != d || d < 0 || d >= static_cast<double>(layers))
                throw InvalidInputError(hfField(where, name.c_str()), "expected a layer index from 0 to " + std::to_string(layers - 1) + ", got " + jsonTypeName(e));
            flags[static_cast<size_t>(d)] = true;
        } else if (i < layers) {
            if (!e.isDouble() || (d != 0 && d != 1))
                throw InvalidInputError(hfField(where, name.c_str()), "expected 1 (rotary) or 0 (no rotary), got " + jsonTypeName(e));
            flags[static_cast<size_t>(i)] = d == 1;
        }
    }
    return flags;
}

bool isArrayOrAbsent(const QJsonObject &json, const std::string &where, const char *key)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return false;
    if (!v.isArray())
        throw InvalidInputError(hfField(where, key), "expected an array, got " + jsonTypeName(v));
    return true;
}

// attn_temperature_tuning is a bool in Llama4TextConfig, but the published Scout config gives 4:
// Llama4TextAttention only asks whether it is truthy.
bool truthy(const QJsonObject &json, const std::string &where, const char *key, bool fallback)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return fallback;
    if (v.isBool())
        return v.toBool();
    if (v.isDouble())
        return v.toDouble() != 0;
    throw InvalidInputError(hfField(where, key), "expected true, false or a number, got " + jsonTypeName(v));
}

} // namespace

ModelShape hfLlama4TextShape(const QJsonObject &json, const std::string &where)
{
    for (const char *key : {"quantization_config"})
        if (present(json, key))
            throw InvalidInputError(hfField(where, key), "quantised checkpoints are not modelled (a bf16 or fp32 base is)");
    const double dropout = optionalNumber(json, where, "attention_dropout", 0);
    if (dropout != 0)
        throw InvalidInputError(hfField(where, "attention_dropout"), "dropout is not modelled (expected 0)");
    // Llama4TextConfig's defaults (head_dim and num_key_value_heads read again below for their nulls).
    ModelShape m = hfCommonShape(json, where, "llama4_text", {202048, 5120, 8192, 48, 40, 8, 128, 4096 * 32, 1e-5, false});
    // Llama4TextConfig's class defaults are 8 and 128; an explicit null falls back to the attention
    // heads and hidden_size / heads (its __post_init__).
    auto nullOr = [&](const char *key, int64_t classDefault, int64_t nullDefault) {
        return json.contains(QLatin1String(key)) && json.value(QLatin1String(key)).isNull() ? nullDefault : optionalInt(json, where, key, classDefault);
    };
    m.kvHeads = nullOr("num_key_value_heads", 8, m.attentionHeads);
    m.headDim = nullOr("head_dim", 128, m.hiddenSize / m.attentionHeads);
    // Dense layers are Llama4TextMLP of intermediate_size_mlp; experts and the shared expert are
    // intermediate_size wide.
    m.intermediateSize = optionalInt(json, where, "intermediate_size_mlp", 16384);
    m.attentionBias = m.traits.outputBias = optionalBool(json, where, "attention_bias", false);
    const QJsonValue act = json.value(QLatin1String("hidden_act"));
    if (!act.isUndefined() && !act.isNull() && act.toString() != QLatin1String("silu") && act.toString() != QLatin1String("swish"))
        throw InvalidInputError(hfField(where, "hidden_act"), "expected silu (Llama 4's experts and MLPs are SwiGLU), got " + jsonTypeName(act));
    m.activation = ActivationKind::SwiGlu;
    m.norm = NormKind::RmsNorm;

    // Llama4TextRotaryEmbedding: the complex form, pairs (2i, 2i+1) turned in fp32 and cast back.
    const HfRope rope = hfRope(json, where, 500000.0);
    m.ropeTheta = rope.theta;
    m.ropeScaling = rope.scaling;
    m.traits.ropeInterleaved = true;
    m.traits.ropeFp32 = true;

    // no_rope_layers: 1 keeps the rotary, 0 drops it; absent or empty, every no_rope_layer_interval-th layer drops it.
    std::vector<bool> rotary(static_cast<size_t>(m.layers), true);
    if (isArrayOrAbsent(json, where, "no_rope_layers") && !json.value(QLatin1String("no_rope_layers")).toArray().isEmpty()) {
        rotary = layerFlags(json, where, "no_rope_layers", m.layers, false);
    } else {
        const int64_t every = optionalInt(json, where, "no_rope_layer_interval", 4);
        for (int64_t i = 0; i < m.layers; ++i)
            rotary[static_cast<size_t>(i)] = (i + 1) % every != 0;
    }
    std::vector<bool> noRope(rotary.size());
    std::transform(rotary.begin(), rotary.end(), noRope.begin(), [](bool r) { return !r; });
    m.traits.noRopeLayers = hfLayerSelection(noRope);

    // layer_types: chunked_attention on the rotary layers by default; here the chunked layers must be
    // those (or none), as ModelTraits::attentionChunk applies to the rotary layers.
    std::vector<bool> chunked = rotary;
    if (isArrayOrAbsent(json, where, "layer_types")) {
        const QJsonArray a = json.value(QLatin1String("layer_types")).toArray();
        if (a.size() != m.layers)
            throw InvalidInputError(hfField(where, "layer_types"), "has " + std::to_string(a.size()) + " entries for " + std::to_string(m.layers) + " layers (num_hidden_layers)");
        for (qsizetype i = 0; i < a.size(); ++i) {
            const QString type = a[i].toString();
            if (type != QLatin1String("chunked_attention") && type != QLatin1String("full_attention"))
                throw InvalidInputError(hfField(where, ("layer_types[" + std::to_string(i) + "]").c_str()), "expected chunked_attention or full_attention, got " + jsonTypeName(a[i]));
            chunked[static_cast<size_t>(i)] = type == QLatin1String("chunked_attention");
        }
        const bool none = std::none_of(chunked.begin(), chunked.end(), [](bool c) { return c; });
        if (!none && chunked != rotary)
            throw InvalidInputError(hfField(where, "layer_types"), "chunked_attention on other layers than those with rotary (no_rope_layers) is not modelled");
    }
    if (std::any_of(chunked.begin(), chunked.end(), [](bool c) { return c; })) {
        if (json.contains(QLatin1String("attention_chunk_size")) && json.value(QLatin1String("attention_chunk_size")).isNull())
            throw InvalidInputError(hfField(where, "attention_chunk_size"), "required by the chunked_attention layers (got null)");
        m.traits.attentionChunk = optionalInt(json, where, "attention_chunk_size", 8192);
    }

    // Llama4TextL2Norm on q and k of the rotary layers.
    if (optionalBool(json, where, "use_qk_norm", true))
        m.qkNorm = QkNorm::L2;
    // The attention temperature on the NoPE layers: 1 + attn_scale ln(1 + floor((pos + 1) / floor_scale)).
    if (truthy(json, where, "attn_temperature_tuning", true)) {
        const double scale = optionalNumber(json, where, "attn_scale", 0.1);
        if (!(scale >= 0))
            throw InvalidInputError(hfField(where, "attn_scale"), "expected a number of at least 0, got " + jsonTypeName(json.value(QLatin1String("attn_scale"))));
        if (scale > 0) {
            m.traits.queryTemperatureBeta = scale;
            m.traits.queryTemperatureLength = optionalInt(json, where, "floor_scale", 8192);
            m.traits.queryTemperatureOffset = 1;
            m.traits.queryTemperatureNoRope = true;
            m.traits.queryTemperatureFp32 = true;
        }
    }

    // Experts: Llama4TextMoe in the layers of moe_layers (else every interleave_moe_layer_step-th).
    MoeConfig &e = m.moe;
    e.experts = optionalInt(json, where, "num_local_experts", 16);
    e.expertsPerToken = optionalInt(json, where, "num_experts_per_tok", 1);
    e.expertIntermediateSize = optionalInt(json, where, "intermediate_size", 8192);
    e.sharedExpertIntermediateSize = e.expertIntermediateSize;
    e.scoring = RouterScoring::Sigmoid;
    e.normalizeTopK = false;
    e.scaleExpertInput = true;
    // Llama4TextExperts: gate_up_proj [E, H, 2I] (gate's half first) and down_proj [E, I, H].
    e.stackedExperts = true;
    e.interleavedGateUp = false;
    // Llama4ForCausalLM adds no load-balancing loss whatever output_router_logits and
    // router_aux_loss_coef say, and no model code reads router_jitter_noise: both read, neither applied.
    optionalNumber(json, where, "router_aux_loss_coef", 0.001);
    optionalNumber(json, where, "router_jitter_noise", 0.0);
    optionalBool(json, where, "output_router_logits", false);
    e.auxLossWeight = 0;
    e.routerJitter = 0;
    std::vector<bool> sparse(static_cast<size_t>(m.layers), false);
    if (isArrayOrAbsent(json, where, "moe_layers")) {
        sparse = layerFlags(json, where, "moe_layers", m.layers, true);
    } else {
        const int64_t step = optionalInt(json, where, "interleave_moe_layer_step", 1);
        for (int64_t i = step - 1; i < m.layers; i += step)
            sparse[static_cast<size_t>(i)] = true;
    }
    // A period (layer + 1) % step == 0 is sparse_step; any other set keeps the rest dense by index.
    const LayerSelection pattern = hfLayerSelection(sparse);
    e.denseLayers.clear();
    if (pattern.layers.empty() && pattern.every > 0) {
        e.sparseStep = pattern.every;
    } else if (std::all_of(sparse.begin(), sparse.end(), [](bool s) { return s; })) {
        e.sparseStep = 1;
    } else {
        e.sparseStep = 1;
        for (int64_t i = 0; i < m.layers; ++i)
            if (!sparse[static_cast<size_t>(i)])
                e.denseLayers.push_back(i);
    }
    return m;
}

} // namespace pb
