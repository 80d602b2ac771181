#pragma once
// CUDA kernels of train.kernels = fused (built only where nvcc and a CUDA LibTorch are found:
// PB_WITH_CUDA_KERNELS). Plain pointers and sizes, no torch: model/FusedOps.cpp checks shapes,
// dtypes and contiguity, allocates, and calls these on the current stream. Every input and output
// is contiguous and row-major; statistics and reductions are fp32 whatever the storage dtype.
#include <cstdint>

namespace pb::kernels {

enum class Dtype { Float32, BFloat16, Float16 };

// What the model does to its logits before the loss, applied inside the kernel in fp32: Granite's
// division (z / divisor), then Gemma's soft cap (softcap * tanh(z / softcap); 0: none).
struct LogitsCap {
    float divisor = 1.f;
    float softcap = 0.f;
};
// Cross-entropy of each row of `logits` [rows, vocab] (rows `ld` elements apart; dtype `type`; capped by `cap`) against
// `targets` (int64; ignoreIndex rows give 0), written to rowLoss [rows] (fp32); then, in place, the
// logits become the loss gradient with respect to the uncapped logits, (softmax - onehot) * scale
// times the cap's derivative (1 - tanh^2) / divisor, zero on ignored rows, rounded to `type` once.
// `scale` is read by the kernel (one fp32 on the device), so the mean's 1 / count needs no host read
// and the step can be captured in a CUDA graph.
void crossEntropyGradInPlace(void *logits, int64_t ld, Dtype type, const int64_t *targets, int64_t rows, int64_t vocab, int64_t ignoreIndex,
                             const float *scale, LogitsCap cap, float *rowLoss, void *stream);

// Gemma 2's soft-capped attention probabilities, where SDPA's kernels have no cap: Transformers'
// eager chain on the scores [rows, keys] of one head each (row r is query r % keys, keys == queries),
// (s * scale) * (1 / softcap), tanh, * softcap, the causal mask (and a sliding window: key j seen
// from query i when i - window < j <= i; 0: none), softmax in fp32 rounded to `type`, every step
// rounded to `type` as eager's CUDA ops round it (a division by a scalar there is a product with its
// fp32 reciprocal). One kernel (two reads of each row, the second mostly from L2) in place of eight
// element-wise ones. The rows' max and sum of exponentials (fp32) are kept for the backward, which
// recomputes the fp32 probabilities from the scores (eager kept them, 4 bytes a score) and writes
// the scores' gradient through the same chain: softmax's backward in fp32, then the cap's and the
// scale's, each rounded as eager's.
struct ScoreCap {
    float scale = 1.f;
    float softcap = 0.f;
    int64_t window = 0;
};
void cappedSoftmaxForward(const void *scores, void *probs, Dtype type, float *rowMax, float *rowSum, int64_t rows, int64_t keys, ScoreCap cap,
                          void *stream);
void cappedSoftmaxBackward(const void *scores, const float *rowMax, const float *rowSum, const void *dProbs, void *dScores, Dtype type, int64_t rows,
                           int64_t keys, ScoreCap cap, void *stream);

// The RMSNorm's form: LlamaRMSNorm scales the x-dtype-rounded normalised input by the weight;
// Gemma's and OLMo 2's (scaleInFp32) scale the fp32 one; Gemma's by (1 + weight) (unitOffset, the
// sum rounded to the weight's dtype as eager's `1.0 + weight`).
struct RmsNormForm {
    bool unitOffset = false;
    bool scaleInFp32 = false;
};

// RMSNorm: xf = float(x); xn = xf * rsqrt(mean(xf^2) + eps); y = w' * cast_x(xn) (Llama) or
// w' * xn (scaleInFp32), w' = w or 1 + w, computed in fp32 and rounded once to y's dtype. x
// [rows, cols]; w [cols]; rstd [rows] (fp32) kept for the backward. Rows of at most 1024 columns
// (per-head q/k norms) take one warp each, longer ones a block.
void rmsNormForward(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                    float eps, RmsNormForm form, void *stream);

// Its backward: dx (x's dtype) and per-block partial sums of dw [partials, cols] (fp32; the
// caller sums the rows), partials from rmsNormPartials(rows), one block each.
void rmsNormBackward(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                     float *dwPartial, int64_t partials, int64_t rows, int64_t cols, RmsNormForm form, void *stream);
int64_t rmsNormPartials(int64_t rows);

// The residual add folded into the norm (issue 34): the norm reads sum = x + branch * scale, written
// to `sum` (x's dtype) for the residual stream, where eager launched an add kernel and the norm read
// its output again. `branch` has y's dtype; branch * scale is rounded to it and the sum to x's dtype,
// as eager's mul and add round them.
struct ResidualIn {
    const void *branch = nullptr;
    float scale = 1.f;
    void *sum = nullptr;
};
// Its backward's extras: dSum (x's dtype), the stream's own gradient, is added to dx as autograd
// accumulates it; dBranch (dy's dtype) gets dx cast to that dtype, times scale. Null where absent.
struct ResidualGrad {
    const void *dSum = nullptr;
    void *dBranch = nullptr;
    float scale = 1.f;
};
// Whether add + norm takes rows of `cols` at these addresses: the 16-byte row form only.
bool addRmsNormFits(int64_t cols, const void *const *pointers, int count);
// rmsNormForward of x + branch * scale, rows of cols where addRmsNormFits.
void addRmsNormForward(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                       float eps, RmsNormForm form, ResidualIn residual, void *stream);
// rmsNormBackward with the residual's gradients (x: the sum the forward wrote).
void addRmsNormBackward(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                        float *dwPartial, int64_t partials, int64_t rows, int64_t cols, RmsNormForm form, ResidualGrad residual, void *stream);

// The gated MLP's activation: SiLU (SwiGLU, LlamaMLP), tanh-approximated GELU (GeGLU, Gemma's
// gelu_pytorch_tanh) or the exact erf GELU.
enum class GateActivation { Silu, GeluTanh, GeluErf };

// act(g) * u on n elements of `type`: the activation computed in fp32 and rounded to `type` (the
// eager op's output), then the product rounded once.
void swigluForward(const void *g, const void *u, void *out, Dtype type, int64_t n, GateActivation act, void *stream);
// Its backward, rounding where eager's mul and activation backward round: ds = dOut * u; du = dOut *
// act(g) (recomputed, never kept); dg = ds * act'(g).
void swigluBackward(const void *dOut, const void *g, const void *u, void *dg, void *du, Dtype type, int64_t n, GateActivation act, void *stream);
// The same on a fused gate_up projection's output gateUp [rows, 2 x width] (gate the first half of
// each row, up the second: Phi-3's and GLM-4's gate_up_proj), out [rows, width]; the backward writes
// both halves' gradients into one dGateUp [rows, 2 x width], where split views would need copies
// in and a cat out.
void gatedForwardPacked(const void *gateUp, void *out, Dtype type, int64_t rows, int64_t width, GateActivation act, void *stream);
void gatedBackwardPacked(const void *dOut, const void *gateUp, void *dGateUp, Dtype type, int64_t rows, int64_t width, GateActivation act, void *stream);

// The rotary embedding of x [rows, heads, headDim] (`type`; row r is position r % seqLen) by the
// fp32 tables cos, sin [seqLen, headDim]: y = x * cos + rotate_half(x) * sin in fp32, rounded once.
// Each table row's two halves must be equal (Transformers' cat(freqs, freqs), as DecoderModel builds
// them for every non-interleaved rope): the 16-byte form reads only the first.
// `inverse` applies its transpose (rotation by minus the angle), which is its backward.
void rotary(const void *x, void *y, Dtype type, const float *cos, const float *sin, int64_t rows, int64_t heads, int64_t headDim,
            int64_t seqLen, bool inverse, void *stream);

// A LoRA adapter's share of the input's gradient under dropout (model/MixedLinear.cpp), in one pass
// where mm, native_dropout_backward and add_ write three [rows, cols] tensors between them: dx +=
// keep * scale * (dDown A), dx [rows, cols], dDown [rows, rank], a [rank, cols] (all of `type`), keep
// [rows, cols] (native_dropout's boolean mask, a byte an element). Rounded as those ops round: the
// product's fp32 sum to `type`, its product with scale where kept, then the sum with dx.
void addDroppedLowRank(void *dx, const void *dDown, const void *a, const uint8_t *keep, float scale, Dtype type, int64_t rows, int64_t cols, int64_t rank,
                       void *stream);

// lora_A's gradient under dropout, dDown^T dropped(x), where dropped(x) is native_dropout_backward's
// copy of x (x * scale rounded to `type` where kept, 0 elsewhere), without that copy: partials
// [droppedInputChunks(rows, cols), rank, cols] (fp32), the caller sums the first dimension. x [rows,
// cols], keep [rows, cols] (bool bytes), dDown [rows, rank], rank at most kDroppedRankMax.
constexpr int64_t kDroppedRankMax = 16;
int64_t droppedInputChunks(int64_t rows, int64_t cols);
void droppedInputProduct(const void *x, const uint8_t *keep, float scale, const void *dDown, Dtype type, float *partials, int64_t rows, int64_t cols,
                         int64_t rank, void *stream);

} // namespace pb::kernels
