#pragma once
// Every parameter the engine's model creates, by its Hugging Face name, with its shape and whether
// the run trains it. The parameter counts, the estimator and the safetensors loader all read this,
// so they cannot drift apart.
#include "config/RunConfig.h"

#include <string>
#include <vector>

namespace pb {

struct ParameterInfo {
    std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int layer = -1;              // -1: outside the decoder blocks
    bool trainable = true;
    bool isLora = false;
    bool isMatrix = false;       // 2-D weight of a projection (FLOPs, weight decay)
    // Stored as NF4 (train.mode = qlora: a projection's frozen base matrix), as the buffers of
    // config/Nf4Format.h's nf4Tensors instead of one tensor of this name.
    bool nf4 = false;
    int expert = -1;             // a routed expert's weight: its index; -1 otherwise
    // Stacked experts' tensor (experts.gate_up_proj, ...): every routed expert along dimension 0.
    bool stackedExperts = false;
    bool routed() const { return expert >= 0 || stackedExperts; }
    // Parameters with the same pool share one allocation, in table order: a sparse layer's
    // per-expert gate and up weights ([E, 2I, H], gate's rows first) and its down weights
    // ([E, H, I]), so the experts can run as one grouped GEMM and the caching allocator holds one
    // block instead of one rounded block per expert matrix. Empty: an allocation of its own.
    std::string pool;
    // The share of tokens this weight multiplies: expertsPerToken / experts for a routed expert's
    // weights, 1 for everything else (FLOPs use it; memory counts every weight).
    double activeFraction = 1.0;
};

std::vector<ParameterInfo> parameterTable(const RunConfig &config);
// The MLP of a sparse layer as it is named in the family's checkpoints: prefix ("mlp." or
// "block_sparse_moe.") and the names of the gate, up and down projections of one expert.
struct ExpertNames {
    std::string prefix;
    std::string gate, up, down;
    std::string shared = "shared_expert.";   // the shared expert's module, under prefix
    std::string router = "gate";             // the router's module, under prefix (Llama 4: "router")
};
ExpertNames expertNames(const ModelShape &model);
// A dense layer's MLP module with its dot: "mlp.", or Llama 4's "feed_forward.".
std::string denseMlpPrefix(const ModelShape &model);
// A dense layer's projections as the family's checkpoints name them: q/k/v (or Phi-3's fused
// qkv_proj), o_proj, then the MLP's gate/up (or the fused gate_up_proj, gate's half first) and down.
struct ProjectionShape {
    std::string name;
    int64_t in = 0, out = 0;
    bool bias = false;
    bool attention = false;   // before o_proj's output joins the residual
};
// `layer`: that layer's own head width, key/value heads and values (Gemma 4's global layers:
// model.global_head_dim, model.global_kv_heads, no v_proj under model.global_values_from_keys);
// -1: the model-wide head_dim and kv_heads with every projection.
std::vector<ProjectionShape> denseProjections(const ModelShape &model, int64_t layer = -1);
// A Gated DeltaNet layer's projections (under linear_attn.), in the checkpoint's layout:
// in_proj_qkvz and in_proj_ba (Qwen3-Next) or in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (Qwen3.5),
// then out_proj; all without bias. Empty when the model has no linear attention. LoRA targets name
// them as they are named here (PEFT's all-linear takes all of them; conv1d is no Linear).
std::vector<ProjectionShape> linearAttentionProjections(const ModelShape &model);
// The norms of a decoder block by checkpoint name, empty where the placement has none: before
// attention, on attention's output, before the MLP, on the MLP's output.
struct BlockNormNames {
    std::string beforeAttention, afterAttention, beforeMlp, afterMlp;
};
BlockNormNames blockNormNames(const ModelShape &model);
// True when `projection` (q_proj, ..., down_proj) gets a LoRA adapter under this config.
bool loraTargets(const RunConfig &config, const std::string &projection);

} // namespace pb
