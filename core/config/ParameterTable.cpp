#include "config/ParameterTable.h"

#include <algorithm>
#include <map>

namespace pb {

bool loraTargets(const RunConfig &config, const std::string &projection)
{
    if (!usesAdapters(config.train.mode))
        return false;
    const auto &t = config.train.lora.targets;
    return std::find(t.begin(), t.end(), projection) != t.end() || std::find(t.begin(), t.end(), std::string("all-linear")) != t.end();
}

ExpertNames expertNames(const ModelShape &model)
{
    if (model.family == "mixtral")
        return {"block_sparse_moe.", "w1", "w3", "w2"};
    if (model.family == "llama4_text")
        return {"feed_forward.", "gate_proj", "up_proj", "down_proj", "shared_expert.", "router"};
    if (model.family == "gpt_oss") // mlp.router, and stacked experts (no per-expert names)
        return {"mlp.", "gate_proj", "up_proj", "down_proj", "shared_expert.", "router"};
    // DeepSeek-V3's router scores by sigmoid and its shared experts are one MLP named in the plural.
    if (model.moe.scoring == RouterScoring::Sigmoid)
        return {"mlp.", "gate_proj", "up_proj", "down_proj", "shared_experts."};
    return {"mlp.", "gate_proj", "up_proj", "down_proj"};
}

std::string denseMlpPrefix(const ModelShape &model)
{
    return model.family == "llama4_text" ? "feed_forward." : "mlp.";
}

std::vector<ProjectionShape> denseProjections(const ModelShape &m, int64_t layer)
{
    const int64_t h = m.hiddenSize, i = layer >= 0 ? m.intermediateAt(layer) : m.intermediateSize;
    const int64_t hd = layer >= 0 ? m.headDimAt(layer) : m.effectiveHeadDim();
    const int64_t qDim = m.attentionHeads * hd, kvDim = (layer >= 0 ? m.kvHeadsAt(layer) : m.kvHeads) * hd;
    const ModelTraits &t = m.traits;
    std::vector<ProjectionShape> p;
    if (m.latent.enabled()) {
        // DeepSeek-V3's latent attention: biases only where attention_bias puts them (the two
        // down-projections and o_proj), as DeepseekV3Attention.
        const LatentAttention &l = m.latent;
        const int64_t heads = m.attentionHeads;
        if (l.qLoraRank > 0) {
            p.push_back({"q_a_proj", h, l.qLoraRank, m.attentionBias, true});
            p.push_back({"q_b_proj", l.qLoraRank, heads * l.qkHeadDim(), false, true});
        } else {
            p.push_back({"q_proj", h, heads * l.qkHeadDim(), false, true});
        }
        p.push_back({"kv_a_proj_with_mqa", h, l.kvLoraRank + l.qkRopeHeadDim, m.attentionBias, true});
        p.push_back({"kv_b_proj", l.kvLoraRank, heads * (l.qkNopeHeadDim + l.vHeadDim), false, true});
        p.push_back({"o_proj", heads * l.vHeadDim, h, t.outputBias, true});
    } else if (t.fusedQkv) {
        p.push_back({"qkv_proj", h, qDim + 2 * kvDim, m.attentionBias, true});
    } else {
        p.push_back({"q_proj", h, qDim, m.attentionBias, true});
        // Gemma 4's shared layers read an earlier layer's keys and values: no projections of their own.
        const bool shared = layer >= 0 && m.kvShared(layer);
        if (!shared)
            p.push_back({"k_proj", h, kvDim, m.attentionBias, true});
        if (!shared && (layer < 0 || !m.valuesFromKeys(layer)))
            p.push_back({"v_proj", h, kvDim, m.attentionBias, true});
    }
    if (!m.latent.enabled())
        p.push_back({"o_proj", qDim, h, t.outputBias, true});
    if (t.attentionOutputGate) // each head's gate beside its query (Qwen3NextAttention's q_proj)
        for (auto &proj : p)
            if (proj.name == "q_proj")
                proj.out *= 2;
    if (m.activation == ActivationKind::Gelu) {
        p.push_back({"up_proj", h, i, t.mlpBias, false});
    } else if (t.fusedGateUp) {
        p.push_back({"gate_up_proj", h, 2 * i, t.mlpBias, false});
    } else {
        p.push_back({"gate_proj", h, i, t.mlpBias, false});
        p.push_back({"up_proj", h, i, t.mlpBias, false});
    }
    p.push_back({"down_proj", i, h, t.mlpBias, false});
    return p;
}

std::vector<ProjectionShape> linearAttentionProjections(const ModelShape &m)
{
    const LinearAttention &l = m.linear;
    if (!l.enabled())
        return {};
    const int64_t h = m.hiddenSize;
    std::vector<ProjectionShape> p;
    if (l.layout == LinearAttentionLayout::QkvzBa) {
        p.push_back({"in_proj_qkvz", h, 2 * l.keyDim() + 2 * l.valueDim(), false, true});
        p.push_back({"in_proj_ba", h, 2 * l.valueHeads, false, true});
    } else {
        p.push_back({"in_proj_qkv", h, l.convChannels(), false, true});
        p.push_back({"in_proj_z", h, l.valueDim(), false, true});
        p.push_back({"in_proj_b", h, l.valueHeads, false, true});
        p.push_back({"in_proj_a", h, l.valueHeads, false, true});
    }
    p.push_back({"out_proj", l.valueDim(), h, false, true});
    return p;
}

BlockNormNames blockNormNames(const ModelShape &m)
{
    switch (m.traits.normPlacement) {
    case NormPlacement::Pre: return {"input_layernorm", "", "post_attention_layernorm", ""};
    case NormPlacement::Post: return {"", "post_attention_layernorm", "", "post_feedforward_layernorm"};
    case NormPlacement::Sandwich:
        // GLM-4 names its four norms by what they follow; Gemma by what they precede or follow.
        if (m.family == "glm4")
            return {"input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm"};
        return {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    }
    return {};
}

std::vector<ParameterInfo> parameterTable(const RunConfig &config)
{
    const ModelShape &m = config.model;
    const int64_t h = m.hiddenSize;
    const bool layerNorm = m.norm == NormKind::LayerNorm;
    const int64_t r = config.train.lora.rank;
    std::vector<ParameterInfo> table;

    auto add = [&](std::string name, std::vector<int64_t> shape, int layer, bool matrix) {
        ParameterInfo p;
        p.name = std::move(name);
        p.numel = 1;
        for (auto d : shape)
            p.numel *= d;
        p.shape = std::move(shape);
        p.layer = layer;
        p.isMatrix = matrix;
        table.push_back(std::move(p));
    };
    auto addNorm = [&](const std::string &name, int layer) {
        add(name + ".weight", {h}, layer, false);
        if (layerNorm)
            add(name + ".bias", {h}, layer, false);
    };
    // A projection in -> out, with its LoRA pair (A: r x in, B: out x r) when targeted. `role` is
    // the projection LoRA targets name it by (an expert's w1 is a gate_proj).
    auto addProjection = [&](const std::string &prefix, const std::string &proj, int64_t in, int64_t out, bool bias, int layer, const std::string &role = {}) {
        add(prefix + proj + ".weight", {out, in}, layer, true);
        table.back().nf4 = config.train.mode == TrainMode::Qlora;
        if (bias)
            add(prefix + proj + ".bias", {out}, layer, false);
        if (loraTargets(config, role.empty() ? proj : role)) {
            add(prefix + proj + ".lora_A.weight", {r, in}, layer, true);
            table.back().isLora = true;
            add(prefix + proj + ".lora_B.weight", {out, r}, layer, true);
            table.back().isLora = true;
        }
    };

    const BlockNormNames norms = blockNormNames(m);
    add("model.embed_tokens.weight", {m.vocabSize, h}, -1, true);
    const int64_t pli = m.traits.perLayerInput;
    if (pli > 0) { // Gemma 4's per-layer embeddings: the table, the projection of the embedded tokens, its norm
        add("model.embed_tokens_per_layer.weight", {m.perLayerVocabSize(), m.layers * pli}, -1, true);
        addProjection("model.", "per_layer_model_projection", h, m.layers * pli, false, -1);
        add("model.per_layer_projection_norm.weight", {pli}, -1, false);
    }
    for (int i = 0; i < m.layers; ++i) {
        const std::string prefix = "model.layers." + std::to_string(i) + ".";
        const auto projections = denseProjections(m, i);
        const int64_t hd = m.headDimAt(i);
        const int64_t qDim = m.attentionHeads * hd, kvDim = m.kvHeadsAt(i) * hd;
        auto addNormIf = [&](const std::string &name) {
            if (!name.empty())
                addNorm(prefix + name, i);
        };
        addNormIf(norms.beforeAttention);
        if (m.linear.linear(i)) {
            // GatedDeltaNetImpl's order: its own dt_bias and A_log, then conv1d, the input
            // projections, norm, out_proj (Qwen3.5's four input projections after out_proj).
            const LinearAttention &l = m.linear;
            const std::string mixer = prefix + "linear_attn.";
            add(mixer + "dt_bias", {l.valueHeads}, i, false);
            add(mixer + "A_log", {l.valueHeads}, i, false);
            add(mixer + "conv1d.weight", {l.convChannels(), 1, l.convKernel}, i, true);
            const auto linearProjections = linearAttentionProjections(m);
            const bool interleaved = l.layout == LinearAttentionLayout::QkvzBa;
            for (const auto &p : linearProjections)
                if (interleaved && p.name != "out_proj")
                    addProjection(mixer, p.name, p.in, p.out, p.bias, i);
            add(mixer + "norm.weight", {l.valueHeadDim}, i, false);
            addProjection(mixer, "out_proj", l.valueDim(), h, false, i);
            for (const auto &p : linearProjections)
                if (!interleaved && p.name != "out_proj")
                    addProjection(mixer, p.name, p.in, p.out, p.bias, i);
        }
        // Before the projections, as named_parameters() lists a module's own parameters first.
        if (m.traits.attentionSinks && !m.linear.linear(i))
            add(prefix + "self_attn.sinks", {m.attentionHeads}, i, false);
        for (const auto &p : projections)
            if (p.attention && !m.linear.linear(i))
                addProjection(prefix + "self_attn.", p.name, p.in, p.out, p.bias, i);
        if (m.latent.enabled()) { // the latents' RMSNorms
            if (m.latent.qLoraRank > 0)
                add(prefix + "self_attn.q_a_layernorm.weight", {m.latent.qLoraRank}, i, false);
            add(prefix + "self_attn.kv_a_layernorm.weight", {m.latent.kvLoraRank}, i, false);
        }
        if ((m.qkNorm == QkNorm::Head || m.qkNorm == QkNorm::Full) && !m.linear.linear(i)) { // Llama 4's L2 norm has no weight
            add(prefix + "self_attn.q_norm.weight", {m.qkNorm == QkNorm::Head ? hd : qDim}, i, false);
            if (!m.kvShared(i))
                add(prefix + "self_attn.k_norm.weight", {m.qkNorm == QkNorm::Head ? hd : kvDim}, i, false);
        }
        addNormIf(norms.afterAttention);
        addNormIf(norms.beforeMlp);
        if (m.moe.sparse(i)) {
            const ExpertNames n = expertNames(m);
            const std::string mlp = prefix + n.prefix;
            add(mlp + n.router + ".weight", {m.moe.experts, h}, i, true);
            if (m.moe.routerBias)
                add(mlp + n.router + ".bias", {m.moe.experts}, i, false);
            const double share = static_cast<double>(m.moe.expertsPerToken) / static_cast<double>(m.moe.experts);
            const int64_t ei = m.moe.expertIntermediateSize;
            if (m.moe.stackedExperts) { // as the checkpoints hold them: no per-expert modules, no adapters
                const size_t first = table.size();
                const int64_t experts = m.moe.experts;
                add(mlp + "experts.gate_up_proj", {experts, h, 2 * ei}, i, true);
                if (m.moe.expertBias)
                    add(mlp + "experts.gate_up_proj_bias", {experts, 2 * ei}, i, false);
                add(mlp + "experts.down_proj", {experts, ei, h}, i, true);
                if (m.moe.expertBias)
                    add(mlp + "experts.down_proj_bias", {experts, h}, i, false);
                for (size_t k = first; k < table.size(); ++k) {
                    table[k].stackedExperts = true;
                    table[k].activeFraction = share;
                }
            }
            for (int64_t e = 0; e < (m.moe.stackedExperts ? 0 : m.moe.experts); ++e) {
                const std::string expert = mlp + "experts." + std::to_string(e) + ".";
                const size_t first = table.size();
                addProjection(expert, n.gate, h, ei, false, i, "gate_proj");
                addProjection(expert, n.up, h, ei, false, i, "up_proj");
                const size_t down = table.size();
                addProjection(expert, n.down, ei, h, false, i, "down_proj");
                for (size_t k = first; k < table.size(); ++k) {
                    table[k].expert = static_cast<int>(e);
                    table[k].activeFraction = share;
                    if (table[k].isMatrix && !table[k].isLora)
                        table[k].pool = mlp + (k == down ? "experts.down_proj" : "experts.gate_up_proj");
                }
            }
            if (m.moe.sharedExpertIntermediateSize > 0) {
                const int64_t si = m.moe.sharedExpertIntermediateSize;
                addProjection(mlp + n.shared, "gate_proj", h, si, false, i);
                addProjection(mlp + n.shared, "up_proj", h, si, false, i);
                addProjection(mlp + n.shared, "down_proj", si, h, false, i);
                if (m.moe.sharedExpertGate)
                    add(mlp + "shared_expert_gate.weight", {1, h}, i, true);
            }
        } else {
            for (const auto &p : projections)
                if (!p.attention)
                    addProjection(prefix + denseMlpPrefix(m), p.name, p.in, p.out, p.bias, i);
        }
        addNormIf(norms.afterMlp);
        if (pli > 0) { // after the MLP's residual add: gate, projection back to the stream, its norm
            addProjection(prefix, "per_layer_input_gate", h, pli, false, i);
            addProjection(prefix, "per_layer_projection", pli, h, false, i);
            addNorm(prefix + "post_per_layer_input_norm", i);
        }
    }
    addNorm("model.norm", -1);
    if (!m.tieEmbeddings)
        add("lm_head.weight", {m.vocabSize, h}, -1, true);

    for (auto &p : table) {
        switch (config.train.mode) {
        case TrainMode::Full: p.trainable = true; break;
        case TrainMode::Lora:
        case TrainMode::Qlora: p.trainable = p.isLora; break;
        case TrainMode::Freeze:
            p.trainable = std::any_of(config.train.trainable.begin(), config.train.trainable.end(),
                                      [&](const std::string &s) { return !s.empty() && p.name.find(s) != std::string::npos; });
            break;
        }
    }
    // A pool holds one dtype: an NF4 base is no tensor of its own, and a freeze pattern may train
    // some of a pool's experts and not others. Such members keep allocations of their own.
    std::map<std::string, bool> poolMixed;
    std::map<std::string, bool> poolTrains;
    for (const auto &p : table) {
        if (p.pool.empty())
            continue;
        const auto [it, fresh] = poolTrains.emplace(p.pool, p.trainable);
        poolMixed[p.pool] = poolMixed[p.pool] || p.nf4 || (!fresh && it->second != p.trainable);
    }
    for (auto &p : table)
        if (!p.pool.empty() && poolMixed[p.pool])
            p.pool.clear();
    return table;
}

} // namespace pb
