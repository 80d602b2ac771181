#pragma once
// Internal to the engine (includes torch): a projection's matmuls in float8, train.precision =
// fp8-rowwise | fp8-tensorwise. Each operand is scaled by its absolute maximum (per row of the
// operand along the contracted dimension, or per tensor) into e4m3's range, cast, multiplied with
// fp32 accumulation and scaled back. Tensorwise casts the output gradient to e5m2 and keeps the
// forward's float8 input for the weight gradient; rowwise keeps e4m3 throughout and keeps the
// 16-bit input, re-scaled along the other dimension for the weight gradient (a row scale cannot
// follow a transpose): the forward's cast of X and W also takes their column maxima, so the
// backward casts X^T, W^T and dY^T straight from X, W and dY. The weight gradient is written in
// the weight's dtype (fp32 for a master weight). On a CUDA device with LibTorch's float8
// (compat::hasFloat8) the matmuls are _scaled_mm; elsewhere the same maths runs in fp32 on values
// rounded to the float8 grid (roundToFloat8), which tests check against a float64 reference.
#include <torch/torch.h>

namespace pb {

enum class Fp8Scaling { Rowwise, Tensorwise };

// fp32 values of `x` rounded to the nearest e4m3 (or e5m2) value, ties to even, saturated at the
// format's largest finite value (448, or 57344); subnormals as the formats have them.
torch::Tensor roundToFloat8(const torch::Tensor &x, bool e5m2);

// x [..., in] times weight [out, in] (+ bias) in float8; the output in the compute dtype (bf16).
torch::Tensor fp8Linear(const torch::Tensor &x, const torch::Tensor &weight, const torch::Tensor &bias, Fp8Scaling scaling);
// fp8Linear of each weight (with its bias, undefined for none) on one input, as q, k, v or gate,
// up read theirs: x cast to float8 once for all of them, and (rowwise) its transposed cast once in
// the backward, instead of once per weight. The same values as fp8Linear's one by one; the input's
// gradient is their sum.
std::vector<torch::Tensor> fp8LinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases,
                                           Fp8Scaling scaling);

// Whether fp8Linear runs real float8 matmuls for tensors on `device`.
bool fp8Native(const torch::Device &device);
// One operand as fp8Linear casts it: t [rows, cols] scaled per row or per tensor, the float8 values
// (a float8 tensor where fp8Native, else fp32 on the grid) and the fp32 scale(s).
std::pair<torch::Tensor, torch::Tensor> float8Quantize(const torch::Tensor &t, bool perRow, bool e5m2);
// t [rows, cols] cast for a matmul over its rows: float8Quantize(t.t().contiguous(), perRow, e5m2)'s
// values and scales, which the backward casts straight into the transposed layout where the kernel
// takes t (its column maxima from the row-wise cast of t, as the forward takes them).
std::pair<torch::Tensor, torch::Tensor> float8QuantizeTransposed(const torch::Tensor &t, bool perRow, bool e5m2);

} // namespace pb
