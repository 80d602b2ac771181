#pragma once
// Internal to the engine (includes torch): the Gated DeltaNet linear-attention layer of the Qwen
// hybrids (Transformers' Qwen3NextGatedDeltaNet and Qwen3_5GatedDeltaNet), the training forward
// without a cache:
//   projections -> q, k, v (one causal depthwise conv of width convKernel over [q | k | v], SiLU,
//   no bias) and the output gate z; b and a per value head;
//   beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias);
//   q and k repeated per value head (repeat_interleave) when valueHeads > keyHeads;
//   the chunked gated delta rule with q and k L2-normalised inside (use_qk_l2norm_in_kernel);
//   the gated RMSNorm norm(o) * silu(z) per value head (weight norm.weight, no unit offset);
//   out_proj.
// Parameter names are the checkpoints' (under model.layers.N.linear_attn.). Like every module of
// the decoder (emptyParam in Transformer.cpp) the parameters are shapes without memory until the
// owner gives each its storage (set_data) in the dtype it keeps.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace pb {

// How the input projections are laid out in the checkpoint.
enum class GatedDeltaNetLayout {
    // qwen3_next: in_proj_qkvz [2 Hk Dk + 2 Hv Dv, hidden] and in_proj_ba [2 Hv, hidden], grouped by
    // key head: per key head q (Dk), k (Dk), then its Hv/Hk value heads' v, then their z; per key
    // head its Hv/Hk b, then its Hv/Hk a (fix_query_key_value_ordering).
    InterleavedQkvzBa,
    // qwen3_5, qwen3_5_moe: in_proj_qkv [2 Hk Dk + Hv Dv, hidden] as [all q | all k | all v],
    // in_proj_z [Hv Dv, hidden], in_proj_b and in_proj_a [Hv, hidden].
    SeparateQkvZBA,
};

struct GatedDeltaNetOptions {
    int64_t hidden = 0;
    int64_t keyHeads = 0;        // linear_num_key_heads
    int64_t valueHeads = 0;      // linear_num_value_heads (a multiple of keyHeads)
    int64_t keyHeadDim = 0;      // linear_key_head_dim
    int64_t valueHeadDim = 0;    // linear_value_head_dim
    int64_t convKernel = 4;      // linear_conv_kernel_dim
    double normEps = 1e-6;       // rms_norm_eps (the gated norm's)
    int64_t chunkSize = 64;      // torch_chunk_gated_delta_rule's default
    bool fusedLoop = false;      // train.kernels = fused: the chunk loop as one node (model/GatedDeltaScan.h)
    GatedDeltaNetLayout layout = GatedDeltaNetLayout::InterleavedQkvzBa;
    // Builds the projection `name` (in -> out, no bias) as a module whose forward the layer calls:
    // the decoder's LoraLinear, so adapters, NF4 and float8 reach these projections as any other.
    // Unset: a plain weight (the tensors below).
    std::function<torch::nn::AnyModule(const std::string &name, int64_t in, int64_t out)> makeProjection;

    int64_t keyDim() const { return keyHeads * keyHeadDim; }
    int64_t valueDim() const { return valueHeads * valueHeadDim; }
    int64_t convChannels() const { return 2 * keyDim() + valueDim(); }
};

// Qwen3NextRMSNormGated: x [..., D] normalised in promote(x, float32), rounded to x's dtype, times
// the weight, times silu(gate) in float32, back to x's dtype.
torch::Tensor gatedRmsNorm(const torch::Tensor &x, const torch::Tensor &gate, const torch::Tensor &weight, double eps);

class GatedDeltaNetImpl : public torch::nn::Module {
public:
    GatedDeltaNetImpl(const GatedDeltaNetOptions &o, const torch::TensorOptions &options);
    // x [B, T, hidden] -> [B, T, hidden].
    torch::Tensor forward(const torch::Tensor &x);
    const GatedDeltaNetOptions &settings() const { return m_o; }

    // The parameters, by their checkpoint names. InterleavedQkvzBa: inProjQkvz, inProjBa;
    // SeparateQkvZBA: inProjQkv, inProjZ, inProjB, inProjA; undefined otherwise, and undefined for
    // every projection built by makeProjection.
    torch::Tensor convWeight;      // conv1d.weight [2 Hk Dk + Hv Dv, 1, convKernel]
    torch::Tensor inProjQkvz, inProjBa;
    torch::Tensor inProjQkv, inProjZ, inProjB, inProjA;
    torch::Tensor dtBias;          // dt_bias [Hv]
    torch::Tensor aLog;            // A_log [Hv]
    torch::Tensor normWeight;      // norm.weight [Dv]
    torch::Tensor outProj;         // out_proj.weight [hidden, Hv Dv]

private:
    torch::Tensor weightOf(const std::string &module, std::vector<int64_t> shape, const torch::TensorOptions &options);
    // A projection in -> out: a plain weight into `weight`, or makeProjection's module into m_projections.
    void projection(const std::string &name, int64_t in, int64_t out, torch::Tensor &weight, const torch::TensorOptions &options);
    torch::Tensor project(const std::string &name, const torch::Tensor &weight, const torch::Tensor &x);
    GatedDeltaNetOptions m_o;
    std::map<std::string, torch::nn::AnyModule> m_projections;
};
TORCH_MODULE(GatedDeltaNet);

} // namespace pb
