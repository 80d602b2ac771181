#pragma once
// train.precision = fp8-*: casting an operand to float8 in one pass (model/Fp8Linear.cpp), built
// with the fused kernels (PB_WITH_CUDA_KERNELS). Plain pointers, no torch.
#include "kernels/FusedKernels.h"

#include <cstdint>

namespace pb::kernels {

// Each row of x [rows, cols] (fp32 or bf16, row-major) scaled by its absolute maximum:
// scales[r] = max(amax, 1e-12) / fmax (448 for e4m3, 57344 for e5m2), out = float8(x / scales[r])
// rounded to nearest even and saturated: the arithmetic of the composite path (abs, amax,
// clamp_min, divide, clamp, cast), so the two agree bit for bit. A row of up to 16384 columns (a
// multiple of 8, 16-byte aligned) is read once. With `colAmax` (fp32 [cols], zero on entry), each
// column's absolute maximum is also taken, for float8QuantizeColumnsTransposed.
void float8QuantizeRows(const void *x, Dtype type, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, void *stream,
                        float *colAmax = nullptr);
// bf16 rows of 8193 to 16384 columns read once, held in registers (the default), or in two passes
// (each row's and column's maximum, then the cast). Set only by bench_float8_casts, which times both.
void float8SetWideRowsInOnePass(bool onePass);
// Whether float8QuantizeColumnsTransposed takes x [rows, cols]: rows a multiple of 16, cols of 8,
// x 16-byte aligned.
bool float8TransposedCastFits(const void *x, int64_t rows, int64_t cols);
// x [rows, cols] cast transposed: out [cols, rows] = float8(x[r][c] / scale(c)) with scale(c) =
// max(amax[c], 1e-12) / fmax (perColumn) or max(amax[0], 1e-12) / fmax, as float8QuantizeRows
// gives for the contiguous transpose; scales[c] written where perColumn and scales is not null.
void float8QuantizeColumnsTransposed(const void *x, Dtype type, int64_t rows, int64_t cols, const float *amax, bool perColumn, bool e5m2, uint8_t *out,
                                     float *scales, void *stream);
// out = float8(x / scale[0]) for n elements, the scale already on the device (per tensor).
void float8QuantizeWithScale(const void *x, Dtype type, int64_t n, bool e5m2, const float *scale, uint8_t *out, void *stream);

} // namespace pb::kernels
