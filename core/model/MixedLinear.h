#pragma once
// Internal to the engine (includes torch): the fused path's projections under autocast, as one
// autograd node per group of projections that read one input (q, k, v; gate, up; or one alone).
// The same GEMMs as autocast's linear, without what autograd adds around them: each weight's
// gradient is written by its GEMM in the weight's dtype (fp32 for a master weight, where autograd
// makes a 16-bit product and then casts it), and the input's gradient is accumulated by the GEMMs
// themselves (beta = 1) instead of summed by separate adds. What the forward keeps is autograd's:
// the 16-bit input and each weight's 16-bit copy.
#include <torch/torch.h>

namespace pb {

// Whether mixedLinearShared takes this call: grad mode on (a forward under no_grad, the first pass
// of a recomputed block, keeps autocast's own cast and its cache), autocast on for x's device, and
// x already in autocast's dtype (an fp32 input is cast by autocast once per projection, which the
// estimator counts).
bool mixedLinearApplies(const torch::Tensor &x);

// A LoRA adapter inside the node: lora_A [r, in], lora_B [out, r] (undefined a: none), alpha / r,
// and its dropout probability (0: none). With dropout, lora_A reads its own dropped copy of x, drawn
// as torch::dropout draws it (native_dropout on a CUDA device, the input's product with a noise
// tensor elsewhere), in the adapters' order; the node keeps the mask (or noise), not the copy, which
// the backward makes again from x: one boolean (or 16-bit) tensor an adapter where autograd around
// LoraLinearImpl's own adapter keeps the mask and the 16-bit copy.
struct MixedAdapter {
    torch::Tensor a, b;
    double scaling = 0;
    double dropout = 0;
};

// x [..., in] times each of weights[i] [out_i, in] (+ biases[i], undefined for none) in autocast's
// dtype, plus scaling * (x A^T) B^T where adapters[i] has one (empty: none anywhere); outputs
// [..., out_i], not views (a LoRA adapter outside the node adds its product in place). With
// adapters inside, their product is added by the B GEMM's accumulation, their gradients written
// in fp32 by their GEMMs, and dDown A joins the input's gradient in the same sum: no [tokens, in]
// product of each adapter added apart, as autograd does around LoraLinearImpl's own adapter (under
// dropout the masked product joins it through FusedOps' addDroppedLowRank, one kernel on a card).
std::vector<torch::Tensor> mixedLinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases,
                                             const std::vector<MixedAdapter> &adapters = {});

} // namespace pb
