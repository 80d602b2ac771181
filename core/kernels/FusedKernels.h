#pragma once
// CUDA kernels of train.kernels = fused (built only where nvcc and a CUDA LibTorch are found:
// PB_WITH_CUDA_KERNELS). Plain pointers and sizes, no torch: model/FusedOps.cpp checks shapes,
// dtypes and contiguity, allocates, and calls these on the current stream. Every input and output
// is contiguous and row-major; statistics and reductions are fp32 whatever the storage dtype.
#include <cstdint>

namespace pb::kernels {

enum class Dtype { Float32, BFloat16, Float16 };

// Cross-entropy of each row of `logits` [rows, vocab] (dtype `type`) against `targets` (int64;
// ignoreIndex rows give 0), written to rowLoss [rows] (fp32); then, in place, the logits become
// the loss gradient (softmax - onehot) * scale, zero on ignored rows, rounded to `type` once.
void crossEntropyGradInPlace(void *logits, Dtype type, const int64_t *targets, int64_t rows, int64_t vocab, int64_t ignoreIndex,
                             float scale, float *rowLoss, void *stream);

// RMSNorm as LlamaRMSNorm: xf = float(x); xn = xf * rsqrt(mean(xf^2) + eps); y = w * cast_x(xn)
// computed in fp32 from the x-dtype-rounded xn and the weight, rounded once to y's dtype. x
// [rows, cols]; w [cols]; rstd [rows] (fp32) kept for the backward.
void rmsNormForward(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                    float eps, void *stream);

// Its backward: dx (x's dtype) and per-block partial sums of dw [partials, cols] (fp32; the
// caller sums the rows), partials from rmsNormPartials(rows), one block each.
void rmsNormBackward(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                     float *dwPartial, int64_t partials, int64_t rows, int64_t cols, void *stream);
int64_t rmsNormPartials(int64_t rows);

// SwiGLU as LlamaMLP's silu(g) * u on n elements of `type`: silu computed in fp32 and rounded to
// `type` (torch.silu's output), then the product rounded once.
void swigluForward(const void *g, const void *u, void *out, Dtype type, int64_t n, void *stream);
// Its backward, rounding where eager's mul and silu backward round: ds = dOut * u; du = dOut *
// silu(g) (recomputed, never kept); dg = ds * silu'(g).
void swigluBackward(const void *dOut, const void *g, const void *u, void *dg, void *du, Dtype type, int64_t n, void *stream);

// The rotary embedding of x [rows, heads, headDim] (`type`; row r is position r % seqLen) by the
// fp32 tables cos, sin [seqLen, headDim]: y = x * cos + rotate_half(x) * sin in fp32, rounded once.
// `inverse` applies its transpose (rotation by minus the angle), which is its backward.
void rotary(const void *x, void *y, Dtype type, const float *cos, const float *sin, int64_t rows, int64_t heads, int64_t headDim,
            int64_t seqLen, bool inverse, void *stream);

} // namespace pb::kernels
