#pragma once
// Internal to the engine (includes torch): the gated delta rule of Gated DeltaNet (Qwen3-Next,
// Qwen3.5), the linear attention whose state S [Dk, Dv] per head evolves token by token as
//     S <- exp(g_t) S;   S <- S + k_t (beta_t (v_t - S^T k_t))^T;   o_t = S^T q_t / sqrt(Dk)
// in two forms with the semantics of Transformers' torch fallbacks (models/qwen3_next/
// modeling_qwen3_next.py): the chunked form a training forward uses (torch_chunk_gated_delta_rule)
// and the token-by-token recurrence (torch_recurrent_gated_delta_rule), the reference it is
// tested against. Both are LibTorch operations, so autograd gives their backward.
//
// Shapes as Transformers': q, k [B, T, H, Dk], v [B, T, H, Dv], g and beta [B, T, H] (g the log of
// the decay, <= 0; beta in (0, 1)); initialState, finalState [B, H, Dk, Dv]; the output
// [B, T, H, Dv] in q's dtype. Heads are already repeated to v's count (the layer does that).
//
// Where we differ on purpose: Transformers computes in float32 whatever the input; we compute in
// promote(input, float32), so bf16/fp16/fp32 inputs run in float32 as there and float64 stays
// float64 (the tests need it).
#include <torch/torch.h>

#include <cstdint>

namespace pb {

struct GatedDeltaRuleResult {
    torch::Tensor output;       // [B, T, H, Dv], q's dtype
    torch::Tensor finalState;   // [B, H, Dk, Dv] in the compute dtype; undefined unless asked for
};

// FLA's l2norm as Transformers writes it: x * rsqrt(sum(x^2, last) + eps), in x's dtype.
torch::Tensor gatedDeltaL2Norm(const torch::Tensor &x, double eps = 1e-6);

// torch_chunk_gated_delta_rule: the sequence padded with zeros to a multiple of `chunkSize`; per
// chunk, the decays as a cumulative sum of g, the chunk's keys made mutually consistent through
// (I + strictly-lower(beta k k^T decay))^-1 (Transformers' row recurrence, here one triangular
// solve; its backward is the inverse's derivative), then the chunks in order with the state carried
// from one to the next, the terms that do not read the state computed for all chunks before the
// loop. `l2NormQk`: use_qk_l2norm_in_kernel (the layer passes true). `fusedLoop`: the loop as one
// autograd node over the state's recurrence in fp32 (model/GatedDeltaScan.h, train.kernels = fused);
// else LibTorch ops chunk by chunk, which autocast multiplies in 16 bits as Transformers' does.
GatedDeltaRuleResult chunkGatedDeltaRule(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &g,
                                         const torch::Tensor &beta, int64_t chunkSize = 64, const torch::Tensor &initialState = {},
                                         bool outputFinalState = false, bool l2NormQk = false, bool fusedLoop = false);

// torch_recurrent_gated_delta_rule: one token at a time, as the formula above.
GatedDeltaRuleResult recurrentGatedDeltaRule(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &g,
                                             const torch::Tensor &beta, const torch::Tensor &initialState = {}, bool outputFinalState = false,
                                             bool l2NormQk = false);

// (I - a)^-1 for `a` [..., C, C] strictly lower triangular (its diagonal and upper part are not
// read): what torch_chunk_gated_delta_rule's row recurrence computes, by one batched triangular
// solve. The backward is the inverse's, X^T dX X^T on the strictly lower part, so autograd keeps
// one C x C matrix per chunk. Exposed for its test.
torch::Tensor unitLowerInverse(const torch::Tensor &a);

} // namespace pb
