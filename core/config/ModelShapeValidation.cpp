#include "config/ModelShapeValidation.h"

#include "config/ParameterTable.h"

#include <algorithm>
#include <cmath>

namespace pb::validation {
namespace {

// A mixture of experts: each count positive and bounded, the top-k within the experts, the
// routing weights meaningful.
void checkMoe(Checker &k, const ModelShape &m, bool &shapeOk)
{
    const MoeConfig &e = m.moe;
    if (!e.enabled()) {
        k.require(e.expertsPerToken == 0 && e.expertIntermediateSize == 0 && e.sharedExpertIntermediateSize == 0, "model.moe.experts",
                  "is 0 (a dense model), so experts_per_token and the expert sizes must be 0 too");
        return;
    }
    shapeOk &= k.positive(e.expertsPerToken, "model.moe.experts_per_token");
    shapeOk &= k.positive(e.expertIntermediateSize, "model.moe.expert_intermediate_size");
    shapeOk &= k.positive(e.sparseStep, "model.moe.sparse_step");
    k.nonNegative(e.sharedExpertIntermediateSize, "model.moe.shared_expert_intermediate_size");
    if (e.experts > 4096) {
        k.require(false, "model.moe.experts", "at most 4096 experts are supported, got " + std::to_string(e.experts));
        shapeOk = false;
    }
    if (e.expertsPerToken > e.experts) {
        k.require(false, "model.moe.experts_per_token", "must not exceed model.moe.experts (" + std::to_string(e.expertsPerToken) + " > " + std::to_string(e.experts) + ")");
        shapeOk = false;
    }
    for (const auto &[value, field] : {std::pair {e.expertIntermediateSize, "model.moe.expert_intermediate_size"},
                                      std::pair {e.sharedExpertIntermediateSize, "model.moe.shared_expert_intermediate_size"}})
        if (value > (int64_t(1) << 22)) {
            k.require(false, field, "at most " + std::to_string(int64_t(1) << 22) + " is supported, got " + std::to_string(value));
            shapeOk = false;
        }
    k.require(!e.sharedExpertGate || e.sharedExpertIntermediateSize > 0, "model.moe.shared_expert_gate", "needs a shared expert (shared_expert_intermediate_size > 0)");
    for (int64_t layer : e.denseLayers)
        k.require(layer < m.layers, "model.moe.dense_layers", "layer " + std::to_string(layer) + " is not a layer of this model (0.." + std::to_string(m.layers - 1) + ")");
    k.range(e.auxLossWeight, 0, true, 1, true, "model.moe.aux_loss_weight");
    k.range(e.routerJitter, 0, true, 1, false, "model.moe.router_jitter");
    k.range(e.routedScale, 0, false, INFINITY, false, "model.moe.routed_scale");
    const bool groupsOk = k.positive(e.groups, "model.moe.groups") && k.positive(e.groupsPerToken, "model.moe.groups_per_token");
    if (e.scoring == RouterScoring::Softmax) {
        // The softmax router has none of DeepSeek-V3's choice rules.
        k.require(e.groups == 1 && e.groupsPerToken == 1, "model.moe.groups", "group-limited routing needs model.moe.scoring = sigmoid");
        k.require(!e.scoreCorrectionBias, "model.moe.score_correction_bias", "needs model.moe.scoring = sigmoid");
    } else if (groupsOk) {
        k.require(e.experts % e.groups == 0, "model.moe.groups", "must divide model.moe.experts (" + std::to_string(e.experts) + " % " + std::to_string(e.groups) + " != 0)");
        k.require(e.groupsPerToken <= e.groups, "model.moe.groups_per_token", "must not exceed model.moe.groups (" + std::to_string(e.groupsPerToken) + " > " + std::to_string(e.groups) + ")");
        // A group is scored by its two best experts (torch.topk(2) in Transformers).
        k.require(e.groups == 1 || e.experts / e.groups >= 2, "model.moe.groups", "each group needs at least 2 experts (its score is the sum of its best two)");
        k.require(e.groupsPerToken * (e.experts / std::max<int64_t>(e.groups, 1)) >= e.expertsPerToken, "model.moe.groups_per_token",
                  "the chosen groups must hold at least experts_per_token experts");
    }
    k.require(m.activation != ActivationKind::Gelu, "model.activation", "gelu (ungated) experts are not modelled; experts are gated (swiglu or geglu)");
    // Llama 4's router: the sigmoid of each chosen logit, as it is, scales the expert's input.
    if (e.scaleExpertInput)
        k.require(e.scoring == RouterScoring::Sigmoid && !e.normalizeTopK && e.groups == 1 && !e.scoreCorrectionBias && e.routedScale == 1.0,
                  "model.moe.scale_expert_input", "is Llama 4's router: it needs scoring = sigmoid, normalize_top_k = false, one group, no correction bias and routed_scale 1");
    // gpt-oss's router: a softmax over the chosen logits, so neither sigmoid scores nor Llama 4's input scaling.
    if (e.softmaxAfterTopK)
        k.require(e.scoring == RouterScoring::Softmax && !e.scaleExpertInput, "model.moe.softmax_after_top_k", "is gpt-oss's router: it needs scoring = softmax and no scale_expert_input");
    k.require(e.stackedExperts || !e.interleavedGateUp, "model.moe.interleaved_gate_up", "describes stacked experts' gate_up_proj: it needs model.moe.stacked_experts");
    k.require(e.stackedExperts || !e.expertBias, "model.moe.expert_bias", "stacked experts' biases: it needs model.moe.stacked_experts");
    k.range(e.swigluLimit, 0, true, INFINITY, false, "model.moe.swiglu_limit");
    k.require(e.stackedExperts || e.swigluLimit == 0, "model.moe.swiglu_limit", "the clamped SwiGLU is built for stacked experts: it needs model.moe.stacked_experts");
    k.range(e.swigluAlpha, 0, false, INFINITY, false, "model.moe.swiglu_alpha");
    k.require(!e.stackedExperts || m.activation == ActivationKind::SwiGlu, "model.activation", "stacked experts are SwiGLU (or gpt-oss's clamped SwiGLU)");
}

// Each field the type needs must be given and each it does not use left out, so a value that
// would have no effect is reported instead of ignored.
void checkRopeScaling(Checker &k, const RopeScaling &s)
{
    const std::string type = toString(s.type);
    const auto field = [](const char *name) { return std::string("model.rope_scaling.") + name; };
    const auto unused = [&](bool set, const char *name, const char *usedBy) {
        k.require(!set, field(name), std::string("is only used by type ") + usedBy + ", not " + type + "; leave it out");
    };
    const auto needed = [&](bool set, const char *name) {
        k.require(set, field(name), "is required by type " + type);
        return set;
    };
    const bool yarn = s.type == RopeScalingType::Yarn, longRope = s.type == RopeScalingType::LongRope;
    if (s.type == RopeScalingType::None)
        unused(s.factor != 0, "factor", "llama3, linear, yarn or longrope");
    else if (needed(s.factor != 0, "factor"))
        k.range(s.factor, longRope ? 0 : 1, !longRope, INFINITY, false, field("factor"));
    if (!yarn) {
        const RopeScaling d;
        unused(s.betaFast != d.betaFast, "beta_fast", "yarn");
        unused(s.betaSlow != d.betaSlow, "beta_slow", "yarn");
        unused(s.mscale != 0, "mscale", "yarn");
        unused(s.mscaleAllDim != 0, "mscale_all_dim", "yarn");
        unused(!s.truncate, "truncate", "yarn");
    } else {
        k.range(s.betaFast, 0, false, INFINITY, false, field("beta_fast"));
        k.range(s.betaSlow, 0, false, INFINITY, false, field("beta_slow"));
        k.range(s.mscale, 0, true, INFINITY, false, field("mscale"));
        k.range(s.mscaleAllDim, 0, true, INFINITY, false, field("mscale_all_dim"));
    }
    if (!yarn && !longRope)
        unused(s.attentionFactor != 0, "attention_factor", "yarn or longrope");
    else
        k.range(s.attentionFactor, 0, true, INFINITY, false, field("attention_factor"));
    if (!longRope) {
        unused(!s.shortFactor.empty(), "short_factor", "longrope");
        unused(!s.longFactor.empty(), "long_factor", "longrope");
    }
    if (yarn || longRope) {
        unused(s.lowFreqFactor != 0, "low_freq_factor", "llama3");
        unused(s.highFreqFactor != 0, "high_freq_factor", "llama3");
        if (needed(s.originalMaxPositions != 0, "original_max_positions"))
            k.positive(s.originalMaxPositions, field("original_max_positions"));
        return;
    }
    if (s.type != RopeScalingType::Llama3) {
        unused(s.lowFreqFactor != 0, "low_freq_factor", "llama3");
        unused(s.highFreqFactor != 0, "high_freq_factor", "llama3");
        unused(s.originalMaxPositions != 0, "original_max_positions", "llama3, yarn or longrope");
        return;
    }
    const bool low = needed(s.lowFreqFactor != 0, "low_freq_factor");
    const bool high = needed(s.highFreqFactor != 0, "high_freq_factor");
    if (low)
        k.range(s.lowFreqFactor, 0, false, INFINITY, false, field("low_freq_factor"));
    if (high)
        k.range(s.highFreqFactor, 0, false, INFINITY, false, field("high_freq_factor"));
    // Equal factors leave no wavelength between the two bounds to interpolate (Llama 4 Scout's 1 and 1:
    // every frequency is kept or divided); a lower high factor would invert the bounds.
    if (s.lowFreqFactor > 0 && s.highFreqFactor > 0)
        k.require(s.highFreqFactor >= s.lowFreqFactor, field("high_freq_factor"),
                  "must not be below model.rope_scaling.low_freq_factor (" + shortNumber(s.highFreqFactor) + " < " + shortNumber(s.lowFreqFactor) + ")");
    if (needed(s.originalMaxPositions != 0, "original_max_positions"))
        k.positive(s.originalMaxPositions, field("original_max_positions"));
}

void checkSelection(Checker &k, const LayerSelection &s, int64_t layers, const std::string &field)
{
    k.nonNegative(s.every, field + ".every");
    for (int64_t layer : s.layers)
        k.require(layer < layers, field + ".layers", "layer " + std::to_string(layer) + " is not a layer of this model (0.." + std::to_string(layers - 1) + ")");
}

void checkTraits(Checker &k, const ModelShape &m)
{
    const ModelTraits &t = m.traits;
    k.nonNegative(t.slidingWindow, "model.sliding_window");
    checkSelection(k, t.globalLayers, m.layers, "model.global_layers");
    checkSelection(k, t.noRopeLayers, m.layers, "model.no_rope_layers");
    if (t.slidingWindow == 0) {
        k.require(t.globalLayers.empty(), t.globalLayers.every > 0 ? "model.global_layers.every" : "model.global_layers.layers",
                  "names the layers that keep full attention among sliding ones; set model.sliding_window too");
        k.require(!t.lastLayerGlobal, "model.last_layer_global", "keeps the last layer's full attention among sliding ones; set model.sliding_window too");
        k.require(t.localRopeTheta == 0, "model.local_rope_theta", "is the sliding layers' rotary base; set model.sliding_window too");
    }
    k.range(t.partialRotary, 0, false, 1, true, "model.partial_rotary");
    if (t.ropeProportional && m.attentionHeads > 0 && m.headDim >= 0 && t.globalHeadDim >= 0 && std::isfinite(t.partialRotary) && t.partialRotary > 0) {
        // Gemma 4's proportional rotary turns int(partial x global head / 2) frequency pairs of the
        // global heads (the sliding layers turn whole heads): at least one.
        const int64_t globalDim = t.globalHeadDim > 0 ? t.globalHeadDim : m.effectiveHeadDim();
        const auto pairs = static_cast<int64_t>(t.partialRotary * static_cast<double>(globalDim) / 2);
        k.require(pairs >= 1, "model.partial_rotary", "turns no frequency pair of the global heads (" + shortNumber(t.partialRotary) + " x " + std::to_string(globalDim) + " / 2 < 1)");
    } else if (m.attentionHeads > 0 && m.headDim >= 0 && std::isfinite(t.partialRotary) && t.partialRotary > 0) {
        const int64_t dim = m.rotaryDim();
        k.require(dim >= 2 && dim % 2 == 0, "model.partial_rotary", "must rotate an even number of dimensions of at least 2 (head_dim " + std::to_string(m.effectiveHeadDim()) +
                  " x " + shortNumber(t.partialRotary) + " = " + std::to_string(dim) + ")");
    }
    k.range(t.localRopeTheta, 0, true, INFINITY, false, "model.local_rope_theta");
    k.nonNegative(t.globalHeadDim, "model.global_head_dim");
    k.nonNegative(t.globalKvHeads, "model.global_kv_heads");
    if (m.layerShapesVary() || t.ropeProportional)
        k.require(t.slidingWindow > 0, t.ropeProportional ? "model.rope_proportional" : t.globalHeadDim > 0 ? "model.global_head_dim" : t.globalKvHeads > 0 ? "model.global_kv_heads" : "model.global_values_from_keys",
                  "shapes the global layers, those a window spares; set model.sliding_window and model.global_layers too");
    if (t.ropeProportional)
        k.require(t.localRopeTheta > 0, "model.local_rope_theta", "must be set with model.rope_proportional (the sliding layers' base; the global layers' is model.rope_theta)");
    if (t.globalHeadDim > 0)
        k.require(t.globalHeadDim % 2 == 0, "model.global_head_dim", "must be even (the rotary turns pairs), got " + std::to_string(t.globalHeadDim));
    // Global heads of their own width are turned whole by the proportional rotary only.
    k.require(t.globalHeadDim == 0 || t.ropeProportional, "model.global_head_dim", "needs model.rope_proportional (the global layers' rotary over their own heads)");
    k.require(!t.ropeProportional || m.ropeScaling.type == RopeScalingType::None, "model.rope_scaling",
              "is not modelled with model.rope_proportional (Gemma 4's global rotary takes no scaling)");
    if (t.globalKvHeads > 0 && m.attentionHeads > 0)
        k.require(m.attentionHeads % t.globalKvHeads == 0, "model.global_kv_heads", "must divide model.attention_heads (" + std::to_string(m.attentionHeads) + " is not divisible by " + std::to_string(t.globalKvHeads) + ")");
    if (m.layerShapesVary() || t.valueNorm)
        k.require(!m.latent.enabled() && !m.linear.enabled() && !t.fusedQkv, t.valueNorm ? "model.value_norm" : "model.global_head_dim",
                  "is Gemma 4's attention and combines with neither latent nor linear attention nor a fused qkv_proj");
    k.nonNegative(t.perLayerInput, "model.per_layer_input");
    k.nonNegative(t.perLayerVocab, "model.per_layer_vocab");
    if (t.perLayerVocab > 0) {
        k.require(t.perLayerInput > 0, "model.per_layer_vocab", "is the per-layer embeddings' table height; set model.per_layer_input too");
        k.require(t.perLayerVocab >= m.vocabSize, "model.per_layer_vocab",
                  "must cover every token id (at least model.vocab_size " + std::to_string(m.vocabSize) + "), got " + std::to_string(t.perLayerVocab));
    }
    k.nonNegative(t.kvSharedLayers, "model.kv_shared_layers");
    if (t.kvSharedLayers > 0 && m.layers > 0) {
        k.require(t.kvSharedLayers < m.layers, "model.kv_shared_layers",
                  "must leave at least one layer computing its own keys and values (" + std::to_string(t.kvSharedLayers) + " of " + std::to_string(m.layers) + " layers)");
        for (int64_t i = m.firstKvSharedLayer(); i < m.layers && t.kvSharedLayers < m.layers; ++i)
            if (m.kvSourceLayer(i) < 0) {
                k.require(false, "model.kv_shared_layers",
                          "layer " + std::to_string(i) + " would share the keys and values of an earlier " + (m.usesSliding(i) ? "sliding" : "global") +
                              " layer, but no layer before the shared ones is of that kind");
                break;
            }
        k.require(!m.latent.enabled() && !m.linear.enabled() && !t.fusedQkv, "model.kv_shared_layers",
                  "is Gemma 4's attention and combines with neither latent nor linear attention nor a fused qkv_proj");
    }
    k.require(!t.doubleWideMlp || t.kvSharedLayers > 0, "model.double_wide_mlp", "widens the shared layers' MLPs; set model.kv_shared_layers too");
    k.require(!t.doubleWideMlp || !t.fusedGateUp, "model.double_wide_mlp", "is not modelled with a fused gate_up_proj");
    k.range(t.attentionScale, 0, true, INFINITY, false, "model.attention_scale");
    k.range(t.attentionSoftcap, 0, true, INFINITY, false, "model.attention_softcap");
    k.require(m.checkpointQuantization.empty() || (m.checkpointQuantization == "mxfp4" && m.moe.stackedExperts), "model.checkpoint_quantization",
              "only mxfp4 (stacked experts stored in MXFP4, trained as bf16) is known, got '" + m.checkpointQuantization + "'");
    k.require(!(t.attentionSinks && (t.attentionSoftcap > 0 || m.latent.enabled())), "model.attention_sinks",
              "does not combine with model.attention_softcap or latent attention (no family has both)");
    k.range(t.finalSoftcap, 0, true, INFINITY, false, "model.final_softcap");
    k.range(t.queryTemperatureBeta, 0, true, INFINITY, false, "model.query_temperature_beta");
    k.nonNegative(t.queryTemperatureLength, "model.query_temperature_length");
    if (t.queryTemperatureBeta > 0)
        k.require(t.queryTemperatureLength > 0, "model.query_temperature_length", "must be positive when model.query_temperature_beta is set");
    k.require(t.queryTemperatureOffset == 0 || t.queryTemperatureOffset == 1, "model.query_temperature_offset",
              "must be 0 (positions from 0, Ministral 3) or 1 (from 1, Llama 4), got " + std::to_string(t.queryTemperatureOffset));
    k.nonNegative(t.attentionChunk, "model.attention_chunk");
    k.require(!(t.attentionChunk > 0 && t.slidingWindow > 0), "model.attention_chunk", "does not combine with model.sliding_window (one mask per layer)");
    k.range(t.embeddingScale, 0, false, INFINITY, false, "model.embedding_scale");
    k.range(t.residualScale, 0, false, INFINITY, false, "model.residual_scale");
    k.range(t.logitsDivisor, 0, false, INFINITY, false, "model.logits_divisor");
    k.require(!(t.fusedGateUp && m.activation == ActivationKind::Gelu), "model.fused_gate_up", "needs a gated MLP (activation swiglu, geglu or geglu-erf)");
    k.require(!(t.mlpBias && m.moe.enabled()), "model.mlp_bias", "MLP biases are not modelled for experts");
    k.require(!(t.fusedGateUp && m.moe.enabled()), "model.fused_gate_up", "fused expert projections are not modelled");
    k.require(m.norm == NormKind::RmsNorm || !t.normUnitOffset, "model.norm_unit_offset", "applies to RMSNorm only");
    k.require(m.norm == NormKind::RmsNorm || !t.normScaleInFp32, "model.norm_scale_fp32", "applies to RMSNorm only");
}

// DeepSeek-V3's latent attention: every size positive and bounded, the rotary part even, and the
// head_dim (what the rotary tables are built for) the rotary part, as Transformers sets it.
void checkLatent(Checker &k, const ModelShape &m, bool &shapeOk)
{
    const LatentAttention &l = m.latent;
    if (!l.enabled()) {
        k.require(l.qLoraRank == 0 && l.qkNopeHeadDim == 0 && l.qkRopeHeadDim == 0 && l.vHeadDim == 0, "model.latent_attention.kv_lora_rank",
                  "is 0 (no latent attention), so the other latent sizes must be 0 too");
        return;
    }
    const struct { int64_t value; const char *field; bool zeroOk; } sizes[] {
        {l.qLoraRank, "model.latent_attention.q_lora_rank", true}, {l.kvLoraRank, "model.latent_attention.kv_lora_rank", false},
        {l.qkNopeHeadDim, "model.latent_attention.qk_nope_head_dim", true}, {l.qkRopeHeadDim, "model.latent_attention.qk_rope_head_dim", false},
        {l.vHeadDim, "model.latent_attention.v_head_dim", false}};
    for (const auto &s : sizes) {
        const bool ok = s.zeroOk ? s.value >= 0 : s.value > 0;
        k.require(ok, s.field, s.zeroOk ? "must be 0 or more, got " + std::to_string(s.value) : "must be a positive integer, got " + std::to_string(s.value));
        if (s.value > (int64_t(1) << 16)) {
            k.require(false, s.field, "at most " + std::to_string(int64_t(1) << 16) + " is supported, got " + std::to_string(s.value));
            shapeOk = false;
        }
        shapeOk &= ok;
    }
    k.require(l.qkRopeHeadDim % 2 == 0, "model.latent_attention.qk_rope_head_dim", "must be even (rotary pairs), got " + std::to_string(l.qkRopeHeadDim));
    k.require(m.effectiveHeadDim() == l.qkRopeHeadDim, "model.head_dim",
              "must equal model.latent_attention.qk_rope_head_dim (" + std::to_string(l.qkRopeHeadDim) + ") under latent attention: the rotary tables are built for it, got " +
                  std::to_string(m.effectiveHeadDim()));
    k.require(m.kvHeads == m.attentionHeads, "model.kv_heads", "must equal model.attention_heads under latent attention (every head has its own key and value)");
    k.require(m.traits.partialRotary == 1.0 && !m.traits.ropeInterleaved && m.qkNorm == QkNorm::None && !m.traits.fusedQkv && m.traits.attentionScale == 0 &&
                  m.traits.attentionSoftcap == 0 && m.traits.slidingWindow == 0 && m.traits.queryTemperatureBeta == 0,
              "model.latent_attention", "does not combine with partial_rotary, rope_interleaved (use latent_attention.rope_interleave), qk_norm, fused_qkv, "
                                        "attention_scale, attention_softcap, sliding_window or query temperature");
}

// Qwen3-Next / Qwen3.5's Gated DeltaNet layers: sizes positive and bounded, value heads a multiple
// of key heads (q and k are repeated per value head), the full layers within the model.
void checkLinear(Checker &k, const ModelShape &m, bool &shapeOk)
{
    const LinearAttention &l = m.linear;
    if (!l.enabled()) {
        k.require(l.valueHeads == 0 && l.keyHeadDim == 0 && l.valueHeadDim == 0 && l.fullLayers.empty(), "model.linear_attention.key_heads",
                  "is 0 (no linear attention), so value_heads, the head dims and the full layers must be unset too");
        return;
    }
    const struct { int64_t value; const char *field; } sizes[] {
        {l.keyHeads, "model.linear_attention.key_heads"}, {l.valueHeads, "model.linear_attention.value_heads"},
        {l.keyHeadDim, "model.linear_attention.key_head_dim"}, {l.valueHeadDim, "model.linear_attention.value_head_dim"},
        {l.convKernel, "model.linear_attention.conv_kernel"}};
    for (const auto &s : sizes) {
        k.require(s.value > 0, s.field, "must be a positive integer, got " + std::to_string(s.value));
        shapeOk &= s.value > 0;
        if (s.value > (int64_t(1) << 16)) {
            k.require(false, s.field, "at most " + std::to_string(int64_t(1) << 16) + " is supported, got " + std::to_string(s.value));
            shapeOk = false;
        }
    }
    if (l.keyHeads > 0 && l.valueHeads > 0 && l.valueHeads % l.keyHeads != 0) {
        k.require(false, "model.linear_attention.value_heads", "must be a multiple of key_heads (" + std::to_string(l.valueHeads) + " is not divisible by " +
                  std::to_string(l.keyHeads) + ")");
        shapeOk = false;
    }
    k.nonNegative(l.fullLayers.every, "model.linear_attention.full_layers.every");
    for (int64_t layer : l.fullLayers.layers)
        k.require(layer >= 0 && layer < m.layers, "model.linear_attention.full_layers.layers", "expected layer indices from 0 to " + std::to_string(m.layers - 1) +
                  ", got " + std::to_string(layer));
    k.require(!m.latent.enabled() && m.traits.slidingWindow == 0 && m.traits.attentionChunk == 0 && !m.traits.attentionSinks, "model.linear_attention",
              "does not combine with latent attention, sliding_window, attention_chunk or attention_sinks (no family has both)");
}

} // namespace

void checkModel(Checker &k, const RunConfig &c, bool &shapeOk)
{
    const ModelShape &m = c.model;
    shapeOk = true;
    shapeOk &= k.positive(m.layers, "model.layers");
    shapeOk &= k.positive(m.hiddenSize, "model.hidden_size");
    shapeOk &= k.positive(m.attentionHeads, "model.attention_heads");
    shapeOk &= k.positive(m.kvHeads, "model.kv_heads");
    shapeOk &= k.positive(m.intermediateSize, "model.intermediate_size");
    shapeOk &= k.positive(m.vocabSize, "model.vocab_size");
    shapeOk &= k.positive(m.maxPositions, "model.max_positions");
    k.nonNegative(m.headDim, "model.head_dim");
    shapeOk &= m.headDim >= 0;
    // Far beyond any published model, yet far below where sizes overflow or allocations explode.
    const struct { int64_t value; int64_t limit; const char *field; } bounds[] {
        {m.hiddenSize, int64_t(1) << 20, "model.hidden_size"}, {m.attentionHeads, int64_t(1) << 16, "model.attention_heads"},
        {m.kvHeads, int64_t(1) << 16, "model.kv_heads"}, {m.intermediateSize, int64_t(1) << 22, "model.intermediate_size"},
        {m.vocabSize, int64_t(1) << 24, "model.vocab_size"}, {m.maxPositions, int64_t(1) << 24, "model.max_positions"},
        {m.headDim, int64_t(1) << 16, "model.head_dim"}};
    for (const auto &b : bounds) {
        if (b.value > b.limit) {
            k.require(false, b.field, "at most " + std::to_string(b.limit) + " is supported, got " + std::to_string(b.value));
            shapeOk = false;
        }
    }
    if (m.layers > kMaxModelLayers) {
        k.require(false, "model.layers", "at most " + std::to_string(kMaxModelLayers) + " layers are supported, got " + std::to_string(m.layers));
        shapeOk = false;
    }
    if (m.headDim == 0 && m.hiddenSize > 0 && m.attentionHeads > 0 && m.hiddenSize % m.attentionHeads != 0) {
        k.require(false, "model.attention_heads", "must divide model.hidden_size (" + std::to_string(m.hiddenSize) + " is not divisible by " + std::to_string(m.attentionHeads) + "); or give model.head_dim");
        shapeOk = false;
    }
    if (m.attentionHeads > 0 && m.kvHeads > 0 && m.attentionHeads % m.kvHeads != 0) {
        k.require(false, "model.kv_heads", "must divide model.attention_heads (" + std::to_string(m.attentionHeads) + " is not divisible by " + std::to_string(m.kvHeads) + ")");
        shapeOk = false;
    }
    k.require(!m.family.empty(), "model.family", "must not be empty (e.g. llama, mistral, qwen2)");
    k.range(m.ropeTheta, 0, false, INFINITY, false, "model.rope_theta");
    checkRopeScaling(k, m.ropeScaling);
    if (m.ropeScaling.type == RopeScalingType::LongRope && m.headDim >= 0 && m.attentionHeads > 0) {
        const size_t half = static_cast<size_t>(m.rotaryDim() / 2);
        k.require(m.ropeScaling.shortFactor.size() == half, "model.rope_scaling.short_factor", "needs one factor per rotary frequency (" + std::to_string(half) + "), got " + std::to_string(m.ropeScaling.shortFactor.size()));
        k.require(m.ropeScaling.longFactor.size() == half, "model.rope_scaling.long_factor", "needs one factor per rotary frequency (" + std::to_string(half) + "), got " + std::to_string(m.ropeScaling.longFactor.size()));
        for (const auto &[list, name] : {std::pair {&m.ropeScaling.shortFactor, "short_factor"}, std::pair {&m.ropeScaling.longFactor, "long_factor"}})
            for (size_t i = 0; i < list->size(); ++i)
                k.require((*list)[i] > 0, "model.rope_scaling." + std::string(name) + "[" + std::to_string(i) + "]", "must be positive (it divides a frequency), got " + shortNumber((*list)[i]));
    }
    checkTraits(k, m);
    k.range(m.normEps, 0, false, 1, false, "model.norm_eps");
    checkMoe(k, m, shapeOk);
    checkLatent(k, m, shapeOk);
    checkLinear(k, m, shapeOk);
}

} // namespace pb::validation
