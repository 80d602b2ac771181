#pragma once
// The 16-byte-load forms of FusedKernels.cu's row kernels (RMSNorm forward and backward, rotary,
// cross-entropy, the capped attention softmax and its backward): a thread owns 8 consecutive
// elements per pack and keeps a row's packs in registers between the statistics and the output, so
// each input is read once. The scalar kernels there took 2-byte loads and read each row twice
// (about 0.8 TB/s for an RMSNorm backward of 8192 x 1536 bf16 on the H200, against the card's 4.8).
// Included by FusedKernels.cu, inside its anonymous namespace, after blockSum, warpSum, scaleValue,
// scaledInput, crossEntropyRowEnd, cappedScore, cappedProbability and visibleKeys; the scalar kernels stay for rows
// these do not take (widths not a multiple of 8, unaligned storage, over kVecMaxCols).

// The widest row the register-resident forms take: 4 packs of 8 for each of a block's threads.
constexpr int64_t kVecMaxCols = 4 * 8 * kThreads;

// Sum over the L threads that share a row (L of 8, 16 or 32 lanes of one warp, or the whole
// block); every one of them gets it. Every thread of the block must call it (the block form syncs).
template <int L> __device__ __forceinline__ float groupSum(float v, float *shared)
{
    if constexpr (L <= 32) {
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    } else {
        return blockSum(v, shared);
    }
}

// RMSNorm forward: L threads a row (kThreads / L rows a block), each holding up to K packs of it.
template <typename X, typename W, typename Y, int L, int K>
__global__ void __launch_bounds__(kThreads) rmsNormForwardVecKernel(const X *x, const W *w, Y *y, float *rstd, int64_t rows, int64_t cols, float eps,
                                                                     RmsNormForm form, ResidualIn residual)
{
    __shared__ float shared[kThreads / 32];
    const int lane = threadIdx.x % L;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / L) + threadIdx.x / L;
    const bool valid = row < rows; // not returned early: the row's other lanes still sum with this one
    const int64_t packs = cols / 8;
    const X *xr = x + (valid ? row : 0) * cols;
    float v[K][8];
    float sq = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t p = lane + static_cast<int64_t>(k) * L;
        if (valid && p < packs) {
            load8(xr + p * 8, v[k]);
            if (residual.branch) { // the stream plus the branch, rounded as eager's mul and add
                float b[8];
                load8(static_cast<const Y *>(residual.branch) + row * cols + p * 8, b);
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    v[k][i] = roundTo<X>(v[k][i] + (residual.scale == 1.f ? b[i] : roundTo<Y>(b[i] * residual.scale)));
                store8(static_cast<X *>(residual.sum) + row * cols + p * 8, v[k]);
            }
#pragma unroll
            for (int i = 0; i < 8; ++i)
                sq += v[k][i] * v[k][i];
        }
    }
    const float r = rsqrtf(groupSum<L>(sq, shared) / static_cast<float>(cols) + eps);
    if (!valid)
        return;
    if (lane == 0)
        rstd[row] = r;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t p = lane + static_cast<int64_t>(k) * L;
        if (p < packs) {
            float wv[8], o[8];
            load8(w + p * 8, wv);
#pragma unroll
            for (int i = 0; i < 8; ++i)
                o[i] = scaleValue<W>(wv[i], form) * scaledInput<X>(v[k][i] * r, form);
            store8(y + row * cols + p * 8, o);
        }
    }
}

// 8 elements of T as they lie in memory, held in registers until converted: the backward loads the
// packs of the rows ahead this way (BackwardRow), so their loads are in flight during this row's reduction.
template <typename T> struct RawPack {
    uint4 raw[sizeof(T) * 8 / 16];
};
template <typename T> __device__ __forceinline__ void loadRaw(const T *p, RawPack<T> &r)
{
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) * 8 / 16); ++i)
        r.raw[i] = reinterpret_cast<const uint4 *>(p)[i];
}

// One row's loads for the backward as they lie in memory (x, dy, the stream's own gradient where
// add + norm has one, and rstd), taken a row or two ahead of the row being summed.
template <typename DY, typename X, int K> struct BackwardRow {
    RawPack<X> x[K];
    RawPack<DY> dy[K];
    RawPack<X> dSum[K];
    float r;
};
struct NoRowAhead {};

// RMSNorm backward: each group of L threads strides over rows with its dw sums in registers (a
// thread's columns are the same on every row); the block's groups are summed in shared memory
// (cols floats, dynamic) and written as the block's row of dwPartial. The grid is a few blocks an
// SM (one dwPartial row each), so a block that loaded a row only when it reached it would wait out
// the loads' latency once a row: with one pack a thread the loads run two rows ahead, with two
// packs one row (four would spill with a second set), the stream's own gradient among them. At most
// 128 registers a thread, so two blocks fit an SM: the grid is two an SM (rmsNormPartials), and
// four packs of an fp32 stream took 134 to 146, which ran the grid in two waves of one block an SM.
template <typename DY, typename X, typename W, int L, int K>
__global__ void __launch_bounds__(kThreads, 2) rmsNormBackwardVecKernel(const DY *dy, const X *x, const W *w, const float *rstd, X *dx, float *dwPartial,
                                                                     int64_t rows, int64_t cols, RmsNormForm form, ResidualGrad residual)
{
    PB_DYNAMIC_SHARED(dwShared);
    __shared__ float shared[kThreads / 32];
    constexpr int kGroups = kThreads / L;
    constexpr int kAhead = K == 1 ? 2 : K == 2 ? 1 : 0;
    const int lane = threadIdx.x % L;
    const int64_t packs = cols / 8;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kGroups;
    const X *dSum = static_cast<const X *>(residual.dSum);
    float acc[K][8];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 8; ++i)
            acc[k][i] = 0.f;
    auto fetch = [&](BackwardRow<DY, X, K> &s, int64_t first) {
        const int64_t row = first + threadIdx.x / L;
        if (row >= rows)
            return;
        s.r = rstd[row];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t p = lane + static_cast<int64_t>(k) * L;
            if (p < packs) {
                loadRaw(x + row * cols + p * 8, s.x[k]);
                loadRaw(dy + row * cols + p * 8, s.dy[k]);
                if (dSum)
                    loadRaw(dSum + row * cols + p * 8, s.dSum[k]);
            }
        }
    };
    // The rows starting at `first` (one a group), from s where they were loaded ahead (then s is
    // refilled with the rows at `refill`). Every lane runs it the block's number of times, so
    // every lane reaches every groupSum.
    auto step = [&](int64_t first, auto &s, int64_t refill) {
        constexpr bool kHeld = !std::is_same<std::decay_t<decltype(s)>, NoRowAhead>::value;
        const int64_t row = first + threadIdx.x / L;
        const bool valid = row < rows;
        float r = 0.f;
        if constexpr (kHeld)
            r = valid ? s.r : 0.f;
        else
            r = valid ? rstd[row] : 0.f;
        float xn[K][8], gw[K][8], d[K][8];
        float dot = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t p = lane + static_cast<int64_t>(k) * L;
            if (valid && p < packs) {
                float xv[8], gv[8], wv[8];
                if constexpr (kHeld) {
                    load8(reinterpret_cast<const X *>(s.x[k].raw), xv);
                    load8(reinterpret_cast<const DY *>(s.dy[k].raw), gv);
                    if (dSum)
                        load8(reinterpret_cast<const X *>(s.dSum[k].raw), d[k]);
                } else {
                    load8(x + row * cols + p * 8, xv);
                    load8(dy + row * cols + p * 8, gv);
                }
                load8(w + p * 8, wv);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    xn[k][i] = xv[i] * r;
                    gw[k][i] = gv[i] * scaleValue<W>(wv[i], form);
                    dot += gw[k][i] * xn[k][i];
                    acc[k][i] += gv[i] * scaledInput<X>(xn[k][i], form);
                }
            }
        }
        if constexpr (kHeld)
            fetch(s, refill);
        const float mean = groupSum<L>(dot, shared) / static_cast<float>(cols);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t p = lane + static_cast<int64_t>(k) * L;
            if (valid && p < packs) {
                float o[8];
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    o[i] = r * (gw[k][i] - xn[k][i] * mean);
                if (dSum) { // the stream's own gradient, added as autograd accumulates x's dtype
                    if constexpr (!kHeld)
                        load8(dSum + row * cols + p * 8, d[k]);
#pragma unroll
                    for (int i = 0; i < 8; ++i)
                        o[i] = roundTo<X>(roundTo<X>(o[i]) + d[k][i]);
                }
                store8(dx + row * cols + p * 8, o);
                if (residual.dBranch) { // add's gradient cast to the branch's dtype, then mul's
                    if (residual.scale != 1.f)
#pragma unroll
                        for (int i = 0; i < 8; ++i)
                            o[i] = roundTo<DY>(roundTo<DY>(o[i]) * residual.scale);
                    store8(static_cast<DY *>(residual.dBranch) + row * cols + p * 8, o);
                }
            }
        }
    };
    const int64_t begin = static_cast<int64_t>(blockIdx.x) * kGroups;
    if constexpr (kAhead == 0) {
        NoRowAhead none;
        for (int64_t first = begin; first < rows; first += stride)
            step(first, none, 0);
    } else if constexpr (kAhead == 1) {
        BackwardRow<DY, X, K> a = {};
        fetch(a, begin);
        for (int64_t first = begin; first < rows; first += stride)
            step(first, a, first + stride);
    } else {
        BackwardRow<DY, X, K> a = {}, b = {};
        fetch(a, begin);
        fetch(b, begin + stride);
        for (int64_t first = begin; first < rows; first += 2 * stride) {
            step(first, a, first + 2 * stride);
            if (first + stride < rows) // the block's condition: first is the same for all its lanes
                step(first + stride, b, first + 3 * stride);
        }
    }
    float *out = dwPartial + static_cast<int64_t>(blockIdx.x) * cols;
    if constexpr (kGroups == 1) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t p = lane + static_cast<int64_t>(k) * L;
            if (p < packs)
                store8(out + p * 8, acc[k]);
        }
    } else {
        for (int64_t j = threadIdx.x; j < cols; j += kThreads)
            dwShared[j] = 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t p = lane + static_cast<int64_t>(k) * L;
            if (p < packs)
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    atomicAdd(dwShared + p * 8 + i, acc[k][i]);
        }
        __syncthreads();
        for (int64_t j = threadIdx.x; j < cols; j += kThreads)
            out[j] = dwShared[j];
    }
}

// Rotary on 8 pairs a thread: x's (j..j+7) and (j+half..j+half+7) of one head (half a multiple of 8).
template <typename T>
__global__ void rotaryVecKernel(const T *x, T *y, const float *cos, const float *sin, int64_t groups, int64_t heads, int64_t half, int64_t seqLen,
                                bool inverse)
{
    const int64_t perHead = half / 8;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < groups; q += stride) {
        const int64_t j = (q % perHead) * 8, rowHead = q / perHead;
        const int64_t pos = (rowHead / heads) % seqLen;
        const int64_t at = rowHead * 2 * half + j;
        float a[8], b[8], c1[8], s1[8], o1[8], o2[8];
        load8(x + at, a);
        load8(x + at + half, b);
        // The tables' halves are equal (FusedKernels.h), so only the first is read: the table
        // loads were two thirds of the kernel's load instructions.
        load8(cos + pos * 2 * half + j, c1);
        load8(sin + pos * 2 * half + j, s1);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if (!inverse) {
                o1[i] = a[i] * c1[i] - b[i] * s1[i];
                o2[i] = b[i] * c1[i] + a[i] * s1[i];
            } else {
                o1[i] = a[i] * c1[i] + b[i] * s1[i];
                o2[i] = b[i] * c1[i] - a[i] * s1[i];
            }
        }
        store8(y + at, o1);
        store8(y + at + half, o2);
    }
}

// crossEntropyKernel on packs of 8: the running (max, sum) updated once a pack.
template <typename T>
__global__ void crossEntropyVecKernel(T *logits, int64_t ld, const int64_t *targets, int64_t vocab, int64_t ignoreIndex, const float *scale, LogitsCap cap,
                                      float *rowLoss)
{
    T *row = logits + static_cast<int64_t>(blockIdx.x) * ld;
    const int64_t target = targets[blockIdx.x], packs = vocab / 8;
    float m = -FLT_MAX, s = 0.f;
    for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
        float v[8];
        load8(row + p * 8, v);
#pragma unroll
        for (int i = 0; i < 8; ++i)
            v[i] = cappedLogit(v[i], cap);
        float pm = v[0];
#pragma unroll
        for (int i = 1; i < 8; ++i)
            pm = fmaxf(pm, v[i]);
        if (pm > m) {
            s *= __expf(m - pm);
            m = pm;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
            s += __expf(v[i] - m);
    }
    // A vocabulary that is not a multiple of 8 (rows padded to one, ld): its last few logits singly.
    for (int64_t j = packs * 8 + threadIdx.x; j < vocab; j += kThreads)
        addToLse(cappedLogit(toFloat(row[j]), cap), m, s);
    float lse, rowScale;
    crossEntropyRowEnd(m, s, row, target, vocab, ignoreIndex, scale, cap, rowLoss, lse, rowScale);
    for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
        float v[8];
        load8(row + p * 8, v);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            float capped;
            const float d = cappedLogitGrad(v[i], cap, capped);
            v[i] = (__expf(capped - lse) - (p * 8 + i == target ? 1.f : 0.f)) * rowScale * d;
        }
        store8(row + p * 8, v);
    }
    for (int64_t j = packs * 8 + threadIdx.x; j < vocab; j += kThreads) {
        float capped;
        const float d = cappedLogitGrad(toFloat(row[j]), cap, capped);
        row[j] = fromFloat<T>((__expf(capped - lse) - (j == target ? 1.f : 0.f)) * rowScale * d);
    }
}

// cappedSoftmaxForwardKernel on packs of 8, a block a row, the row's packs held in registers (at
// most K a thread): each score is read and capped once, then exponentiated once (its exp kept for
// the output), and a pack wholly outside the keys the row sees is never read. A warp a row (8 rows
// a block, shuffles only, up to 8 packs a lane, the backward keeping tanh's output) was slower on
// an H100 at Gemma 2's 4 x 16 x 2048 x 2048 bf16: 853 and 1,156 us against this form's 620 and 885.
template <typename T, int K>
__global__ void __launch_bounds__(kThreads) cappedSoftmaxForwardVecKernel(const T *scores, T *probs, float *rowMax, float *rowSum, int64_t keys, ScoreCap cap)
{
    __shared__ float shared[kThreads / 32];
    const int64_t row = blockIdx.x, packs = keys / 8;
    const T *s = scores + row * keys;
    T *p = probs + row * keys;
    const float invCap = 1.f / cap.softcap;
    int64_t lo, hi;
    visibleKeys(row, keys, cap.window, lo, hi);
    float v[K][8];
    float m = -FLT_MAX, sum = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t j0 = (threadIdx.x + static_cast<int64_t>(k) * kThreads) * 8;
        const bool read = j0 / 8 < packs && j0 < hi && j0 + 8 > lo;
        if (read)
            load8(s + j0, v[k]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            float t;
            const bool seen = read && j0 + i >= lo && j0 + i < hi;
            v[k][i] = seen ? cappedScore<T>(v[k][i], cap, invCap, t) : -FLT_MAX;
            m = fmaxf(m, v[k][i]);
        }
    }
    m = blockMax(m, shared);
    // Each seen score's exp(score - max) in its place, 0 for the unseen (never the max: a row sees its own key).
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            v[k][i] = v[k][i] == -FLT_MAX ? 0.f : __expf(v[k][i] - m);
            sum += v[k][i];
        }
    sum = blockSum(sum, shared);
    if (threadIdx.x == 0) {
        rowMax[row] = m;
        rowSum[row] = sum;
    }
    const float invSum = 1.f / sum;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t j0 = (threadIdx.x + static_cast<int64_t>(k) * kThreads) * 8;
        if (j0 / 8 < packs) {
            float o[8];
#pragma unroll
            for (int i = 0; i < 8; ++i)
                o[i] = v[k][i] * invSum; // cappedProbability's product, its exp already taken
            store8(p + j0, o);
        }
    }
}

// cappedSoftmaxBackwardKernel on packs of 8, a block a row: the scores and their incoming gradient
// read once each (only where the row sees keys), the probability and tanh's output kept in
// registers between the row's dot product and the gradient.
template <typename T, int K>
__global__ void __launch_bounds__(kThreads) cappedSoftmaxBackwardVecKernel(const T *scores, const float *rowMax, const float *rowSum, const T *dProbs, T *dScores,
                                                                           int64_t keys, ScoreCap cap)
{
    __shared__ float shared[kThreads / 32];
    const int64_t row = blockIdx.x, packs = keys / 8;
    const T *s = scores + row * keys, *dp = dProbs + row * keys;
    T *ds = dScores + row * keys;
    const float invCap = 1.f / cap.softcap, m = rowMax[row], invSum = 1.f / rowSum[row];
    int64_t lo, hi;
    visibleKeys(row, keys, cap.window, lo, hi);
    float pf[K][8], t[K][8], g[K][8];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t j0 = (threadIdx.x + static_cast<int64_t>(k) * kThreads) * 8;
#pragma unroll
        for (int i = 0; i < 8; ++i)
            pf[k][i] = t[k][i] = g[k][i] = 0.f;
        if (j0 / 8 < packs && j0 < hi && j0 + 8 > lo) {
            float sv[8];
            load8(s + j0, sv);
            load8(dp + j0, g[k]);
#pragma unroll
            for (int i = 0; i < 8; ++i)
                if (j0 + i >= lo && j0 + i < hi) {
                    pf[k][i] = cappedProbability(cappedScore<T>(sv[i], cap, invCap, t[k][i]), m, invSum);
                    dot += pf[k][i] * g[k][i];
                }
        }
    }
    dot = blockSum(dot, shared);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t j0 = (threadIdx.x + static_cast<int64_t>(k) * kThreads) * 8;
        if (j0 / 8 >= packs)
            continue;
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            o[i] = 0.f;
            if (j0 + i >= lo && j0 + i < hi) {
                const float dx = roundTo<T>(pf[k][i] * (g[k][i] - dot));                       // softmax's, cast back to the scores' dtype
                const float dTanh = roundTo<T>(roundTo<T>(dx * cap.softcap) * (1.f - t[k][i] * t[k][i])); // * softcap, then tanh's
                o[i] = roundTo<T>(dTanh * invCap) * cap.scale;                                  // / softcap, then * scale
            }
        }
        store8(ds + j0, o);
    }
}
