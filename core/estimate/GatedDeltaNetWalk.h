#pragma once
// Internal to the estimator: what a Gated DeltaNet layer adds to a decoder block's walk
// (estimate/ActivationWalk.h) in place of self-attention.
#include "estimate/ActivationWalk.h"

namespace pb::activation {

// What a Gated DeltaNet layer (model/GatedDeltaNet.cpp, model/GatedDeltaRule.cpp) adds to its block.
struct GatedDeltaNetBytes {
    bool grad = false;         // its output needs a gradient
    int64_t forwardAbove = 0;  // the forward's worst point: the block's kept set so far and what is alive
    int64_t backwardAt = 0;    // the backward's worst point (the chunk loop's): what is still kept and the gradients made
    int64_t noGradLive = 0;    // under no_grad, its worst live set (the block input's norm output included)
};

// `dx1`: the element size of the block norm's output, `y1Grad` whether it needs a gradient, b x t the
// tokens, `fusedKernels` whether the CUDA kernels run; `unkeptCopies` gathers lora_A copies no matmul
// keeps.
GatedDeltaNetBytes gatedDeltaNet(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx1, bool y1Grad, int64_t b, int64_t t,
                                 bool fusedKernels, int64_t &unkeptCopies);

} // namespace pb::activation
