#pragma once
// Internal to the engine (includes torch): a mixture's experts held as three-dimensional parameters,
// as gpt-oss and Llama 4 checkpoints store them (mlp.experts.gate_up_proj [E, H, 2I], down_proj
// [E, I, H], gpt-oss's biases gate_up_proj_bias [E, 2I] and down_proj_bias [E, H]), so the
// checkpoint's tensors load as they are, with no split into per-expert projections.
#include <torch/torch.h>

#include <cstdint>

namespace pb {

struct StackedExpertsOptions {
    int64_t experts = 0;
    int64_t hidden = 0;
    int64_t intermediate = 0;
    // gpt-oss: gate and up interleaved on the last dimension (gate = [..., ::2], up = [..., 1::2]);
    // false: gate is the first half, up the second (Llama 4).
    bool interleavedGateUp = false;
    bool bias = false;           // gate_up_proj_bias and down_proj_bias (gpt-oss)
    // > 0: gpt-oss's clamped SwiGLU, gate.clamp(max=limit), up.clamp(-limit, limit),
    // (up + 1) * gate * sigmoid(alpha * gate); 0: silu(gate) * up.
    double swigluLimit = 0;
    double swigluAlpha = 1.702;
};

// The activation of one gate_up projection [..., 2I] -> [..., I], in its dtype.
torch::Tensor stackedExpertActivation(const torch::Tensor &gateUp, const StackedExpertsOptions &o);

class StackedExpertsImpl : public torch::nn::Module {
public:
    StackedExpertsImpl(const StackedExpertsOptions &o, const torch::TensorOptions &options);
    // x [N, H]: the rows of expert 0 first (counts[0] of them), then expert 1's, ... (as SparseMoe
    // permutes them); counts on the host, one per expert, summing to N. Returns [N, H] in the same
    // order: each row through its expert, unweighted. Under autocast the matmuls run in its dtype;
    // the biases add in their own dtype (type promotion, as Transformers' `x @ W[e] + b[e]`).
    torch::Tensor forward(const torch::Tensor &x, c10::ArrayRef<int64_t> counts);
    const StackedExpertsOptions &settings() const { return m_o; }
    torch::Tensor gateUp, gateUpBias, down, downBias;  // gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias

private:
    StackedExpertsOptions m_o;
};
TORCH_MODULE(StackedExperts);

} // namespace pb
