#include "config/CheckedParameterCount.h"

#include "config/ConfigChecker.h"
#include "config/ParameterTable.h"

#include <algorithm>

namespace pb::validation {

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

} // namespace pb::validation
