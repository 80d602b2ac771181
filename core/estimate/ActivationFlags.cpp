// The activation walk's flags (estimate/ActivationWalk.h), read once from the engine's parameter
// table: which projections of each layer train or carry an adapter, each block norm's weight, the
// experts' and the per-layer input's, and the gradient and autocast-copy bytes each part of a block
// makes in its backward.
#include "estimate/ActivationWalk.h"

#include <algorithm>
#include <string>

namespace pb::activation {
namespace {

// The role (0 gate, 1 up, 2 down) of an expert's projection named `proj` in the family's
// checkpoints (gate_proj/up_proj/down_proj, or Mixtral's w1/w3/w2); -1 for anything else.
int expertRole(const ExpertNames &names, const std::string &proj)
{
    if (proj == names.gate)
        return 0;
    if (proj == names.up)
        return 1;
    return proj == names.down ? 2 : -1;
}

} // namespace

// Per layer: which projections train or carry an adapter, from the engine's parameter table.
std::vector<LayerFlags> layerFlags(const RunConfig &config, const std::vector<ParameterInfo> &table, bool &embeddingTrains, bool &finalNormTrains,
                                   bool &headTrains)
{
    const ModelShape &m = config.model;
    std::vector<LayerFlags> layers(static_cast<size_t>(std::max<int64_t>(m.layers, 0)));
    for (size_t i = 0; i < layers.size(); ++i)
        if (m.moe.sparse(static_cast<int64_t>(i))) {
            layers[i].sparse = true;
            layers[i].experts.resize(static_cast<size_t>(m.moe.experts));
        }
    const ExpertNames names = expertNames(m);
    const std::string denseMlp = denseMlpPrefix(m);
    const BlockNormNames normNames = blockNormNames(m);
    const std::string *normRoles[4] = {&normNames.beforeAttention, &normNames.afterAttention, &normNames.beforeMlp, &normNames.afterMlp};
    for (auto &layer : layers)
        for (int role = 0; role < 4; ++role)
            layer.normExists[role] = !normRoles[role]->empty();
    embeddingTrains = finalNormTrains = headTrains = false;
    for (const auto &p : table) {
        if (p.layer < 0) {
            if (p.name == "model.embed_tokens.weight")
                embeddingTrains = p.trainable;
            else if (p.name == "model.norm.weight")
                finalNormTrains = p.trainable;
            else if (p.name == "lm_head.weight")
                headTrains = p.trainable;
            continue;
        }
        auto &layer = layers[static_cast<size_t>(p.layer)];
        // qlora's NF4 bases and fp8's bases (cast to float8 at each matmul, not cached by autocast):
        // the largest of the attention and of the MLP.
        const bool attention = p.name.find(".self_attn.") != std::string::npos || p.name.find(".linear_attn.") != std::string::npos;
        const bool float8Base = isFp8(config.train.precision) && p.isMatrix && !p.isLora;
        if (p.nf4) {
            auto &largest = attention ? layer.nf4AttentionNumel : layer.nf4MlpNumel;
            largest = std::max(largest, p.numel);
        }
        if (float8Base) {
            auto &largest = attention ? layer.float8AttentionNumel : layer.float8MlpNumel;
            largest = std::max(largest, p.numel);
        }
        const int64_t bytes = p.trainable ? p.numel * trainableParamBytes(config.train.precision) : 0;
        const int64_t copy = p.trainable && usesAutocast(config.train.precision) && p.isMatrix && !float8Base ? 2 * p.numel : 0;
        // A sparse layer's MLP: everything under its prefix ("mlp." or Mixtral's "block_sparse_moe.").
        const std::string mlpPrefix = "model.layers." + std::to_string(p.layer) + "." + names.prefix;
        if (layer.sparse && p.name.compare(0, mlpPrefix.size(), mlpPrefix) == 0) {
            layer.afterAttentionGradBytes += bytes;
            layer.afterAttentionCopyBytes += copy;
            const std::string rest = p.name.substr(mlpPrefix.size());
            auto setFlags = [&](Projection &proj) {
                if (p.isLora)
                    proj.lora = true;
                else if (p.name.find(".weight") != std::string::npos)
                    proj.trainable = p.trainable;
            };
            // The router is "gate.weight" (Llama 4: "router.weight"): no gate_proj, and no expert's gate either.
            if (p.stackedExperts) {
                // experts.gate_up_proj[_bias], experts.down_proj[_bias]: one tensor for every expert.
                const int role = rest.compare(0, 20, "experts.gate_up_proj") == 0 ? 0 : 2;
                if (rest == "experts.gate_up_proj" || rest == "experts.down_proj")
                    layer.stacked.proj[role].trainable = p.trainable;
                layer.stacked.gradBytes[role] += bytes;
                layer.stacked.copyBytes[role] += copy;
                if (role == 2) {
                    layer.downGradBytes += bytes;
                    layer.downCopyBytes += copy;
                }
            } else if (rest == names.router + ".bias") {
                layer.routerBiasTrains = p.trainable;
                layer.routerGradBytes += bytes;
            } else if (rest == names.router + ".weight") {
                setFlags(layer.router);
                layer.routerGradBytes += bytes;
                layer.routerCopyBytes += copy;
            } else if (rest.rfind("shared_expert_gate.", 0) == 0) {
                setFlags(layer.sharedGate);
                layer.sharedGateGradBytes += bytes;
                layer.sharedGateCopyBytes += copy;
            } else {
                // "experts.E.<proj>." (the family's names) or "<shared>.<proj>." (always
                // gate_proj, up_proj, down_proj): the projection's role.
                const ExpertNames sharedNames {names.shared, "gate_proj", "up_proj", "down_proj"};
                ExpertFlags *expert = nullptr;
                std::string tail;
                int role = -1;
                if (p.expert >= 0 && static_cast<size_t>(p.expert) < layer.experts.size()) {
                    const std::string head = "experts." + std::to_string(p.expert) + ".";
                    expert = &layer.experts[static_cast<size_t>(p.expert)];
                    tail = rest.compare(0, head.size(), head) == 0 ? rest.substr(head.size()) : std::string();
                    role = expertRole(names, tail.substr(0, tail.find('.')));
                } else if (rest.compare(0, sharedNames.prefix.size(), sharedNames.prefix) == 0) {
                    expert = &layer.shared;
                    tail = rest.substr(sharedNames.prefix.size());
                    role = expertRole(sharedNames, tail.substr(0, tail.find('.')));
                }
                if (expert && role >= 0) {
                    setFlags(expert->proj[role]);
                    expert->gradBytes[role] += bytes;
                    expert->copyBytes[role] += copy;
                    if (role == 2) {
                        layer.downGradBytes += bytes;
                        layer.downCopyBytes += copy;
                    }
                }
            }
            continue;
        }
        // The norm of this parameter's role, if it is one of the block's norms.
        int normRole = -1;
        for (int role = 0; role < 4; ++role)
            if (!normRoles[role]->empty() && p.name.find("." + *normRoles[role] + ".weight") != std::string::npos)
                normRole = role;
        if (p.trainable) {
            // Made in the block's backward once the attention's part is reached: the MLP's, every norm
            // after attention's input, o_proj's; the MLP's output norm and down_proj's come first.
            // (Gated DeltaNet: out_proj and the gated norm's weight, as o_proj.)
            // Gemma 4's per-layer input comes last in the block, so its gradients come first.
            const bool perLayerPart = p.name.find(".per_layer_") != std::string::npos || p.name.find(".post_per_layer_input_norm.") != std::string::npos;
            if (perLayerPart) {
                layer.downGradBytes += bytes;
                layer.downCopyBytes += copy;
            }
            if (perLayerPart || p.name.find("." + denseMlp) != std::string::npos || normRole > 0 || p.name.find(".o_proj.") != std::string::npos ||
                p.name.find(".linear_attn.out_proj.") != std::string::npos || p.name.find(".linear_attn.norm.") != std::string::npos) {
                layer.afterAttentionGradBytes += bytes;
                layer.afterAttentionCopyBytes += copy;
            }
            if (p.name.find(".down_proj.") != std::string::npos || normRole == 3) {
                layer.downGradBytes += bytes;
                layer.downCopyBytes += copy;
            }
        }
        // A parameter of the projection `name`, found by the module path `prefix + name + "."`.
        const auto markProjection = [&](const std::string &prefix, const std::string &name) {
            if (p.name.find(prefix + name + ".") == std::string::npos)
                return;
            auto &proj = layer.proj[name];
            proj.float8Input = config.train.precision == Precision::Fp8Tensorwise;
            if (p.isLora)
                proj.lora = true;
            else if (p.name.find(".weight") != std::string::npos)
                proj.trainable = p.trainable;
        };
        for (const auto &name : projectionNames())
            markProjection(".", name);
        // Gated DeltaNet's projections (model/GatedDeltaNet.h), its conv, decay and gated norm.
        static const char *const linearNames[] = {"in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"};
        for (const char *name : linearNames)
            markProjection(".linear_attn.", name);
        if (p.name.find(".linear_attn.A_log") != std::string::npos)
            layer.decayTrains = p.trainable;
        if (p.name.find(".linear_attn.norm.weight") != std::string::npos)
            layer.gatedNormTrains = p.trainable;
        if (p.name.find(".linear_attn.conv1d.weight") != std::string::npos)
            layer.convTrains = p.trainable;
        if (normRole >= 0)
            layer.normTrains[normRole] = p.trainable;
        if (p.name.find(".post_per_layer_input_norm.weight") != std::string::npos)
            layer.perLayerNormTrains = p.trainable;
        if (p.name.find("self_attn.sinks") != std::string::npos)
            layer.sinksTrain = p.trainable;
        if (p.name.find("self_attn.q_norm.weight") != std::string::npos)
            layer.qNormTrains = p.trainable;
        if (p.name.find("self_attn.k_norm.weight") != std::string::npos)
            layer.kNormTrains = p.trainable;
    }
    if (config.model.tieEmbeddings)
        headTrains = embeddingTrains;
    return layers;
}

ModelFlags modelFlags(const RunConfig &config, const std::vector<ParameterInfo> &table)
{
    ModelFlags flags;
    flags.layers = layerFlags(config, table, flags.embeddingTrains, flags.finalNormTrains, flags.headTrains);
    for (const auto &p : table) {
        if (p.name == "model.embed_tokens_per_layer.weight")
            flags.perLayerTableTrains = p.trainable;
        else if (p.name == "model.per_layer_projection_norm.weight")
            flags.perLayerNormTrains = p.trainable;
        else if (p.name == "model.per_layer_model_projection.weight")
            flags.perLayerModelProjection.trainable = p.trainable;
        else if (p.name.rfind("model.per_layer_model_projection.lora_", 0) == 0)
            flags.perLayerModelProjection.lora = true;
    }
    return flags;
}

} // namespace pb::activation
