// The CUDA kernels of train.kernels = fused (FusedKernels.h). One block per row for the row-wise
// ones (a row is at most a few hundred KiB, so its second read mostly hits L2); fp32 arithmetic.
#include "kernels/FusedKernels.h"
#include "kernels/KernelSupport.cuh"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace pb::kernels {
namespace {

// Block-wide sum; every thread gets the result. `shared` holds kThreads / 32 floats.
__device__ float blockSum(float v, float *shared)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // shared may still be read by the previous call
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < kThreads / 32; ++i)
        total += shared[i];
    return total;
}

// Online log-sum-exp pair (max, sum of exp(x - max)) merged across a block.
__device__ void mergeLse(float &m, float &s, float om, float os)
{
    if (om == -FLT_MAX)
        return;
    if (m == -FLT_MAX) {
        m = om;
        s = os;
        return;
    }
    const float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}

// tanh as 1 - 2 / (e^2x + 1) through the fast exp and division: within about 2e-7 of tanh
// absolutely (the capped logit is softcap times it: 6e-6 at Gemma's 30, against bf16 logits' 0.125
// rounding there), for a few instructions where tanhf takes about twenty; soft-capping the whole
// vocabulary with tanhf made Gemma 2/4's cross-entropy 1.9x the uncapped kernel's time on the H200.
__device__ __forceinline__ float fastTanh(float x) { return 1.f - __fdividef(2.f, __expf(2.f * x) + 1.f); }

// A logit as the loss sees it (divided, then soft-capped) into `capped`, and the derivative of that
// with respect to the stored logit, from the same tanh.
__device__ __forceinline__ float cappedLogitGrad(float z, LogitsCap cap, float &capped)
{
    const float y = cap.divisor != 1.f ? z / cap.divisor : z;
    float d = 1.f;
    capped = y;
    if (cap.softcap > 0.f) {
        const float t = fastTanh(__fdividef(y, cap.softcap));
        capped = cap.softcap * t;
        d = 1.f - t * t;
    }
    return cap.divisor != 1.f ? d / cap.divisor : d;
}
// The capped logit alone: the same arithmetic, so both passes of a kernel see the same value.
__device__ __forceinline__ float cappedLogit(float z, LogitsCap cap)
{
    float capped;
    cappedLogitGrad(z, cap, capped);
    return capped;
}

// The end of a cross-entropy row's first pass, shared by the scalar and the 16-byte kernel: the
// threads' running (max, sum) merged over the block into the log-sum-exp, the row's loss written
// (0 where ignored), and the factor its gradient takes (0 where ignored).
// The threads' running (max, sum of exp(x - max)) merged over the block; every thread gets the result.
__device__ void blockMergeLse(float &m, float &s)
{
    __shared__ float sm[kThreads / 32], ss[kThreads / 32];
    for (int o = 16; o > 0; o >>= 1)
        mergeLse(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = -FLT_MAX;
    s = 0.f;
    for (int i = 0; i < kThreads / 32; ++i)
        mergeLse(m, s, sm[i], ss[i]);
}

// One value into a running (max, sum of exp(x - max)).
__device__ __forceinline__ void addToLse(float v, float &m, float &s)
{
    if (v > m) {
        s = s * __expf(m - v) + 1.f;
        m = v;
    } else {
        s += __expf(v - m);
    }
}

template <typename T>
__device__ void crossEntropyRowEnd(float m, float s, const T *row, int64_t target, int64_t vocab, int64_t ignoreIndex, const float *scale, LogitsCap cap,
                                   float *rowLoss, float &lse, float &rowScale)
{
    blockMergeLse(m, s);
    lse = m + logf(s);
    const bool ignored = target == ignoreIndex || target < 0 || target >= vocab;
    const float targetLogit = ignored ? 0.f : cappedLogit(toFloat(row[target]), cap);
    __syncthreads(); // every thread has read the target's logit before any overwrites it
    if (threadIdx.x == 0)
        rowLoss[blockIdx.x] = ignored ? 0.f : lse - targetLogit;
    rowScale = ignored ? 0.f : *scale;
}

template <typename T>
__global__ void crossEntropyKernel(T *logits, int64_t ld, const int64_t *targets, int64_t vocab, int64_t ignoreIndex, const float *scale, LogitsCap cap,
                                   float *rowLoss)
{
    T *row = logits + blockIdx.x * ld;
    const int64_t target = targets[blockIdx.x];
    float m = -FLT_MAX, s = 0.f;
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
        addToLse(cappedLogit(toFloat(row[j]), cap), m, s);
    float lse, rowScale;
    crossEntropyRowEnd(m, s, row, target, vocab, ignoreIndex, scale, cap, rowLoss, lse, rowScale);
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
        float capped;
        const float d = cappedLogitGrad(toFloat(row[j]), cap, capped);
        const float p = __expf(capped - lse);
        row[j] = fromFloat<T>((p - (j == target ? 1.f : 0.f)) * rowScale * d);
    }
}

// tanh within about 2e-7 relative (fastTanh's cancellation near 0 replaced by an odd polynomial,
// least-squares fitted on [0, 0.6]): five multiply-adds, or a fast exp and division, where tanhf
// takes an accurate exp and division. The capped attention softmax's 16-byte kernel took 0.82x its
// scalar one's time on an H100, far from the bandwidth, which I read as its arithmetic (tanhf the
// most of it; not profiled). Rounded to bf16 or fp16 it rounds as tanhf does except within 2e-7
// of a rounding boundary.
__device__ __forceinline__ float tanhNearlyExact(float x)
{
    const float a = fabsf(x);
    if (a < 0.55f) {
        const float s = x * x;
        float r = fmaf(s, -5.984960589557886e-3f, 2.0868148654699326e-2f);
        r = fmaf(r, s, -5.3803566843271255e-2f);
        r = fmaf(r, s, 1.3332132995128632e-1f);
        r = fmaf(r, s, -3.333330452442169e-1f);
        return fmaf(x * s, r, x);
    }
    return copysignf(fastTanh(a), x);
}

// A stored attention score as Gemma 2's eager chain makes it, and tanh's rounded output `t`
// (tanhf in fp32, as eager; tanhNearlyExact for 16-bit scores, whose rounding hides its error).
template <typename T> __device__ __forceinline__ float cappedScore(float s, const ScoreCap &cap, float invCap, float &t)
{
    const float x = roundTo<T>(roundTo<T>(s * cap.scale) * invCap);
    t = roundTo<T>(std::is_same_v<T, float> ? tanhf(x) : tanhNearlyExact(x));
    return roundTo<T>(t * cap.softcap);
}

// A capped score's probability from its row's statistics (max, 1 / sum of exp(score - max)); the
// forward and backward kernels of both forms take it from here, so the backward's recomputed
// probability is the forward's to the bit whichever form each ran in.
__device__ __forceinline__ float cappedProbability(float capped, float m, float invSum) { return __expf(capped - m) * invSum; }

// The keys query row `row` sees: [lo, hi).
__device__ __forceinline__ void visibleKeys(int64_t row, int64_t keys, int64_t window, int64_t &lo, int64_t &hi)
{
    const int64_t i = row % keys;
    lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    hi = i + 1;
}

// One block a row: the row's (max, sum) over the keys it sees, then every probability (0 where hidden).
template <typename T>
__global__ void cappedSoftmaxForwardKernel(const T *scores, T *probs, float *rowMax, float *rowSum, int64_t keys, ScoreCap cap)
{
    const int64_t row = blockIdx.x;
    const T *s = scores + row * keys;
    T *p = probs + row * keys;
    const float invCap = 1.f / cap.softcap;
    int64_t lo, hi;
    visibleKeys(row, keys, cap.window, lo, hi);
    __shared__ float shared[kThreads / 32];
    float m = -FLT_MAX, sum = 0.f, t;
    for (int64_t j = lo + threadIdx.x; j < hi; j += kThreads)
        m = fmaxf(m, cappedScore<T>(toFloat(s[j]), cap, invCap, t));
    m = blockMax(m, shared);
    for (int64_t j = lo + threadIdx.x; j < hi; j += kThreads)
        sum += __expf(cappedScore<T>(toFloat(s[j]), cap, invCap, t) - m);
    sum = blockSum(sum, shared);
    if (threadIdx.x == 0) {
        rowMax[row] = m;
        rowSum[row] = sum;
    }
    const float invSum = 1.f / sum;
    for (int64_t j = threadIdx.x; j < keys; j += kThreads)
        p[j] = fromFloat<T>(j >= lo && j < hi ? cappedProbability(cappedScore<T>(toFloat(s[j]), cap, invCap, t), m, invSum) : 0.f);
}

// One block a row: sum_j p_j * dp_j over the seen keys, then the scores' gradient through the chain.
template <typename T>
__global__ void cappedSoftmaxBackwardKernel(const T *scores, const float *rowMax, const float *rowSum, const T *dProbs, T *dScores, int64_t keys, ScoreCap cap)
{
    __shared__ float shared[kThreads / 32];
    const int64_t row = blockIdx.x;
    const T *s = scores + row * keys, *dp = dProbs + row * keys;
    T *ds = dScores + row * keys;
    const float invCap = 1.f / cap.softcap, m = rowMax[row], invSum = 1.f / rowSum[row];
    int64_t lo, hi;
    visibleKeys(row, keys, cap.window, lo, hi);
    float dot = 0.f, t;
    for (int64_t j = lo + threadIdx.x; j < hi; j += kThreads)
        dot += cappedProbability(cappedScore<T>(toFloat(s[j]), cap, invCap, t), m, invSum) * toFloat(dp[j]);
    dot = blockSum(dot, shared);
    for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
        float g = 0.f;
        if (j >= lo && j < hi) {
            const float pf = cappedProbability(cappedScore<T>(toFloat(s[j]), cap, invCap, t), m, invSum);
            const float dx = roundTo<T>(pf * (toFloat(dp[j]) - dot));        // softmax's, cast back to the scores' dtype
            const float dTanh = roundTo<T>(roundTo<T>(dx * cap.softcap) * (1.f - t * t)); // * softcap, then tanh's
            g = roundTo<T>(dTanh * invCap) * cap.scale;                     // / softcap, then * scale
        }
        ds[j] = fromFloat<T>(g);
    }
}

// The weight as the form multiplies by it: w, or 1 + w (rounded to W's dtype unless the product
// is taken in fp32, as eager's `1.0 + weight` or `1.0 + weight.float()`).
template <typename W> __device__ __forceinline__ float scaleValue(float w, RmsNormForm form)
{
    if (!form.unitOffset)
        return w;
    return form.scaleInFp32 ? 1.f + w : toFloat(fromFloat<W>(1.f + w));
}
template <typename W> __device__ __forceinline__ float scaleOf(const W *w, int64_t j, RmsNormForm form) { return scaleValue<W>(toFloat(w[j]), form); }

// The normalised value the weight multiplies: rounded to x's dtype (Llama's h.to(input dtype)) or not.
template <typename X> __device__ __forceinline__ float scaledInput(float xn, RmsNormForm form)
{
    return form.scaleInFp32 ? xn : toFloat(fromFloat<X>(xn));
}

template <typename X, typename W, typename Y>
__global__ void rmsNormForwardKernel(const X *x, const W *w, Y *y, float *rstd, int64_t cols, float eps, RmsNormForm form)
{
    __shared__ float shared[kThreads / 32];
    const X *xr = x + blockIdx.x * cols;
    Y *yr = y + blockIdx.x * cols;
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
        const float v = toFloat(xr[j]);
        sq += v * v;
    }
    const float r = rsqrtf(blockSum(sq, shared) / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0)
        rstd[blockIdx.x] = r;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads)
        yr[j] = fromFloat<Y>(scaleOf(w, j, form) * scaledInput<X>(toFloat(xr[j]) * r, form));
}

__device__ __forceinline__ float warpSum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Rows of at most kWarpRowCols columns (per-head q/k norms: 64 to 256): one warp per row, so a
// block of 256 threads is not spent on 128 values.
constexpr int64_t kWarpRowCols = 1024;
constexpr int kWarps = kThreads / 32;

template <typename X, typename W, typename Y>
__global__ void rmsNormForwardWarpKernel(const X *x, const W *w, Y *y, float *rstd, int64_t rows, int64_t cols, float eps, RmsNormForm form)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row >= rows)
        return;
    const X *xr = x + row * cols;
    Y *yr = y + row * cols;
    float sq = 0.f;
    for (int64_t j = lane; j < cols; j += 32) {
        const float v = toFloat(xr[j]);
        sq += v * v;
    }
    const float r = rsqrtf(warpSum(sq) / static_cast<float>(cols) + eps);
    if (lane == 0)
        rstd[row] = r;
    for (int64_t j = lane; j < cols; j += 32)
        yr[j] = fromFloat<Y>(scaleOf(w, j, form) * scaledInput<X>(toFloat(xr[j]) * r, form));
}

// Blocks stride over rows; each keeps its dw partial sums in shared memory (cols floats).
template <typename DY, typename X, typename W>
__global__ void rmsNormBackwardKernel(const DY *dy, const X *x, const W *w, const float *rstd, X *dx, float *dwPartial, int64_t rows, int64_t cols,
                                      RmsNormForm form)
{
    PB_DYNAMIC_SHARED(dwShared);
    __shared__ float shared[kThreads / 32];
    for (int64_t j = threadIdx.x; j < cols; j += kThreads)
        dwShared[j] = 0.f;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const DY *g = dy + row * cols;
        const X *xr = x + row * cols;
        const float r = rstd[row];
        float dot = 0.f;
        for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
            const float xn = toFloat(xr[j]) * r;
            const float gy = toFloat(g[j]);
            dot += gy * scaleOf(w, j, form) * xn;
            dwShared[j] += gy * scaledInput<X>(xn, form);
        }
        const float mean = blockSum(dot, shared) / static_cast<float>(cols);
        X *dxr = dx + row * cols;
        for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
            const float xn = toFloat(xr[j]) * r;
            dxr[j] = fromFloat<X>(r * (toFloat(g[j]) * scaleOf(w, j, form) - xn * mean));
        }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < cols; j += kThreads)
        dwPartial[blockIdx.x * cols + j] = dwShared[j];
}

// The warp-per-row backward: each warp keeps its own dw sums in shared memory (kWarps x cols
// floats; a lane only touches its own columns), summed over the block's warps at the end.
template <typename DY, typename X, typename W>
__global__ void rmsNormBackwardWarpKernel(const DY *dy, const X *x, const W *w, const float *rstd, X *dx, float *dwPartial, int64_t rows,
                                          int64_t cols, RmsNormForm form)
{
    PB_DYNAMIC_SHARED(dwShared);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *mine = dwShared + warp * cols;
    for (int64_t j = lane; j < cols; j += 32)
        mine[j] = 0.f;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp; row < rows; row += stride) {
        const DY *g = dy + row * cols;
        const X *xr = x + row * cols;
        const float r = rstd[row];
        float dot = 0.f;
        for (int64_t j = lane; j < cols; j += 32) {
            const float xn = toFloat(xr[j]) * r;
            const float gy = toFloat(g[j]);
            dot += gy * scaleOf(w, j, form) * xn;
            mine[j] += gy * scaledInput<X>(xn, form);
        }
        const float mean = warpSum(dot) / static_cast<float>(cols);
        X *dxr = dx + row * cols;
        for (int64_t j = lane; j < cols; j += 32) {
            const float xn = toFloat(xr[j]) * r;
            dxr[j] = fromFloat<X>(r * (toFloat(g[j]) * scaleOf(w, j, form) - xn * mean));
        }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
        float sum = 0.f;
        for (int k = 0; k < kWarps; ++k)
            sum += dwShared[k * cols + j];
        dwPartial[blockIdx.x * cols + j] = sum;
    }
}

#include "kernels/RowVectorKernels.cuh"

// V elements of T in one 16-byte load or store where the pointers allow it (V = 1 otherwise).
template <typename T, int V> struct alignas(sizeof(T) * V) Pack {
    T v[V];
};

// Grid-stride over packs of V elements, then the tail one at a time: f.operator()<W>(i) handles
// elements [i, i + W).
template <int V, typename F> __device__ void forEachPack(int64_t n, F &&f)
{
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t packs = n / V;
    for (int64_t p = first; p < packs; p += stride)
        f.template operator()<V>(p * V);
    for (int64_t i = packs * V + first; i < n; i += stride)
        f.template operator()<1>(i);
}

// The gate's activation and its derivative in fp32, as PyTorch's CUDA silu, gelu and their
// backwards write them.
template <GateActivation A> __device__ __forceinline__ float activation(float x)
{
    if constexpr (A == GateActivation::Silu)
        return x / (1.f + expf(-x));
    else if constexpr (A == GateActivation::GeluTanh)
        return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    else
        return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
}

template <GateActivation A> __device__ __forceinline__ float activationGrad(float x)
{
    if constexpr (A == GateActivation::Silu) {
        const float sig = 1.f / (1.f + expf(-x));
        return sig * (1.f + x * (1.f - sig));
    } else if constexpr (A == GateActivation::GeluTanh) {
        constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f;
        const float t = tanhf(kBeta * (x + kKappa * x * x * x));
        return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * x * x);
    } else {
        return 0.5f * (1.f + erff(x * 0.7071067811865476f)) + x * expf(-0.5f * x * x) * 0.3989422804014327f;
    }
}

// The gated functors' element i of the output [rows, width] reads g and u (and writes dg and du) at
// row i / width, `stride` elements a row: contiguous inputs have width == stride == n; a fused
// gate_up output's halves are rows of `width` elements `2 x width` apart.
struct GatedLayout {
    int64_t width, stride;
    __device__ __forceinline__ int64_t at(int64_t i) const { return width == stride ? i : (i / width) * stride + i % width; }
};

template <typename T, GateActivation A> struct GatedForward {
    const T *g, *u;
    T *out;
    GatedLayout layout;
    template <int W> __device__ void operator()(int64_t i) const
    {
        const int64_t a = layout.at(i);
        const auto gp = *reinterpret_cast<const Pack<T, W> *>(g + a);
        const auto up = *reinterpret_cast<const Pack<T, W> *>(u + a);
        Pack<T, W> o;
#pragma unroll
        for (int k = 0; k < W; ++k) {
            const float s = toFloat(fromFloat<T>(activation<A>(toFloat(gp.v[k])))); // the activation's output, rounded
            o.v[k] = fromFloat<T>(s * toFloat(up.v[k]));
        }
        *reinterpret_cast<Pack<T, W> *>(out + i) = o;
    }
};

template <typename T, GateActivation A> struct GatedBackward {
    const T *dOut, *g, *u;
    T *dg, *du;
    GatedLayout layout;
    template <int W> __device__ void operator()(int64_t i) const
    {
        const int64_t a = layout.at(i);
        const auto dp = *reinterpret_cast<const Pack<T, W> *>(dOut + i);
        const auto gp = *reinterpret_cast<const Pack<T, W> *>(g + a);
        const auto up = *reinterpret_cast<const Pack<T, W> *>(u + a);
        Pack<T, W> dgp, dup;
#pragma unroll
        for (int k = 0; k < W; ++k) {
            const float x = toFloat(gp.v[k]), d = toFloat(dp.v[k]);
            dup.v[k] = fromFloat<T>(d * toFloat(fromFloat<T>(activation<A>(x))));
            const float ds = toFloat(fromFloat<T>(d * toFloat(up.v[k])));
            dgp.v[k] = fromFloat<T>(ds * activationGrad<A>(x));
        }
        *reinterpret_cast<Pack<T, W> *>(dg + a) = dgp;
        *reinterpret_cast<Pack<T, W> *>(du + a) = dup;
    }
};

template <int V, typename F> __global__ void packKernel(int64_t n, F f) { forEachPack<V>(n, f); }

// dx += keep * scale * (dDown A), a pack of a row's columns a thread: the row's rank values of dDown
// are the same address across a warp's lanes (one broadcast load each), and A [rank, cols] is read by
// every row, so it stays in L1 and L2: what comes from memory is dx twice and keep once.
template <typename T> struct DroppedLowRankAdd {
    T *dx;
    const T *dDown, *a;
    const uint8_t *keep;
    float scale;
    int64_t cols, rank;
    template <int W> __device__ void operator()(int64_t i) const
    {
        const int64_t row = i / cols, col = i - row * cols;
        float sum[W] = {};
        const T *d = dDown + row * rank;
        for (int64_t k = 0; k < rank; ++k) {
            const float dk = toFloat(d[k]);
            const auto ap = *reinterpret_cast<const Pack<T, W> *>(a + k * cols + col);
#pragma unroll
            for (int w = 0; w < W; ++w)
                sum[w] = fmaf(dk, toFloat(ap.v[w]), sum[w]);
        }
        const auto kp = *reinterpret_cast<const Pack<uint8_t, W> *>(keep + i);
        auto xp = *reinterpret_cast<const Pack<T, W> *>(dx + i);
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const float dropped = kp.v[w] ? roundTo<T>(roundTo<T>(sum[w]) * scale) : 0.f;
            xp.v[w] = fromFloat<T>(toFloat(xp.v[w]) + dropped);
        }
        *reinterpret_cast<Pack<T, W> *>(dx + i) = xp;
    }
};

// One thread: W columns of a chunk of rows, kDroppedRankMax x W fp32 sums. dDown's row is the same
// address for the whole block (a broadcast, 16-byte loads where its rows allow), x and keep are read
// along the row once: what comes from memory is x and keep, and the partials written once.
template <typename T, int W>
__global__ void __launch_bounds__(kThreads, 2) droppedInputProductKernel(const T *x, const uint8_t *keep, float scale, const T *dDown, float *partials, int64_t rows, int64_t cols,
                                          int64_t rank, int64_t rowsPerChunk, bool packedDown)
{
    const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * W;
    if (j >= cols)
        return; // no barrier below
    const int64_t first = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
    const int64_t last = first + rowsPerChunk < rows ? first + rowsPerChunk : rows;
    float acc[kDroppedRankMax][W] = {};
    // Four rows' loads in flight a thread (unrolled: nothing in the loop stores), where one row's 12
    // bytes a thread at two blocks an SM would leave the SM's memory pipe mostly idle.
#pragma unroll 4
    for (int64_t t = first; t < last; ++t) {
        const auto xp = *reinterpret_cast<const Pack<T, W> *>(x + t * cols + j);
        const auto kp = *reinterpret_cast<const Pack<uint8_t, W> *>(keep + t * cols + j);
        float dropped[W];
#pragma unroll
        for (int w = 0; w < W; ++w)
            dropped[w] = kp.v[w] ? roundTo<T>(toFloat(xp.v[w]) * scale) : 0.f;
        float d[kDroppedRankMax];
        if (packedDown) {
#pragma unroll
            for (int p = 0; p < kDroppedRankMax / 8; ++p)
                if (8 * p < rank) {
                    float v[8];
                    load8(dDown + t * rank + 8 * p, v);
#pragma unroll
                    for (int q = 0; q < 8; ++q)
                        d[8 * p + q] = v[q];
                }
        } else {
#pragma unroll
            for (int k = 0; k < kDroppedRankMax; ++k)
                d[k] = k < rank ? toFloat(dDown[t * rank + k]) : 0.f;
        }
#pragma unroll
        for (int k = 0; k < kDroppedRankMax; ++k)
            if (k < rank)
#pragma unroll
                for (int w = 0; w < W; ++w)
                    acc[k][w] = fmaf(d[k], dropped[w], acc[k][w]);
    }
#pragma unroll
    for (int k = 0; k < kDroppedRankMax; ++k)
        if (k < rank) {
            Pack<float, W> out;
#pragma unroll
            for (int w = 0; w < W; ++w)
                out.v[w] = acc[k][w];
            *reinterpret_cast<Pack<float, W> *>(partials + (static_cast<int64_t>(blockIdx.y) * rank + k) * cols + j) = out;
        }
}

bool aligned16(std::initializer_list<const void *> pointers)
{
    for (const void *p : pointers)
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
            return false;
    return true;
}

// Each thread rotates one (x[j], x[j + half]) pair of a row's head.
template <typename T>
__global__ void rotaryKernel(const T *x, T *y, const float *cos, const float *sin, int64_t pairs, int64_t heads, int64_t half, int64_t seqLen,
                             bool inverse)
{
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        const int64_t j = p % half, rowHead = p / half;
        const int64_t pos = (rowHead / heads) % seqLen;
        const int64_t at = rowHead * 2 * half + j;
        const float a = toFloat(x[at]), b = toFloat(x[at + half]);
        const float *c = cos + pos * 2 * half, *s = sin + pos * 2 * half;
        if (!inverse) { // rotate_half(x) = (-x2, x1)
            y[at] = fromFloat<T>(a * c[j] - b * s[j]);
            y[at + half] = fromFloat<T>(b * c[j + half] + a * s[j + half]);
        } else {
            y[at] = fromFloat<T>(a * c[j] + b * s[j + half]);
            y[at + half] = fromFloat<T>(b * c[j + half] - a * s[j]);
        }
    }
}

// Calls f with a value of the C++ type of `t`.
template <typename F> void dispatch(Dtype t, F &&f)
{
    switch (t) {
    case Dtype::Float32: f(float {}); break;
    case Dtype::BFloat16: f(__nv_bfloat16 {}); break;
    case Dtype::Float16: f(__half {}); break;
    }
}

// Calls f with a value of the C++ type of each of `a`, `b` and `c`.
template <typename F> void dispatch(Dtype a, Dtype b, Dtype c, F &&f)
{
    dispatch(a, [&](auto x) { dispatch(b, [&](auto y) { dispatch(c, [&](auto z) { f(x, y, z); }); }); });
}

// Launches f over n elements of T in 16-byte packs where every pointer is 16-byte aligned (and,
// for rows of `width` elements apart from one another, no pack crosses a row).
template <typename T, typename F> void launchPacked(int64_t n, std::initializer_list<const void *> pointers, void *stream, const F &f, int64_t width = 0)
{
    constexpr int V = 16 / sizeof(T);
    if (aligned16(pointers) && (width == 0 || width == n || width % V == 0))
        PB_LAUNCH(elementwiseBlocks(n / V + 1), kThreads, 0, static_cast<cudaStream_t>(stream), packKernel<V>)(n, f);
    else
        PB_LAUNCH(elementwiseBlocks(n), kThreads, 0, static_cast<cudaStream_t>(stream), packKernel<1>)(n, f);
}


// Calls f with the threads a row (L) and the packs of 8 a thread (K) for rows of `packs` packs:
// the narrowest group that holds the row in at most 4 packs a thread.
template <typename F> void dispatchRowShape(int64_t packs, F &&f)
{
    using std::integral_constant;
    if (packs <= 8)
        f(integral_constant<int, 8> {}, integral_constant<int, 1> {});
    else if (packs <= 16)
        f(integral_constant<int, 16> {}, integral_constant<int, 1> {});
    else if (packs <= 32)
        f(integral_constant<int, 32> {}, integral_constant<int, 1> {});
    else if (packs <= 64)
        f(integral_constant<int, 32> {}, integral_constant<int, 2> {});
    else if (packs <= 128)
        f(integral_constant<int, 32> {}, integral_constant<int, 4> {});
    else if (packs <= kThreads)
        f(integral_constant<int, kThreads> {}, integral_constant<int, 1> {});
    else if (packs <= 2 * kThreads)
        f(integral_constant<int, kThreads> {}, integral_constant<int, 2> {});
    else
        f(integral_constant<int, kThreads> {}, integral_constant<int, 4> {});
}

bool vectorRows(int64_t cols, std::initializer_list<const void *> pointers) { return cols % 8 == 0 && cols <= kVecMaxCols && aligned16(pointers); }

} // namespace

void crossEntropyGradInPlace(void *logits, int64_t ld, Dtype type, const int64_t *targets, int64_t rows, int64_t vocab, int64_t ignoreIndex,
                             const float *scale, LogitsCap cap, float *rowLoss, void *stream)
{
    if (rows == 0)
        return;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        const auto kernel = ld % 8 == 0 && aligned16({logits}) ? crossEntropyVecKernel<T> : crossEntropyKernel<T>;
        PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream), kernel)(static_cast<T *>(logits), ld, targets, vocab,
                                                                                             ignoreIndex, scale, cap, rowLoss);
    });
    check(cudaGetLastError(), "cross-entropy kernel");
}

// The packs of 8 a thread holds in the register-resident capped softmax (1, 2 or 4: rows up to
// kVecMaxCols keys), or 0 for the scalar kernel (rows vectorRows does not take).
static int cappedSoftmaxPacksPerThread(int64_t keys, std::initializer_list<const void *> pointers)
{
    if (!vectorRows(keys, pointers))
        return 0;
    const int64_t perThread = (keys / 8 + kThreads - 1) / kThreads;
    return perThread <= 1 ? 1 : perThread == 2 ? 2 : 4;
}

void cappedSoftmaxForward(const void *scores, void *probs, Dtype type, float *rowMax, float *rowSum, int64_t rows, int64_t keys, ScoreCap cap,
                          void *stream)
{
    if (rows == 0)
        return;
    const int packsPerThread = cappedSoftmaxPacksPerThread(keys, {scores, probs});
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        auto kernel = packsPerThread == 1   ? cappedSoftmaxForwardVecKernel<T, 1>
                      : packsPerThread == 2 ? cappedSoftmaxForwardVecKernel<T, 2>
                      : packsPerThread == 4 ? cappedSoftmaxForwardVecKernel<T, 4>
                                            : cappedSoftmaxForwardKernel<T>;
        PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream), kernel)(static_cast<const T *>(scores), static_cast<T *>(probs),
                                                                                             rowMax, rowSum, keys, cap);
    });
    check(cudaGetLastError(), "capped softmax kernel");
}

void cappedSoftmaxBackward(const void *scores, const float *rowMax, const float *rowSum, const void *dProbs, void *dScores, Dtype type, int64_t rows,
                           int64_t keys, ScoreCap cap, void *stream)
{
    if (rows == 0)
        return;
    const int packsPerThread = cappedSoftmaxPacksPerThread(keys, {scores, dProbs, dScores});
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        auto kernel = packsPerThread == 1   ? cappedSoftmaxBackwardVecKernel<T, 1>
                      : packsPerThread == 2 ? cappedSoftmaxBackwardVecKernel<T, 2>
                      : packsPerThread == 4 ? cappedSoftmaxBackwardVecKernel<T, 4>
                                            : cappedSoftmaxBackwardKernel<T>;
        PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream), kernel)(
            static_cast<const T *>(scores), rowMax, rowSum, static_cast<const T *>(dProbs), static_cast<T *>(dScores), keys, cap);
    });
    check(cudaGetLastError(), "capped softmax backward kernel");
}

// The 16-byte row form of the forward, with or without the residual add.
static void rmsNormForwardRows(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                               float eps, RmsNormForm form, ResidualIn residual, void *stream)
{
    dispatch(xType, wType, yType, [&](auto xt, auto wt, auto yt) {
        using X = decltype(xt);
        using W = decltype(wt);
        using Y = decltype(yt);
        dispatchRowShape(cols / 8, [&](auto l, auto k) {
            constexpr int L = decltype(l)::value, K = decltype(k)::value;
            PB_LAUNCH(static_cast<unsigned>((rows + kThreads / L - 1) / (kThreads / L)), kThreads, 0, static_cast<cudaStream_t>(stream),
                      rmsNormForwardVecKernel<X, W, Y, L, K>)(static_cast<const X *>(x), static_cast<const W *>(w), static_cast<Y *>(y), rstd, rows, cols, eps,
                                                              form, residual);
        });
    });
}

// The 16-byte row form of the backward, with or without the residual's gradients.
static void rmsNormBackwardRows(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                         float *dwPartial, int64_t partials, int64_t rows, int64_t cols, RmsNormForm form, ResidualGrad residual, void *stream)
{
    dispatch(dyType, xType, wType, [&](auto dyt, auto xt, auto wt) {
        using DY = decltype(dyt);
        using X = decltype(xt);
        using W = decltype(wt);
        dispatchRowShape(cols / 8, [&](auto l, auto k) {
            constexpr int L = decltype(l)::value, K = decltype(k)::value;
            const size_t bytes = L < kThreads ? static_cast<size_t>(cols) * sizeof(float) : 0;
            PB_LAUNCH(static_cast<unsigned>(partials), kThreads, bytes, static_cast<cudaStream_t>(stream), rmsNormBackwardVecKernel<DY, X, W, L, K>)(
                static_cast<const DY *>(dy), static_cast<const X *>(x), static_cast<const W *>(w), rstd, static_cast<X *>(dx), dwPartial, rows, cols, form,
                residual);
        });
    });
}

void rmsNormForward(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                    float eps, RmsNormForm form, void *stream)
{
    if (rows == 0)
        return;
    if (vectorRows(cols, {x, w, y})) {
        rmsNormForwardRows(x, xType, w, wType, y, yType, rstd, rows, cols, eps, form, {}, stream);
        check(cudaGetLastError(), "RMSNorm forward kernel");
        return;
    }
    dispatch(xType, wType, yType, [&](auto xt, auto wt, auto yt) {
        using X = decltype(xt);
        using W = decltype(wt);
        using Y = decltype(yt);
        const auto s = static_cast<cudaStream_t>(stream);
        if (cols <= kWarpRowCols)
            PB_LAUNCH(static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, s, rmsNormForwardWarpKernel<X, W, Y>)(
                static_cast<const X *>(x), static_cast<const W *>(w), static_cast<Y *>(y), rstd, rows, cols, eps, form);
        else
            PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, s, rmsNormForwardKernel<X, W, Y>)(static_cast<const X *>(x), static_cast<const W *>(w),
                                                                                            static_cast<Y *>(y), rstd, cols, eps, form);
    });
    check(cudaGetLastError(), "RMSNorm forward kernel");
}

int64_t rmsNormPartials(int64_t rows)
{
    const int64_t sms = multiprocessorCount();
    return rows < 2 * sms ? rows : 2 * sms;
}

void rmsNormBackward(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                     float *dwPartial, int64_t partials, int64_t rows, int64_t cols, RmsNormForm form, void *stream)
{
    if (rows == 0)
        return;
    if (vectorRows(cols, {dy, x, w, dx})) {
        rmsNormBackwardRows(dy, dyType, x, xType, w, wType, rstd, dx, dwPartial, partials, rows, cols, form, {}, stream);
        check(cudaGetLastError(), "RMSNorm backward kernel");
        return;
    }
    const bool warpRows = cols <= kWarpRowCols;
    const size_t sharedBytes = static_cast<size_t>(cols) * sizeof(float) * (warpRows ? kWarps : 1);
    dispatch(dyType, xType, wType, [&](auto dyt, auto xt, auto wt) {
        using DY = decltype(dyt);
        using X = decltype(xt);
        using W = decltype(wt);
        auto kernel = warpRows ? rmsNormBackwardWarpKernel<DY, X, W> : rmsNormBackwardKernel<DY, X, W>;
        if (sharedBytes > 48 * 1024)
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sharedBytes)), "shared memory");
        PB_LAUNCH(static_cast<unsigned>(partials), kThreads, sharedBytes, static_cast<cudaStream_t>(stream), kernel)(
            static_cast<const DY *>(dy), static_cast<const X *>(x), static_cast<const W *>(w), rstd, static_cast<X *>(dx), dwPartial, rows, cols, form);
    });
    check(cudaGetLastError(), "RMSNorm backward kernel");
}

bool addRmsNormFits(int64_t cols, const void *const *pointers, int count)
{
    return vectorRows(cols, {}) && std::all_of(pointers, pointers + count, [](const void *p) { return aligned16({p}); });
}

void addRmsNormForward(const void *x, Dtype xType, const void *w, Dtype wType, void *y, Dtype yType, float *rstd, int64_t rows, int64_t cols,
                       float eps, RmsNormForm form, ResidualIn residual, void *stream)
{
    const void *pointers[] = {x, w, y, residual.branch, residual.sum};
    if (!addRmsNormFits(cols, pointers, 5) || !residual.branch || !residual.sum)
        throw std::invalid_argument("add + RMSNorm: rows the 16-byte form does not take, or no branch or sum");
    if (rows == 0)
        return;
    rmsNormForwardRows(x, xType, w, wType, y, yType, rstd, rows, cols, eps, form, residual, stream);
    check(cudaGetLastError(), "add + RMSNorm forward kernel");
}

void addRmsNormBackward(const void *dy, Dtype dyType, const void *x, Dtype xType, const void *w, Dtype wType, const float *rstd, void *dx,
                        float *dwPartial, int64_t partials, int64_t rows, int64_t cols, RmsNormForm form, ResidualGrad residual, void *stream)
{
    const void *pointers[] = {dy, x, w, dx, residual.dSum, residual.dBranch};
    if (!addRmsNormFits(cols, pointers, 6))
        throw std::invalid_argument("add + RMSNorm backward: rows the 16-byte form does not take");
    if (rows == 0)
        return;
    rmsNormBackwardRows(dy, dyType, x, xType, w, wType, rstd, dx, dwPartial, partials, rows, cols, form, residual, stream);
    check(cudaGetLastError(), "add + RMSNorm backward kernel");
}

// Calls f with the activation as a compile-time constant.
template <typename F> void dispatch(GateActivation a, F &&f)
{
    switch (a) {
    case GateActivation::Silu: f(std::integral_constant<GateActivation, GateActivation::Silu> {}); break;
    case GateActivation::GeluTanh: f(std::integral_constant<GateActivation, GateActivation::GeluTanh> {}); break;
    case GateActivation::GeluErf: f(std::integral_constant<GateActivation, GateActivation::GeluErf> {}); break;
    }
}

static void gatedForward(const void *g, const void *u, void *out, Dtype type, int64_t n, GatedLayout layout, GateActivation act, void *stream)
{
    if (n == 0)
        return;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        dispatch(act, [&](auto a) {
            launchPacked<T>(n, {g, u, out}, stream,
                            GatedForward<T, decltype(a)::value> {static_cast<const T *>(g), static_cast<const T *>(u), static_cast<T *>(out), layout},
                            layout.width);
        });
    });
    check(cudaGetLastError(), "gated activation forward kernel");
}

static void gatedBackward(const void *dOut, const void *g, const void *u, void *dg, void *du, Dtype type, int64_t n, GatedLayout layout, GateActivation act,
                          void *stream)
{
    if (n == 0)
        return;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        dispatch(act, [&](auto a) {
            launchPacked<T>(n, {dOut, g, u, dg, du}, stream,
                            GatedBackward<T, decltype(a)::value> {static_cast<const T *>(dOut), static_cast<const T *>(g), static_cast<const T *>(u),
                                                                  static_cast<T *>(dg), static_cast<T *>(du), layout},
                            layout.width);
        });
    });
    check(cudaGetLastError(), "gated activation backward kernel");
}

void swigluForward(const void *g, const void *u, void *out, Dtype type, int64_t n, GateActivation act, void *stream)
{
    gatedForward(g, u, out, type, n, {n, n}, act, stream);
}

void swigluBackward(const void *dOut, const void *g, const void *u, void *dg, void *du, Dtype type, int64_t n, GateActivation act, void *stream)
{
    gatedBackward(dOut, g, u, dg, du, type, n, {n, n}, act, stream);
}

// The second half of each row starts `width` elements after the first.
static const void *upHalf(const void *gateUp, Dtype type, int64_t width)
{
    return static_cast<const char *>(gateUp) + width * (type == Dtype::Float32 ? 4 : 2);
}

void gatedForwardPacked(const void *gateUp, void *out, Dtype type, int64_t rows, int64_t width, GateActivation act, void *stream)
{
    gatedForward(gateUp, upHalf(gateUp, type, width), out, type, rows * width, {width, 2 * width}, act, stream);
}

void gatedBackwardPacked(const void *dOut, const void *gateUp, void *dGateUp, Dtype type, int64_t rows, int64_t width, GateActivation act, void *stream)
{
    gatedBackward(dOut, gateUp, upHalf(gateUp, type, width), dGateUp, const_cast<void *>(upHalf(dGateUp, type, width)), type, rows * width,
                  {width, 2 * width}, act, stream);
}

void rotary(const void *x, void *y, Dtype type, const float *cos, const float *sin, int64_t rows, int64_t heads, int64_t headDim,
            int64_t seqLen, bool inverse, void *stream)
{
    const int64_t pairs = rows * heads * (headDim / 2);
    if (pairs == 0)
        return;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        const auto s = static_cast<cudaStream_t>(stream);
        if ((headDim / 2) % 8 == 0 && aligned16({x, y, cos, sin}))
            PB_LAUNCH(elementwiseBlocks(pairs / 8), kThreads, 0, s, rotaryVecKernel<T>)(static_cast<const T *>(x), static_cast<T *>(y), cos, sin, pairs / 8, heads,
                                                                               headDim / 2, seqLen, inverse);
        else
            PB_LAUNCH(elementwiseBlocks(pairs), kThreads, 0, s, rotaryKernel<T>)(static_cast<const T *>(x), static_cast<T *>(y), cos, sin, pairs, heads,
                                                                          headDim / 2, seqLen, inverse);
    });
    check(cudaGetLastError(), "rotary kernel");
}

void addDroppedLowRank(void *dx, const void *dDown, const void *a, const uint8_t *keep, float scale, Dtype type, int64_t rows, int64_t cols, int64_t rank,
                       void *stream)
{
    const int64_t n = rows * cols;
    if (n == 0)
        return;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        constexpr int V = 16 / sizeof(T);
        const DroppedLowRankAdd<T> f {static_cast<T *>(dx), static_cast<const T *>(dDown), static_cast<const T *>(a), keep, scale, cols, rank};
        const auto s = static_cast<cudaStream_t>(stream);
        // Packs only where every row of dx, keep and A starts on 16 bytes (launchPacked's single-row
        // exception would misalign A's rows after the first).
        if (cols % V == 0 && aligned16({dx, a, keep}))
            PB_LAUNCH(elementwiseBlocks(n / V + 1), kThreads, 0, s, packKernel<V>)(n, f);
        else
            PB_LAUNCH(elementwiseBlocks(n), kThreads, 0, s, packKernel<1>)(n, f);
    });
    check(cudaGetLastError(), "dropped low-rank add kernel");
}

// Two blocks an SM over the column blocks and row chunks together, so the grid fills the card
// whatever the width.
int64_t droppedInputChunks(int64_t rows, int64_t cols)
{
    const int64_t colBlocks = (cols + 4 * kThreads - 1) / (4 * kThreads);
    const int64_t chunks = (2 * multiprocessorCount() + colBlocks - 1) / colBlocks;
    return rows < chunks ? (rows > 0 ? rows : 1) : chunks;
}

void droppedInputProduct(const void *x, const uint8_t *keep, float scale, const void *dDown, Dtype type, float *partials, int64_t rows, int64_t cols,
                         int64_t rank, void *stream)
{
    if (rank > kDroppedRankMax)
        throw std::invalid_argument("droppedInputProduct: rank " + std::to_string(rank) + " over " + std::to_string(kDroppedRankMax));
    if (rows == 0 || cols == 0 || rank == 0)
        return;
    const int64_t chunks = droppedInputChunks(rows, cols), rowsPerChunk = (rows + chunks - 1) / chunks;
    dispatch(type, [&](auto t) {
        using T = decltype(t);
        const auto s = static_cast<cudaStream_t>(stream);
        const bool packedDown = rank % 8 == 0 && aligned16({dDown});
        // Four columns a thread where every row of x, keep and the partials starts aligned for them.
        const bool four = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % (4 * sizeof(T)) == 0 && reinterpret_cast<uintptr_t>(keep) % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(partials) % 16 == 0;
        const int w = four ? 4 : 1;
        const dim3 grid(static_cast<unsigned>((cols + w * kThreads - 1) / (w * kThreads)), static_cast<unsigned>(chunks));
        if (four)
            PB_LAUNCH(grid, kThreads, 0, s, droppedInputProductKernel<T, 4>)(static_cast<const T *>(x), keep, scale, static_cast<const T *>(dDown), partials,
                                                                          rows, cols, rank, rowsPerChunk, packedDown);
        else
            PB_LAUNCH(grid, kThreads, 0, s, droppedInputProductKernel<T, 1>)(static_cast<const T *>(x), keep, scale, static_cast<const T *>(dDown), partials,
                                                                          rows, cols, rank, rowsPerChunk, packedDown);
    });
    check(cudaGetLastError(), "dropped input product kernel");
}

} // namespace pb::kernels
