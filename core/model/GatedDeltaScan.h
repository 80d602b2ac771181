#pragma once
// Internal to the engine (includes torch): the chunk loop of the chunked gated delta rule
// (model/GatedDeltaRule.cpp) as one autograd node, train.kernels = fused's form. The LibTorch loop
// issues about ten kernels per chunk of 64 tokens forward and twice that backward, each on a
// [64, Dk] x [Dk, Dv] product, so at long sequences the layer is bound by launches; here the state's
// recurrence is one kernel launch per direction (kernels/GatedDeltaScanKernels.h) and everything
// that does not carry the state is a batched product over all chunks. Computed in promote(input,
// float32) with autocast off inside (the loop under autocast multiplies in 16 bits), so the CPU
// build runs the same maths through deltaStateScan's LibTorch loop.
#include <torch/torch.h>

namespace pb {

// The recurrence kernels::gatedDeltaScan computes (see its header for the formula), over [B, H, N]
// leading dimensions: decay [B, H, N], x [B, H, N, Dk, C], y [B, H, N, C, Dv], z [B, H, N, C, Dk], xr
// and yr as x and y or undefined, initial [B, H, Dk, Dv] or undefined. Every tensor of one floating
// dtype; the kernel runs where fusedKernelsOn(device), the dtype is float32 and a chunk fits a block,
// else a LibTorch loop (`allowKernel` false: always the loop, for its tests). No autograd.
struct DeltaScanResult {
    torch::Tensor entering;     // [B, H, N, Dk, Dv]: the state before each chunk
    torch::Tensor final;        // [B, H, Dk, Dv]
    torch::Tensor innovation;   // [B, H, N, C, Dv]
};
DeltaScanResult deltaStateScan(const torch::Tensor &decay, const torch::Tensor &x, double xScale, const torch::Tensor &y, const torch::Tensor &z,
                               double zScale, const torch::Tensor &xr, const torch::Tensor &yr, const torch::Tensor &initial, bool reverse,
                               bool allowKernel = true);

// The loop of torch_chunk_gated_delta_rule given its batched terms, per chunk i with state S:
//     vNew = value_i - kCumDecay_i S;  out_i = qDecayed_i S + intra_i vNew;  S = ends_i S + kToEnd_i vNew
// kCumDecay, qDecayed [B, H, N, C, Dk], value [B, H, N, C, Dv], intra [B, H, N, C, C], kToEnd
// [B, H, N, Dk, C], ends [B, H, N], initialState [B, H, Dk, Dv] or undefined. Returns out [B, H, N, C,
// Dv] and the final state, in the compute dtype. Its autograd keeps the states entering each chunk
// and vNew (fp32) beside its inputs as given; the backward runs the same recurrence on the state's
// gradient, from the last chunk to the first.
struct ChunkLoopResult {
    torch::Tensor output;
    torch::Tensor finalState;
};
ChunkLoopResult fusedChunkLoop(const torch::Tensor &kCumDecay, const torch::Tensor &value, const torch::Tensor &qDecayed, const torch::Tensor &intra,
                               const torch::Tensor &kToEnd, const torch::Tensor &ends, const torch::Tensor &initialState);

} // namespace pb
