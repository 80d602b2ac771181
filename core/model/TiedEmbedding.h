#pragma once
// Internal to the engine (includes torch): the lookup of a tied embedding on the fused path. Its
// weight is also the head's, whose gradient the fused loss makes whole in the forward; the lookup's
// gradient is added into that one tensor, a row per token, instead of being made as a dense
// [V, h] tensor (zeros, then the rows) that the autograd engine then sums with the head's: on an
// H100, Gemma-2-9B's vocabulary spent 5.3 ms of a 181 ms step on those three passes.
#include <torch/torch.h>

namespace pb {

// Where the fused loss leaves the head's weight gradient for the lookup's backward. Filled only
// where that gradient is the very tensor the loss hands to autograd (the weight in fp32, as the
// gradient is made), else left empty and the lookup's gradient is the dense one.
struct TiedHeadGradient : torch::CustomClassHolder {
    torch::Tensor grad;
};

// torch::embedding(weight, ids); in the backward, ids' rows of the incoming gradient are added
// into slot->grad where the loss filled it (the weight then gets no gradient of its own from here),
// else the dense gradient is returned as torch::embedding's.
torch::Tensor tiedEmbedding(const torch::Tensor &weight, const torch::Tensor &ids, const c10::intrusive_ptr<TiedHeadGradient> &slot);

} // namespace pb
