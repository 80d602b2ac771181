#pragma once
// Internal to the engine (includes torch): sliding-window attention on the flash kernel's own window
// (issue 28). SDPA takes a window only as a [T, T] mask, which sends it to the memory-efficient
// kernel with every key head copied to every query head and every tile of the square computed; the
// flash kernel behind it skips the tiles past the window and reads grouped heads as they are.
#include <torch/torch.h>

namespace pb {

// Whether the windowed kernel takes q [B, H, T, D] with k, v [B, KV, T, D]: LibTorch with the
// window arguments (2.5 or later, built with flash), CUDA, one 16-bit dtype, D a multiple of 8 up
// to config/AttentionKernels.h's kSharedHeadsMaxHeadDim, KV dividing H.
bool windowKernelTakes(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v);
// The same for a device, a dtype and a head width, before any tensor exists (DecoderModel leaves the
// window mask out where every sliding layer runs the kernel).
bool windowKernelRuns(const torch::Device &device, at::ScalarType type, int64_t headDim);

// Transformers' sliding window as a mask [T, T] (bool): true where query i sees key j, i - window < j <= i.
torch::Tensor slidingWindowMask(int64_t t, int64_t window, const torch::Device &device);

// Causal attention where query i sees keys i - window < j <= i (Transformers' sliding window), as
// [B, H, T, D]; its autograd keeps q, k, v, the output and the fp32 log-sum-exp, as SDPA's flash
// node does. Only where windowKernelTakes(q, k, v); throws elsewhere.
torch::Tensor windowedAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, int64_t window);

} // namespace pb
