#pragma once
// Internal to the engine (includes torch). Gradient clipping as Python's
// torch.nn.utils.clip_grad_norm_ does it: one multi-tensor norm and one multi-tensor multiply per
// device and dtype. LibTorch's C++ clip_grad_norm_ takes a norm per parameter and multiplies them
// one by one (about 11 ms of every step of an 8B-width model on an H200).
#include <torch/torch.h>

#include <vector>

namespace pb {

// Scales the gradients of `params` so that their total 2-norm is at most `maxNorm`; returns the
// norm before clipping (inf or nan when a gradient is). Parameters without a gradient are skipped.
double clipGradNorm(const std::vector<torch::Tensor> &params, double maxNorm);

} // namespace pb
