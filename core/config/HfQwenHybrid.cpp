#include "config/HfQwenHybrid.h"

#include "config/HfDenseFamilies.h"
#include "config/HfJsonFields.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <cmath>
#include <string_view>

namespace pb {
namespace {

// The class defaults that differ between the three config classes (Transformers 5.17).
struct Defaults {
    int64_t vocab, hidden, intermediate, layers, heads, kvHeads;
    bool moe;
    int64_t experts, expertsPerToken;
};

Defaults defaultsOf(const std::string &type)
{
    if (type == "qwen3_next")
        return {151936, 2048, 5632, 48, 16, 2, true, 512, 10};
    if (type == "qwen3_5_moe_text")
        return {248320, 2048, 0, 40, 16, 2, true, 256, 8};
    return {248320, 4096, 12288, 32, 16, 4, false, 0, 0}; // qwen3_5_text
}

// layer_types (linear_attention / full_attention per layer), else every full_attention_interval-th
// layer full, as the config classes' __post_init__.
LayerSelection fullLayersOf(const QJsonObject &json, const std::string &where, int64_t layers)
{
    std::vector<bool> full(static_cast<size_t>(layers), false);
    const QJsonValue v = json.value(QLatin1String("layer_types"));
    if (!v.isUndefined() && !v.isNull()) {
        if (!v.isArray())
            throw InvalidInputError(hfField(where, "layer_types"), "expected an array of linear_attention / full_attention, got " + jsonTypeName(v));
        const QJsonArray a = v.toArray();
        if (a.size() != layers)
            throw InvalidInputError(hfField(where, "layer_types"), "has " + std::to_string(a.size()) + " entries for " + std::to_string(layers) + " layers (num_hidden_layers)");
        for (qsizetype i = 0; i < a.size(); ++i) {
            const QString type = a[i].toString();
            if (type != QLatin1String("linear_attention") && type != QLatin1String("full_attention"))
                throw InvalidInputError(hfField(where, ("layer_types[" + std::to_string(i) + "]").c_str()),
                                        "expected linear_attention or full_attention, got " + jsonTypeName(a[i]));
            full[static_cast<size_t>(i)] = type == QLatin1String("full_attention");
        }
        return hfLayerSelection(full);
    }
    const int64_t every = optionalInt(json, where, "full_attention_interval", 4);
    if (every < 1)
        throw InvalidInputError(hfField(where, "full_attention_interval"), "expected a positive integer, got " + std::to_string(every));
    return LayerSelection {every, {}};
}

// Keys that would change the model in a way this import does not build, refused by name.
void refuseUnmodelled(const QJsonObject &json, const std::string &where, const std::string &type, bool moe)
{
    if (present(json, "quantization_config"))
        throw InvalidInputError(hfField(where, "quantization_config"), "quantised checkpoints are not modelled (a bf16 or fp32 base is)");
    if (optionalBool(json, where, "attention_bias", false))
        throw InvalidInputError(hfField(where, "attention_bias"), "true is not modelled for " + type + " (Qwen3NextAttention's q/k/v/o biases)");
    if (optionalNumber(json, where, "attention_dropout", 0) != 0)
        throw InvalidInputError(hfField(where, "attention_dropout"), "dropout is not modelled (expected 0)");
    // Qwen3-Next's published config carries use_sliding_window false; no Qwen3NextAttention slides.
    if (optionalBool(json, where, "use_sliding_window", false))
        throw InvalidInputError(hfField(where, "use_sliding_window"), "true is not modelled (Qwen3NextAttention has no sliding window)");
    const QJsonValue act = json.value(QLatin1String("hidden_act"));
    if (!act.isUndefined() && !act.isNull() && act.toString() != QLatin1String("silu"))
        throw InvalidInputError(hfField(where, "hidden_act"), "expected silu (the MLPs are SwiGLU and the Gated DeltaNet conv is SiLU), got " + jsonTypeName(act));
    if (!moe) {
        // Qwen3_5TextConfig deletes every MoE attribute: a dense Qwen3.5 with experts is another model.
        // An empty mlp_only_layers (as one public converter writes) says nothing: every layer is dense.
        const QJsonValue denseOnly = json.value(QLatin1String("mlp_only_layers"));
        const bool emptyDenseOnly = denseOnly.isArray() && denseOnly.toArray().isEmpty();
        for (const char *key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers"})
            if (present(json, key) && !(emptyDenseOnly && std::string_view(key) == "mlp_only_layers"))
                throw InvalidInputError(hfField(where, key), "is a mixture-of-experts setting, but " + type + " is dense (Qwen3_5TextConfig has no experts; qwen3_5_moe does)");
    } else if (type == "qwen3_5_moe_text") {
        // Qwen3_5MoeTextConfig removes these: every layer is sparse, the top-k always renormalised.
        for (const char *key : {"decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"})
            if (present(json, key))
                throw InvalidInputError(hfField(where, key), "is not a qwen3_5_moe setting (every layer is sparse and Qwen3VLMoeTextTopKRouter always renormalises the top-k)");
    }
}

} // namespace

bool isQwenHybridType(const std::string &type) { return type == "qwen3_next" || type == "qwen3_5_text" || type == "qwen3_5_moe_text"; }

ModelShape hfQwenHybridShape(const QJsonObject &json, const std::string &where)
{
    const std::string type = json.value(QLatin1String("model_type")).toString().toStdString();
    const Defaults d = defaultsOf(type);
    refuseUnmodelled(json, where, type, d.moe);
    ModelShape m = hfCommonShape(json, where, type, {d.vocab, d.hidden, d.intermediate, d.layers, d.heads, d.kvHeads, 256, 32768, 1e-6, false});
    m.activation = ActivationKind::SwiGlu;
    m.norm = NormKind::RmsNorm;

    // Qwen3NextRMSNorm (Gemma3RMSNorm): x in fp32 times rsqrt(mean x^2 + eps) times (1 + weight) in
    // fp32, cast back once; the layer norms, the final norm and q_norm / k_norm alike.
    m.traits.normUnitOffset = true;
    m.traits.normScaleInFp32 = true;
    m.qkNorm = QkNorm::Head;
    // Qwen3NextAttention: q_proj gives each head's query and gate; output * sigmoid(gate) before o_proj.
    m.traits.attentionOutputGate = true;

    // Rotary: int(head_dim * partial_rotary_factor) dims (0.25 by default: kwargs.setdefault in the
    // classes' __post_init__), rotate_half. Qwen3.5's rope_parameters add mrope_section and
    // mrope_interleaved: Qwen3VLTextRotaryEmbedding computes one frequency table per position row
    // (temporal, height, width) and takes each frequency from one row; text-only input gives all
    // three rows the same 1-D positions (Qwen3_5TextModel expands arange to them), so the table is
    // the plain rotary one. Image or video positions, which would differ, are not piloted.
    double partial = optionalNumber(json, where, "partial_rotary_factor", 0.25);
    const HfRope rope = hfRope(json, where, 10000.0);
    if (rope.partialRotary > 0)
        partial = rope.partialRotary;
    if (!(partial > 0 && partial <= 1))
        throw InvalidInputError(hfField(where, "partial_rotary_factor"), "expected a number in (0, 1], got " + std::to_string(partial));
    m.ropeTheta = rope.theta;
    m.ropeScaling = rope.scaling;
    m.traits.partialRotary = partial;

    // Gated DeltaNet on every layer but the full-attention ones.
    LinearAttention &l = m.linear;
    l.fullLayers = fullLayersOf(json, where, m.layers);
    l.keyHeads = optionalInt(json, where, "linear_num_key_heads", 16);
    l.valueHeads = optionalInt(json, where, "linear_num_value_heads", 32);
    l.keyHeadDim = optionalInt(json, where, "linear_key_head_dim", 128);
    l.valueHeadDim = optionalInt(json, where, "linear_value_head_dim", 128);
    l.convKernel = optionalInt(json, where, "linear_conv_kernel_dim", 4);
    l.layout = type == "qwen3_next" ? LinearAttentionLayout::QkvzBa : LinearAttentionLayout::QkvZBA;
    for (const auto &[value, key] : {std::pair {l.keyHeads, "linear_num_key_heads"}, std::pair {l.valueHeads, "linear_num_value_heads"},
                                     std::pair {l.keyHeadDim, "linear_key_head_dim"}, std::pair {l.valueHeadDim, "linear_value_head_dim"},
                                     std::pair {l.convKernel, "linear_conv_kernel_dim"}})
        if (value < 1)
            throw InvalidInputError(hfField(where, key), "expected a positive integer, got " + std::to_string(value));
    if (l.valueHeads % l.keyHeads != 0)
        throw InvalidInputError(hfField(where, "linear_num_value_heads"), "must be a multiple of linear_num_key_heads (" + std::to_string(l.valueHeads) + " is not divisible by " +
                                std::to_string(l.keyHeads) + "): q and k are repeated per value head");

    if (!d.moe) {
        m.intermediateSize = optionalInt(json, where, "intermediate_size", d.intermediate);
        return m;
    }
    // Qwen2MoeSparseMoeBlock: softmax router in fp32, top-k, the experts' SwiGLU, plus the shared
    // expert times sigmoid(shared_expert_gate). The experts are named per expert
    // (mlp.experts.E.gate_proj ...) as the Qwen3-Next hub checkpoints hold them.
    MoeConfig &e = m.moe;
    e.experts = optionalInt(json, where, "num_experts", d.experts);
    e.expertsPerToken = optionalInt(json, where, "num_experts_per_tok", d.expertsPerToken);
    e.expertIntermediateSize = optionalInt(json, where, "moe_intermediate_size", 512);
    e.sharedExpertIntermediateSize = optionalInt(json, where, "shared_expert_intermediate_size", 512);
    e.sharedExpertGate = e.sharedExpertIntermediateSize > 0;
    // The load-balancing loss is added with router_aux_loss_coef whatever output_router_logits says
    // (MoeConfig::auxLossWeight; Transformers adds it only when output_router_logits is true).
    optionalBool(json, where, "output_router_logits", false);
    e.auxLossWeight = optionalNumber(json, where, "router_aux_loss_coef", 0.001);
    if (type == "qwen3_next") {
        // Qwen3NextDecoderLayer: sparse where num_experts > 0 and (layer + 1) % decoder_sparse_step == 0,
        // unless listed in mlp_only_layers; the dense MLP is intermediate_size wide.
        m.intermediateSize = optionalInt(json, where, "intermediate_size", d.intermediate);
        e.normalizeTopK = optionalBool(json, where, "norm_topk_prob", true);
        e.sparseStep = optionalInt(json, where, "decoder_sparse_step", 1);
        if (e.sparseStep < 1)
            throw InvalidInputError(hfField(where, "decoder_sparse_step"), "expected a positive integer, got " + std::to_string(e.sparseStep));
        const QJsonValue only = json.value(QLatin1String("mlp_only_layers"));
        if (!only.isUndefined() && !only.isNull()) {
            if (!only.isArray())
                throw InvalidInputError(hfField(where, "mlp_only_layers"), "expected an array of layer indices, got " + jsonTypeName(only));
            const QJsonArray a = only.toArray();
            for (qsizetype i = 0; i < a.size(); ++i) {
                const double v = a[i].toDouble(-1);
                if (!a[i].isDouble() || std::floor(v) != v || v < 0 || v >= static_cast<double>(m.layers))
                    throw InvalidInputError(hfField(where, ("mlp_only_layers[" + std::to_string(i) + "]").c_str()),
                                            "expected a layer index from 0 to " + std::to_string(m.layers - 1) + ", got " + jsonTypeName(a[i]));
                e.denseLayers.push_back(static_cast<int64_t>(v));
            }
        }
    } else {
        // Qwen3_5MoeTextConfig has no intermediate_size (AttributeError): no layer is dense. The
        // shape's dense width is never built; the experts' width stands in so the shape validates.
        if (present(json, "intermediate_size"))
            throw InvalidInputError(hfField(where, "intermediate_size"), "is not a qwen3_5_moe setting (every layer is sparse: moe_intermediate_size and shared_expert_intermediate_size)");
        m.intermediateSize = e.expertIntermediateSize;
        e.normalizeTopK = true;
    }
    if (e.experts < 1 || e.expertsPerToken < 1 || e.expertsPerToken > e.experts)
        throw InvalidInputError(hfField(where, "num_experts_per_tok"), "expected 1 to num_experts (" + std::to_string(e.experts) + "), got " + std::to_string(e.expertsPerToken));
    return m;
}

} // namespace pb
