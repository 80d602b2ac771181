#include "config/RunConfigValidation.h"

#include "config/ParameterTable.h"
#include "util/Errors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace pb {
namespace {

// The parameter table lists every layer, so an absurd layer count must be refused before it is built.
// Counts and element totals must stay exact in a double (JSON, the estimator's arithmetic): 2^53.
constexpr int64_t kMaxExact = int64_t(1) << 53;

// Checked arithmetic: nullopt once a result leaves [0, 2^53].
std::optional<int64_t> mul(std::optional<int64_t> a, std::optional<int64_t> b)
{
    int64_t r = 0;
    if (!a || !b || __builtin_mul_overflow(*a, *b, &r) || r > kMaxExact)
        return std::nullopt;
    return r;
}

std::optional<int64_t> add(std::optional<int64_t> a, std::optional<int64_t> b)
{
    int64_t r = 0;
    if (!a || !b || __builtin_add_overflow(*a, *b, &r) || r > kMaxExact)
        return std::nullopt;
    return r;
}

std::string shortNumber(double d)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", d);
    return buffer;
}

class Checker final {
public:
    std::vector<ValidationIssue> issues;

    void require(bool ok, const std::string &field, const std::string &message)
    {
        if (!ok)
            issues.push_back({field, message});
    }
    bool positive(int64_t v, const std::string &field)
    {
        require(v > 0, field, "must be a positive integer, got " + std::to_string(v));
        return v > 0;
    }
    void nonNegative(int64_t v, const std::string &field)
    {
        require(v >= 0, field, "must be 0 or more, got " + std::to_string(v));
    }
    void range(double v, double lo, bool loInclusive, double hi, bool hiInclusive, const std::string &field)
    {
        const bool ok = std::isfinite(v) && (loInclusive ? v >= lo : v > lo) && (hiInclusive ? v <= hi : v < hi);
        require(ok, field, "must lie in " + std::string(loInclusive ? "[" : "(") + shortNumber(lo) + ", " + shortNumber(hi) + (hiInclusive ? "]" : ")") + ", got " + shortNumber(v));
    }
};

// Same structure as parameterTable(), in checked arithmetic, without listing anything.
std::optional<int64_t> checkedParameterCount(const RunConfig &c)
{
    const ModelShape &m = c.model;
    const int64_t hd = m.effectiveHeadDim();
    if (mul(m.attentionHeads, hd) == std::nullopt || mul(m.kvHeads, hd) == std::nullopt)
        return std::nullopt;
    const int64_t normSize = m.norm == NormKind::LayerNorm ? 2 : 1;
    auto projection = [&c](std::optional<int64_t> sum, int64_t in, int64_t out, bool bias, const std::string &role) {
        sum = add(sum, mul(in, out));
        if (bias)
            sum = add(sum, out);
        if (loraTargets(c, role))
            sum = add(sum, mul(c.train.lora.rank, add(in, out)));
        return sum;
    };
    const BlockNormNames norms = blockNormNames(m);
    int64_t blockNorms = 0;
    for (const auto *name : {&norms.beforeAttention, &norms.afterAttention, &norms.beforeMlp, &norms.afterMlp})
        blockNorms += name->empty() ? 0 : 1;
    std::optional<int64_t> dense = 0;
    for (const auto &p : denseProjections(m))
        if (!p.attention)
            dense = projection(dense, p.in, p.out, p.bias, p.name);
    // A layer's attention with its norms; Gemma 4's global layers have their own shapes.
    auto attentionOf = [&](int64_t layer) {
        const int64_t lhd = layer >= 0 ? m.headDimAt(layer) : hd, lkv = layer >= 0 ? m.kvHeadsAt(layer) : m.kvHeads;
        std::optional<int64_t> sum = mul(blockNorms * normSize, m.hiddenSize);
        if (mul(m.attentionHeads, lhd) == std::nullopt || mul(lkv, lhd) == std::nullopt)
            return std::optional<int64_t>();
        for (const auto &p : denseProjections(m, layer))
            if (p.attention)
                sum = projection(sum, p.in, p.out, p.bias, p.name);
        if (m.traits.attentionSinks)
            sum = add(sum, m.attentionHeads);
        if (m.latent.enabled()) // q_a_layernorm, kv_a_layernorm
            sum = add(sum, add(m.latent.qLoraRank, m.latent.kvLoraRank));
        // Gemma 4's shared layers have no k_norm.
        const bool shared = layer >= 0 && m.kvShared(layer);
        if (m.qkNorm == QkNorm::Head)
            sum = add(sum, (shared ? 1 : 2) * lhd);
        else if (m.qkNorm == QkNorm::Full)
            sum = add(sum, add(mul(m.attentionHeads, lhd), shared ? 0 : mul(lkv, lhd)));
        return sum;
    };
    // Gemma 4's per-layer embeddings: the gate, the projection back and its norm in every layer.
    const int64_t pli = m.traits.perLayerInput;
    std::optional<int64_t> perLayer = 0;
    if (pli > 0)
        perLayer = add(projection(projection(0, m.hiddenSize, pli, false, "per_layer_input_gate"), pli, m.hiddenSize, false, "per_layer_projection"),
                       mul(normSize, m.hiddenSize));
    // A dense layer's MLP where its width varies (Gemma 4's double-wide shared layers).
    auto denseOf = [&](int64_t layer) {
        if (m.intermediateAt(layer) == m.intermediateSize)
            return dense;
        std::optional<int64_t> sum = 0;
        for (const auto &p : denseProjections(m, layer))
            if (!p.attention)
                sum = projection(sum, p.in, p.out, p.bias, p.name);
        return sum;
    };
    const std::optional<int64_t> attention = attentionOf(-1);
    // A Gated DeltaNet layer in place of attention: dt_bias, A_log, the conv, the gated norm, its projections.
    std::optional<int64_t> linear = mul(blockNorms * normSize, m.hiddenSize);
    if (m.linear.enabled()) {
        const LinearAttention &l = m.linear;
        linear = add(linear, add(mul(2, l.valueHeads), add(mul(l.convChannels(), l.convKernel), l.valueHeadDim)));
        for (const auto &p : linearAttentionProjections(m))
            linear = projection(linear, p.in, p.out, p.bias, p.name);
    }
    std::optional<int64_t> sparse = 0;
    if (m.moe.enabled()) {
        const MoeConfig &e = m.moe;
        std::optional<int64_t> expert = 0;
        if (e.stackedExperts) { // 3-D tensors: no adapters, gpt-oss's biases
            expert = mul(3 * m.hiddenSize, e.expertIntermediateSize);
            if (e.expertBias)
                expert = add(expert, add(mul(2, e.expertIntermediateSize), m.hiddenSize));
        } else {
            expert = projection(expert, m.hiddenSize, e.expertIntermediateSize, false, "gate_proj");
            expert = projection(expert, m.hiddenSize, e.expertIntermediateSize, false, "up_proj");
            expert = projection(expert, e.expertIntermediateSize, m.hiddenSize, false, "down_proj");
        }
        sparse = add(mul(e.experts, m.hiddenSize + (e.routerBias ? 1 : 0)), mul(e.experts, expert));
        if (e.sharedExpertIntermediateSize > 0) {
            sparse = projection(sparse, m.hiddenSize, e.sharedExpertIntermediateSize, false, "gate_proj");
            sparse = projection(sparse, m.hiddenSize, e.sharedExpertIntermediateSize, false, "up_proj");
            sparse = projection(sparse, e.sharedExpertIntermediateSize, m.hiddenSize, false, "down_proj");
            if (e.sharedExpertGate)
                sparse = add(sparse, m.hiddenSize);
        }
    }
    std::optional<int64_t> layers = 0;
    for (int64_t i = 0; i < std::min<int64_t>(m.layers, kMaxModelLayers); ++i)
        layers = add(add(layers, perLayer), add(m.linear.linear(i) ? linear : m.layerShapesVary() || m.kvShared(i) ? attentionOf(i) : attention,
                                                m.moe.sparse(i) ? sparse : denseOf(i)));
    const auto embedding = mul(m.vocabSize, m.hiddenSize);
    auto total = add(layers, add(embedding, mul(normSize, m.hiddenSize)));
    if (pli > 0) { // the per-layer table, the projection of the embedded tokens, its norm
        const auto width = mul(m.layers, pli);
        total = add(total, add(width.has_value() ? mul(m.perLayerVocabSize(), *width) : std::nullopt,
                               add(width.has_value() ? projection(0, m.hiddenSize, *width, false, "per_layer_model_projection") : std::nullopt, pli)));
    }
    if (!m.tieEmbeddings)
        total = add(total, embedding);
    return total;
}

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
    if (t.slidingWindow == 0)
        k.require(t.globalLayers.empty(), t.globalLayers.every > 0 ? "model.global_layers.every" : "model.global_layers.layers",
                  "names the layers that keep full attention among sliding ones; set model.sliding_window too");
    if (t.slidingWindow == 0)
        k.require(t.localRopeTheta == 0, "model.local_rope_theta", "is the sliding layers' rotary base; set model.sliding_window too");
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
                          "layer " + std::to_string(i) + " would share the keys and values of an earlier " + (t.usesSliding(i) ? "sliding" : "global") +
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

void checkTrain(Checker &k, const RunConfig &c, bool shapeOk)
{
    const TrainConfig &t = c.train;
    const bool seqOk = k.positive(t.seqLen, "train.seq_len");
    k.positive(t.microBatch, "train.micro_batch");
    k.positive(t.gradAccum, "train.grad_accum");
    if (seqOk && c.model.maxPositions > 0)
        k.require(t.seqLen <= c.model.maxPositions, "train.seq_len", "must not exceed model.max_positions (" + std::to_string(t.seqLen) + " > " + std::to_string(c.model.maxPositions) + ")");

    if (isFp8(t.precision)) {
        k.require(t.mode != TrainMode::Qlora, "train.precision", "fp8 multiplies a 16-bit or fp32 weight in float8; a qlora base is NF4 (use bf16-mixed)");
        k.require(!c.model.moe.enabled(), "train.precision", "fp8 is built for dense models: a mixture's experts see token counts that float8 matmuls (multiples of 16) cannot take");
        k.require(!c.model.linear.enabled(), "train.precision", "fp8 is not modelled for Gated DeltaNet layers (their conv and gated rule run in 16 or 32 bits): use bf16-mixed");
        // Modulo 16 first: the product itself may overflow on absurd input, which validation must survive.
        const auto tokens = mul(t.seqLen, t.microBatch);
        k.require(((t.seqLen % 16) * (t.microBatch % 16)) % 16 == 0, "train.seq_len",
                  "fp8 matmuls take multiples of 16 tokens (seq_len x micro_batch = " +
                      (tokens ? std::to_string(*tokens) : std::to_string(t.seqLen) + " x " + std::to_string(t.microBatch)) + ")");
        if (shapeOk) {
            // Every layer's own shapes where they differ (Gemma 4's global heads, shared layers,
            // double-wide MLPs), and the per-layer input's projections; the first too narrow is named.
            const ModelShape &m = c.model;
            std::vector<ProjectionShape> shapes = denseProjections(m);
            if (m.layerShapesVary() || m.traits.kvSharedLayers > 0 || m.traits.doubleWideMlp)
                for (int64_t layer = 0; layer < std::min<int64_t>(m.layers, kMaxModelLayers); ++layer)
                    for (const auto &p : denseProjections(m, layer))
                        shapes.push_back(p);
            if (const int64_t pli = m.traits.perLayerInput; pli > 0) {
                shapes.push_back({"per_layer_input_gate", m.hiddenSize, pli});
                shapes.push_back({"per_layer_projection", pli, m.hiddenSize});
            }
            for (const auto &p : shapes)
                if (p.in % 16 != 0 || p.out % 16 != 0) {
                    k.require(false, "train.precision", "fp8 matmuls take widths in multiples of 16; " + p.name + " is " + std::to_string(p.out) + " x " + std::to_string(p.in));
                    break;
                }
        }
    }
    if (t.mode == TrainMode::Qlora)
        k.require(t.precision != Precision::Fp32, "train.precision",
                  "must be 16-bit under train.mode = qlora (bf16-mixed, bf16 or fp16-mixed): the NF4 base is dequantised to the compute dtype");
    if (usesAdapters(t.mode)) {
        const bool rankOk = k.positive(t.lora.rank, "train.lora.rank");
        k.range(t.lora.alpha, 0, false, INFINITY, false, "train.lora.alpha");
        k.range(t.lora.dropout, 0, true, 1, false, "train.lora.dropout");
        // The model's own projection names (Phi-3's qkv_proj and gate_up_proj where fused); a
        // sparse model's experts are still targeted as gate_proj, up_proj, down_proj.
        auto dense = denseProjections(c.model);
        if (c.model.traits.perLayerInput > 0) { // Gemma 4's per-layer embeddings' projections (PEFT's all-linear takes them)
            const int64_t h = c.model.hiddenSize, pli = c.model.traits.perLayerInput;
            dense.push_back({"per_layer_input_gate", h, pli, false, false});
            dense.push_back({"per_layer_projection", pli, h, false, false});
            dense.push_back({"per_layer_model_projection", h, c.model.layers * pli, false, false});
        }
        if (c.model.linear.enabled()) { // linear_attn's projections beside the full layers' (out_proj ...)
            const auto linear = linearAttentionProjections(c.model);
            dense.insert(dense.end(), linear.begin(), linear.end());
        }
        std::vector<std::string> names;
        for (const auto &p : dense)
            names.push_back(p.name);
        if (c.model.moe.enabled())
            for (const char *role : {"gate_proj", "up_proj"})
                if (std::find(names.begin(), names.end(), role) == names.end())
                    names.emplace_back(role);
        std::string known;
        for (const auto &n : names)
            known += n + ", ";
        k.require(!t.lora.targets.empty(), "train.lora.targets", "must name at least one projection (" + known + "or all-linear)");
        for (const auto &target : t.lora.targets)
            k.require(target == "all-linear" || std::find(names.begin(), names.end(), target) != names.end(), "train.lora.targets",
                      "unknown projection '" + target + "' for this model (known: " + known + "all-linear)");
        // PEFT's target_modules name nn.Linear modules; stacked experts are 3-D parameters (PEFT's
        // target_parameters), which this engine does not adapt. A model whose only MLPs are such
        // experts (gpt-oss) would train no adapter there: said, not ignored.
        const MoeConfig &moe = c.model.moe;
        bool denseMlp = moe.sharedExpertIntermediateSize > 0;
        for (int64_t layer = 0; layer < c.model.layers && !denseMlp; ++layer)
            denseMlp = !moe.sparse(layer);
        if (moe.stackedExperts && !denseMlp)
            for (const auto &target : t.lora.targets)
                k.require(target != "gate_proj" && target != "up_proj" && target != "down_proj" && target != "gate_up_proj", "train.lora.targets",
                          "'" + target + "' would only reach the experts, which this model stores as 3-D tensors (experts.gate_up_proj, experts.down_proj); "
                          "LoRA on them is not supported: target the attention (q_proj, k_proj, v_proj, o_proj)");
        if (rankOk && shapeOk) {
            for (const auto &p : dense) {
                if (!loraTargets(c, p.name))
                    continue;
                const int64_t width = std::min(p.in, p.out);
                k.require(t.lora.rank <= width, "train.lora.rank",
                          "must not exceed the width of the targeted layer " + p.name + " (" + std::to_string(t.lora.rank) + " > " + std::to_string(width) + ")");
            }
        }
    }
    if (t.mode == TrainMode::Freeze) {
        const bool any = std::any_of(t.trainable.begin(), t.trainable.end(), [](const std::string &s) { return !s.empty(); });
        k.require(any, "train.trainable", "freeze mode needs a non-empty list of parameter-name parts to keep trainable (e.g. [\"lm_head\", \"layers.31.\"])");
    }

    const OptimizerConfig &o = t.optimizer;
    k.range(o.lr, 0, false, INFINITY, false, "train.lr");
    k.range(o.weightDecay, 0, true, INFINITY, false, "train.weight_decay");
    k.range(o.beta1, 0, true, 1, false, "train.beta1");
    k.range(o.beta2, 0, true, 1, false, "train.beta2");
    k.range(o.eps, 0, false, INFINITY, false, "train.eps");
    k.range(o.momentum, 0, true, 1, false, "train.momentum");
    k.range(t.gradClip, 0, true, INFINITY, false, "train.grad_clip");
    k.range(t.lossScale, 0, false, INFINITY, false, "train.loss_scale");

    const ScheduleConfig &s = t.schedule;
    k.nonNegative(s.warmupSteps, "train.schedule.warmup_steps");
    k.positive(s.totalSteps, "train.schedule.total_steps");
    k.range(s.minLrRatio, 0, true, 1, true, "train.schedule.min_lr_ratio");
}

void checkRest(Checker &k, const RunConfig &c)
{
    k.nonNegative(c.validation.everySteps, "validation.every_steps");
    k.nonNegative(c.validation.batches, "validation.batches");
    if (c.validation.everySteps > 0)
        k.require(c.validation.batches > 0, "validation.batches", "must be positive when validation.every_steps is set");
    k.nonNegative(c.checkpoint.everySteps, "checkpoint.every_steps");
    k.require(c.seed <= static_cast<uint64_t>(kMaxExact), "seed", "must lie within 0..2^53 so the file reproduces it exactly");

    const DataConfig &d = c.data;
    if (d.kind != DataKind::Synthetic)
        k.require(!d.path.empty(), "data.path", std::string("must name the file for data.kind ") + toString(d.kind));
    if (d.kind == DataKind::TokenFile)
        k.require(d.tokenDtype == "uint16" || d.tokenDtype == "uint32" || d.tokenDtype == "npy", "data.token_dtype", "unknown value '" + d.tokenDtype + "' (expected one of: uint16, uint32, npy)");
    if (d.lengths == LengthDistribution::FromFile)
        k.require(!d.lengthsFile.empty(), "data.lengths_file", "must name a file of lengths when data.lengths is 'file'");
    k.nonNegative(d.minLength, "data.min_length");
    if (d.lengths == LengthDistribution::Uniform && c.train.seqLen > 0)
        k.require(d.minLength <= c.train.seqLen, "data.min_length", "must not exceed train.seq_len (" + std::to_string(d.minLength) + " > " + std::to_string(c.train.seqLen) + ")");
    if (d.kind == DataKind::Synthetic)
        k.positive(d.syntheticSamples, "data.synthetic_samples");
    k.require(d.validationFraction >= 0 && d.validationFraction < 1000, "data.validation_per_mille", "must lie in 0..999, got " + std::to_string(d.validationFraction));

    k.range(c.job.amount, 0, false, INFINITY, false, "job.amount");
    if (c.job.unit == JobUnit::Epochs)
        k.range(c.job.datasetTokens, 0, false, INFINITY, false, "job.dataset_tokens");
    else
        k.range(c.job.datasetTokens, 0, true, INFINITY, false, "job.dataset_tokens");
    if (c.job.deadlineHours)
        k.range(*c.job.deadlineHours, 0, false, INFINITY, false, "job.deadline_hours");
}

// Sizes that are each fine but whose products leave exact integer arithmetic.
void checkOverflow(Checker &k, const RunConfig &c)
{
    const auto count = checkedParameterCount(c);
    k.require(count.has_value(), "model", "the parameter count overflows (beyond 2^53); the sizes are too large");
    const TrainConfig &t = c.train;
    if (t.seqLen <= 0 || t.microBatch <= 0 || t.gradAccum <= 0)
        return;
    const auto tokens = mul(t.seqLen, t.microBatch);
    if (!tokens) {
        k.require(false, "train.micro_batch", "tokens per micro-batch (seq_len * micro_batch) overflow 2^53");
        return;
    }
    k.require(mul(tokens, t.gradAccum).has_value(), "train.grad_accum", "tokens per optimizer step (seq_len * micro_batch * grad_accum) overflow 2^53");
    k.require(mul(tokens, c.model.hiddenSize).has_value(), "train.micro_batch", "activation elements (seq_len * micro_batch * hidden_size) overflow 2^53");
    k.require(mul(tokens, c.model.vocabSize).has_value(), "train.micro_batch", "logit elements (seq_len * micro_batch * vocab_size) overflow 2^53");
    k.require(mul(mul(tokens, t.seqLen), c.model.attentionHeads).has_value(), "train.seq_len", "attention score elements (micro_batch * heads * seq_len^2) overflow 2^53");
}

} // namespace

std::vector<ValidationIssue> validateRunConfig(const RunConfig &config)
{
    Checker k;
    bool shapeOk = false;
    k.require(config.schemaVersion >= 1 && config.schemaVersion <= RunConfig::kSchemaVersion, "schema_version",
              "must lie in 1.." + std::to_string(RunConfig::kSchemaVersion) + ", got " + std::to_string(config.schemaVersion));
    checkModel(k, config, shapeOk);
    checkTrain(k, config, shapeOk);
    checkRest(k, config);
    if (shapeOk)
        checkOverflow(k, config);
    if (shapeOk && k.issues.empty() && config.train.mode == TrainMode::Freeze) {
        // Only now is the table cheap and safe to build: a trainable entry matching nothing is a typo.
        const auto table = parameterTable(config);
        for (const auto &part : config.train.trainable) {
            if (part.empty())
                continue;
            const bool matches = std::any_of(table.begin(), table.end(), [&](const ParameterInfo &p) { return p.name.find(part) != std::string::npos; });
            k.require(matches, "train.trainable", "'" + part + "' matches no parameter name (names look like model.layers.0.mlp.up_proj.weight, lm_head.weight)");
        }
    }
    return k.issues;
}

void requireValid(const RunConfig &config)
{
    const auto issues = validateRunConfig(config);
    if (!issues.empty())
        throw InvalidInputError(issues.front().field, issues.front().message);
}

} // namespace pb
