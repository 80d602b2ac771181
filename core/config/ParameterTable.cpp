#include "config/ParameterTable.h"

#include <algorithm>

namespace pb {

bool loraTargets(const RunConfig &config, const std::string &projection)
{
    if (config.train.mode != TrainMode::Lora)
        return false;
    const auto &t = config.train.lora.targets;
    return std::find(t.begin(), t.end(), projection) != t.end() || std::find(t.begin(), t.end(), std::string("all-linear")) != t.end();
}

std::vector<ParameterInfo> parameterTable(const RunConfig &config)
{
    const ModelShape &m = config.model;
    const int64_t h = m.hiddenSize;
    const int64_t hd = m.effectiveHeadDim();
    const int64_t qDim = m.attentionHeads * hd;
    const int64_t kvDim = m.kvHeads * hd;
    const bool layerNorm = m.norm == NormKind::LayerNorm;
    const bool gated = m.activation != ActivationKind::Gelu;
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
    // A projection in -> out, with its LoRA pair (A: r x in, B: out x r) when targeted.
    auto addProjection = [&](const std::string &prefix, const std::string &proj, int64_t in, int64_t out, bool bias, int layer) {
        add(prefix + proj + ".weight", {out, in}, layer, true);
        if (bias)
            add(prefix + proj + ".bias", {out}, layer, false);
        if (loraTargets(config, proj)) {
            add(prefix + proj + ".lora_A.weight", {r, in}, layer, true);
            table.back().isLora = true;
            add(prefix + proj + ".lora_B.weight", {out, r}, layer, true);
            table.back().isLora = true;
        }
    };

    add("model.embed_tokens.weight", {m.vocabSize, h}, -1, true);
    for (int i = 0; i < m.layers; ++i) {
        const std::string prefix = "model.layers." + std::to_string(i) + ".";
        addNorm(prefix + "input_layernorm", i);
        addProjection(prefix + "self_attn.", "q_proj", h, qDim, m.attentionBias, i);
        addProjection(prefix + "self_attn.", "k_proj", h, kvDim, m.attentionBias, i);
        addProjection(prefix + "self_attn.", "v_proj", h, kvDim, m.attentionBias, i);
        addProjection(prefix + "self_attn.", "o_proj", qDim, h, false, i);
        addNorm(prefix + "post_attention_layernorm", i);
        if (gated)
            addProjection(prefix + "mlp.", "gate_proj", h, m.intermediateSize, false, i);
        addProjection(prefix + "mlp.", "up_proj", h, m.intermediateSize, false, i);
        addProjection(prefix + "mlp.", "down_proj", m.intermediateSize, h, false, i);
    }
    addNorm("model.norm", -1);
    if (!m.tieEmbeddings)
        add("lm_head.weight", {m.vocabSize, h}, -1, true);

    for (auto &p : table) {
        switch (config.train.mode) {
        case TrainMode::Full: p.trainable = true; break;
        case TrainMode::Lora: p.trainable = p.isLora; break;
        case TrainMode::Freeze:
            p.trainable = std::any_of(config.train.trainable.begin(), config.train.trainable.end(),
                                      [&](const std::string &s) { return !s.empty() && p.name.find(s) != std::string::npos; });
            break;
        }
    }
    return table;
}

} // namespace pb
