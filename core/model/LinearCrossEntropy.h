#pragma once
// Internal to the engine (includes torch): the mean cross-entropy of linear(hidden, weight), the
// language-model head and its loss, without the full logits. Tokens go through in chunks; a
// chunk's logits become their own gradient in place (model/FusedOps.h: a CUDA kernel, else an fp32
// copy) and live only while that chunk is processed, and the gradients of hidden and weight are
// made in the forward pass (as Liger-Kernel's fused linear cross-entropy does), so the backward
// only scales them. The maths is Transformers' ForCausalLMLoss: logits upcast to fp32, targets of
// -100 ignored, mean over the rest.
#include "model/TiedEmbedding.h"

#include <torch/torch.h>

namespace pb {

// What the model does to its logits before the loss: Granite divides them, Gemma 2 soft-caps them
// (cap * tanh(z / cap)), each in the logits' dtype as Transformers does.
struct LogitsTransform {
    double divisor = 1.0;
    double softcap = 0.0;   // 0: none
};

// hidden [N, h], weight [V, h], targets [N] (int64). chunkTokens <= 0: chosen from memory by
// estimate/ActivationModel.h's linearCrossEntropyChunkTokens, which the estimator shares.
// rowStride <= 0: the logits rows' stride by the device's rule (linearCrossEntropyRowStride: padded
// to 8 on the CUDA kernel's path); a larger one pads them on any device, so a CPU test reaches the
// padded path (the vocabulary's last few rows in GEMMs of their own). `tied`: the embedding's
// lookup (model/TiedEmbedding.h) whose weight this is; given the weight's gradient where it is that
// very tensor (an fp32 weight), which the backward then scales in place rather than in a copy.
torch::Tensor linearCrossEntropy(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &targets, int64_t chunkTokens = 0,
                                 const LogitsTransform &transform = {}, int64_t rowStride = 0,
                                 const c10::intrusive_ptr<TiedHeadGradient> &tied = {});

} // namespace pb
