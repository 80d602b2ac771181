#pragma once
// train.precision = fp8-*: casting an operand to float8 in one pass (model/Fp8Linear.cpp), built
// with the fused kernels (PB_WITH_CUDA_KERNELS). Plain pointers, no torch.
#include "kernels/FusedKernels.h"

#include <cstdint>

namespace pb::kernels {

// Each row of x [rows, cols] (fp32 or bf16, row-major) scaled by its absolute maximum:
// scales[r] = max(amax, 1e-12) / fmax (448 for e4m3, 57344 for e5m2), out = float8(x / scales[r])
// rounded to nearest even and saturated, one block a row: the arithmetic of the composite path
// (abs, amax, clamp_min, divide, clamp, cast), so the two agree bit for bit.
void float8QuantizeRows(const void *x, Dtype type, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, void *stream);
// out = float8(x / scale[0]) for n elements, the scale already on the device (per tensor).
void float8QuantizeWithScale(const void *x, Dtype type, int64_t n, bool e5m2, const float *scale, uint8_t *out, void *stream);

} // namespace pb::kernels
