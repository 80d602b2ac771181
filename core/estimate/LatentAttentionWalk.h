#pragma once
// Internal to the estimator: what DeepSeek-V3's latent attention (model/LatentAttention.cpp) adds to
// a decoder block's walk (estimate/ActivationWalk.h) in place of q/k/v attention.
#include "estimate/ActivationWalk.h"

namespace pb::activation {

struct LatentAttentionBytes {
    bool grad = false;          // the attention's output needs a gradient
    int64_t atAttention = 0;    // the block's kept set once the attention has run (walk.saved then)
    int64_t forwardAbove = 0;   // grad-mode forward peak of the attention: the kept set and what is alive
    int64_t softmaxGrads = 0;   // at the softmax's backward: its gradients and the value's
    int64_t noGradLive = 0;     // live set under no_grad at the attention's worst point, its input included
    int64_t outputWidth = 0;    // o_proj's input: heads x v_head_dim
    bool fusedKernel = false;   // scaled_dot_product_attention runs (else the math path or the eager form)
};

// `dx1`: the element size of the block norm's output, `y1Grad` whether it needs a gradient;
// `fusedAvailable` whether the build has scaled_dot_product_attention and the run may use it;
// `unkeptCopies` gathers lora_A copies no matmul keeps.
LatentAttentionBytes latentAttention(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx1, bool y1Grad, bool fusedAvailable,
                                     int64_t &unkeptCopies);

} // namespace pb::activation
