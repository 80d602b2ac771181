#pragma once
// FLOPs and bytes moved by one optimizer step on one device, for step-time projection and MFU.
//
// Matmuls (Kaplan et al. 2020, "Scaling Laws", sec. 2.1; PaLM, Chowdhery et al. 2022, app. B):
//   forward 2·n·P per matrix of P weights over n tokens; backward 2·n·P for the input gradient
//   plus 2·n·P for the weight gradient when the weight trains. Full training: 6·n·P; a frozen
//   matrix: 4·n·P (the input gradient still flows through it). The embedding lookup is a gather.
// Attention (PaLM app. B convention, the one MFU figures use): Q·K^T and P·V cost
//   2·B·T²·(heads·head_dim) each in forward, 4·B·T²·qDim per layer, twice that in backward:
//   12·B·T²·qDim per layer in all. Causal kernels (FlashAttention) skip about half of it; the
//   convention counts the square, so modelFlops stays comparable across implementations.
// Recomputation re-runs each block's forward once more in backward: hardware FLOPs, not model FLOPs.
#include "config/RunConfig.h"

#include <vector>

namespace pb {

struct ParameterInfo;   // config/ParameterTable.h

struct StepCost {
    double modelFlops = 0;       // PaLM convention, all micro-batches of one step
    double hardwareFlops = 0;    // modelFlops plus recomputation's extra forward
    double bytesMoved = 0;       // weights read per pass, gradients, optimizer traffic, activations
    int64_t tokens = 0;          // tokens per step on this device
};

// `savedActivationBytes`: activations written in forward and read in backward per micro-batch.
StepCost stepCost(const RunConfig &config, int64_t savedActivationBytes);
// The same over `table`, parameterTable(config) already built (a caller costing many steps of one config).
StepCost stepCost(const RunConfig &config, int64_t savedActivationBytes, const std::vector<ParameterInfo> &table);

} // namespace pb
