#pragma once
// Internal to the engine (includes torch): attention's two products, q k^T and p v, read and written
// in the layout the projections leave q, k, v and o_proj reads the output: [B, T, heads, D]. A
// batched GEMM steps from matrix to matrix by one stride, and no single stride steps through both
// the batch rows and a group's heads, so there is a call per (batch row, head in group), each
// batched over the key/value heads (strided views, cuBLAS's leading dimensions). On an H100 profile of Gemma-2-9B (4 layers, 2048 x 4, LoRA) the bmms over
// [B * KV, G * T, D] copies spent 2.96 ms a step in 32 layout copies of q, k, v and the output,
// forward and backward; these make none.
#include <torch/torch.h>

namespace pb {

// q [B, T, H, D], k [B, T, KV, D] (H a multiple of KV, one dtype) -> q k^T [B, H, T, T], unscaled.
// Keeps each of q and k only where the other needs a gradient, as autograd's bmm does; returns
// their gradients laid out as they came (the group's key gradients summed by accumulating GEMMs,
// in 16 bits a rounding per head of the group, as eager's sum over expanded heads rounds).
torch::Tensor headLayoutScores(const torch::Tensor &q, const torch::Tensor &k);

// probs [B, H, T, T], v [B, T, KV, D] -> probs v as [B, T, H, D], keeping each as the scores do.
torch::Tensor headLayoutValues(const torch::Tensor &probs, const torch::Tensor &v);

// Whether the two take q, k, v [B, T, *, D] of these dtypes with this many calls a product (batch
// rows x heads per group): one dtype, at most 64 calls.
bool headLayoutProductsTake(at::ScalarType q, at::ScalarType k, at::ScalarType v, int64_t batch, int64_t groups);

} // namespace pb
