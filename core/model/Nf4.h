#pragma once
// Internal to the engine (includes torch): QLoRA's NF4 storage of a frozen matrix
// (config/Nf4Format.h) and the linear that reads it. Quantising runs once, at construction or
// load; dequantising runs for every matmul, through kernels/Nf4Kernels.h on a CUDA build, else
// LibTorch composite ops with the same arithmetic.
#include <torch/torch.h>

namespace pb {

// The four tensors of one NF4 matrix, on its device.
struct Nf4Storage {
    torch::Tensor packed;   // uint8 [(numel + 1) / 2]
    torch::Tensor absmax;   // int8 [blocks]: the block maxima less `offset`, in units of their group's scale
    torch::Tensor scales;   // fp32 [groups]
    torch::Tensor offset;   // fp32 [1]: the mean block maximum
    std::vector<int64_t> shape;
};

// Storage for a matrix of `shape` on `device`, uninitialised.
Nf4Storage nf4Allocate(const std::vector<int64_t> &shape, const torch::Device &device);
// Quantises `weight` (any floating dtype and device, the shape of `storage`) into `storage`, a
// slice of 2^20 weights at a time so the transient stays bounded (the estimator's construction
// phase counts it).
void nf4Quantize(const torch::Tensor &weight, Nf4Storage &storage);
// The matrix in `type` (fp32 arithmetic, rounded once).
torch::Tensor nf4Dequantize(const Nf4Storage &storage, at::ScalarType type);
// The block maxima as the dequantisation uses them (fp32 [blocks]).
torch::Tensor nf4BlockMaxima(const Nf4Storage &storage);
// x @ W^T with W dequantised to `computeType` for the forward and again for the backward: autograd
// keeps nothing but the storage it already holds, and W is never trained.
torch::Tensor nf4Linear(const torch::Tensor &x, const Nf4Storage &storage, at::ScalarType computeType);

} // namespace pb
