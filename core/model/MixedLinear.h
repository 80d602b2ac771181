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

// x [..., in] times each of weights[i] [out_i, in] (+ biases[i], undefined for none) in autocast's
// dtype; outputs [..., out_i], not views (the fused LoRA adds its adapter's product in place).
std::vector<torch::Tensor> mixedLinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases);

} // namespace pb
