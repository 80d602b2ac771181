#pragma once
// Internal to the engine (includes torch): the operations train.kernels = fused replaces. Each runs
// the CUDA kernel of kernels/FusedKernels.h where the build has them (PB_WITH_CUDA_KERNELS) and
// the tensors are on a CUDA device, else LibTorch composite ops computing the same maths, so the
// CPU build and CI test what the CUDA build runs.
#include <torch/torch.h>

namespace pb {

// Cross-entropy of each row of `logits` [rows, vocab] (any float dtype; changed in place) against
// `targets` [rows] (int64, -100 ignored): returns the rows' losses (fp32, 0 where ignored) and
// leaves in `logits` the gradient of sum(losses) * scale, (softmax - onehot) * scale, in their
// dtype. No autograd: LinearCrossEntropy's forward calls it under no_grad.
torch::Tensor crossEntropyGradInPlace(torch::Tensor &logits, const torch::Tensor &targets, double scale);

// The dtype an eager linear of `input` and `weight` computes in: autocast's where it is on for
// their device, else the promotion of the two.
at::ScalarType eagerComputeType(const torch::Tensor &input, const torch::Tensor &weight);

// Whether crossEntropyGradInPlace runs a kernel for tensors on `device` (it then needs no fp32 copy).
bool fusedKernelsOn(const torch::Device &device);

// RMSNorm as LlamaRMSNorm (fp32 statistics; the normalised input rounded to x's dtype, then
// times the weight), returned in `outType` in one rounding: autocast's dtype where autocast is on,
// so the projections after it share one 16-bit input instead of casting it each. Its autograd
// keeps x, the weight and the per-row rstd only.
torch::Tensor fusedRmsNorm(const torch::Tensor &x, const torch::Tensor &weight, double eps);

} // namespace pb
