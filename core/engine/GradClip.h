#pragma once
// Internal to the engine (includes torch). Gradient clipping as Python's
// torch.nn.utils.clip_grad_norm_ computes it, in two halves: the total norm with one multi-tensor
// norm per device and dtype (LibTorch's C++ clip_grad_norm_ takes a norm per parameter), and the
// factor every gradient is multiplied by, which the optimizer applies in its own pass (the fused
// AdamW kernel takes it as its gradient divisor, so clipping costs no pass over the gradients).
#include <torch/torch.h>

#include <vector>

namespace pb {

// The 2-norm of all gradients of `params` together (inf or nan when a gradient is); parameters
// without a gradient are skipped.
double totalGradNorm(const std::vector<torch::Tensor> &params);
// What clip_grad_norm_ multiplies every gradient by for a total `norm` under `maxNorm`:
// maxNorm / (norm + 1e-6) when that is below 1, else 1.
double clipScale(double norm, double maxNorm);
// The same norm left on the device as a float64 scalar (no host read: a CUDA graph can hold it),
// for gradients all on one device; undefined where no parameter has a gradient.
torch::Tensor totalGradNormOnDevice(const std::vector<torch::Tensor> &params);
// clipScale's divisor, 1 / clipScale(norm, maxNorm), from a device norm as above: fp32, computed in
// float64 by the same operations as the host's, so equal to it.
torch::Tensor clipDivisorOnDevice(const torch::Tensor &norm, double maxNorm);
// Multiplies every gradient of `params` by `scale` (one multi-tensor multiply per device and dtype);
// a scale of 1 is skipped unless evenByOne (clip_grad_norm_'s pass, which multiplies by 1 too).
void scaleGradients(const std::vector<torch::Tensor> &params, double scale, bool evenByOne = false);

} // namespace pb
