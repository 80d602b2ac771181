// The row-wise cast holds its row in registers (one read of the input) where the row fits, a wide
// 16-bit row as its 16-bit values, and can take each column's absolute maximum on the way (for a
// later transposed cast); a 16-bit row wider still is read twice, by two kernels that keep every
// multiprocessor busy; otherwise one block a row reads it twice (the second read hits L2). The
// transposed cast goes through a 64 x 64 tile of float8 bytes in shared memory (a 64 x 128 tile
// with four rows' loads in flight a thread was slower on an H100: 1.8-2.0 TB/s in
// bench_float8_casts, 15.1 ms a step where this one took 14.1 for more bytes). A grid-stride loop
// for the per-tensor cast.
#include "kernels/Float8Kernels.h"

#include "kernels/KernelSupport.cuh"

#ifndef PB_CUDA_EMULATION
#include <cuda_fp8.h>
#endif

#include <algorithm>
#include <type_traits>

namespace pb::kernels {
namespace {

__device__ __forceinline__ uint8_t cast(float v, bool e5m2)
{
    return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

__device__ __forceinline__ float scaleOf(float amax, bool e5m2) { return __fdiv_rn(fmaxf(amax, 1e-12f), e5m2 ? 57344.f : 448.f); }

// Eight values divided by `scale` and cast, packed in memory order.
__device__ __forceinline__ uint2 cast8(const float (&v)[8], float scale, bool e5m2)
{
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        lo |= static_cast<uint32_t>(cast(__fdiv_rn(v[i], scale), e5m2)) << (8 * i);
        hi |= static_cast<uint32_t>(cast(__fdiv_rn(v[4 + i], scale), e5m2)) << (8 * i);
    }
    return make_uint2(lo, hi);
}

// Non-negative floats order as their bit patterns: a column's maximum by integer atomicMax on a
// zero-initialised fp32 array.
__device__ __forceinline__ void atomicMaxNonNegative(float *address, float v) { atomicMax(reinterpret_cast<int *>(address), __float_as_int(v)); }

// One chunk of a block's column maxima (thread t's 8 columns at base + 8 t on) into colAmax (zero on
// entry), through `stage` [2 * kThreads] in shared memory so that a warp's atomics fall on 32
// consecutive columns rather than on every eighth. Every thread of the block calls it.
__device__ __forceinline__ void addColumnMaxima(float4 *stage, const float (&m)[8], int64_t base, int64_t cols, float *colAmax)
{
    stage[2 * threadIdx.x] = make_float4(m[0], m[1], m[2], m[3]);
    stage[2 * threadIdx.x + 1] = make_float4(m[4], m[5], m[6], m[7]);
    __syncthreads();
    const float *staged = reinterpret_cast<const float *>(stage);
    for (int j = threadIdx.x; j < 8 * kThreads && base + j < cols; j += kThreads)
        atomicMaxNonNegative(colAmax + base + j, staged[j]);
    __syncthreads();
}

// Rows first..first+rowsPerBlock-1 of x [rows, cols] (cols a multiple of 8, 16-byte aligned rows,
// at most CHUNKS * 8 * kThreads columns): each row read once into registers, its maximum, scale and
// float8 values; with COLUMNS, each column's maximum over the block's rows goes to colAmax.
template <typename T, int CHUNKS, bool COLUMNS>
__global__ void __launch_bounds__(kThreads) quantizeRowsCached(const T *x, int64_t rows, int64_t cols, int64_t rowsPerBlock, bool e5m2, uint8_t *out,
                                                               float *scales, float *colAmax)
{
    __shared__ float partial[kThreads / 32];
    float colMax[CHUNKS][8];
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k)
#pragma unroll
        for (int i = 0; i < 8; ++i)
            colMax[k][i] = 0.f;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * rowsPerBlock;
    const int64_t last = first + rowsPerBlock < rows ? first + rowsPerBlock : rows;
    for (int64_t r = first; r < last; ++r) {
        const T *row = x + r * cols;
        float v[CHUNKS][8];
        float m = 0.f;
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t c = (static_cast<int64_t>(k) * kThreads + threadIdx.x) * 8;
            if (c < cols) {
                load8(row + c, v[k]);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float a = fabsf(v[k][i]);
                    m = fmaxf(m, a);
                    if (COLUMNS)
                        colMax[k][i] = fmaxf(colMax[k][i], a);
                }
            }
        }
        const float scale = scaleOf(blockMax(m, partial), e5m2);
        if (threadIdx.x == 0)
            scales[r] = scale;
        uint8_t *o = out + r * cols;
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t c = (static_cast<int64_t>(k) * kThreads + threadIdx.x) * 8;
            if (c < cols)
                *reinterpret_cast<uint2 *>(o + c) = cast8(v[k], scale, e5m2);
        }
    }
    if (COLUMNS && first < last) {
        __shared__ float4 stage[2 * kThreads];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t base = static_cast<int64_t>(k) * kThreads * 8;
            if (base >= cols)
                break;
            addColumnMaxima(stage, colMax[k], base, cols, colAmax);
        }
    }
}

// |x| of two packed bf16 as bit patterns (non-negative bf16 values order as their bits), and each
// 16-bit half's larger one: a 16-bit row's and its columns' maxima without converting to fp32.
__device__ __forceinline__ uint32_t absBf16x2(uint32_t v) { return v & 0x7fff7fffu; }
__device__ __forceinline__ uint32_t maxHalves(uint32_t a, uint32_t b) { return __vmaxu2(a, b); }
__device__ __forceinline__ float bf16BitsAsFloat(uint32_t bits) { return __uint_as_float(bits << 16); }
__device__ __forceinline__ uint4 maxHalves(const uint4 &a, const uint4 &b)
{
    return make_uint4(maxHalves(a.x, b.x), maxHalves(a.y, b.y), maxHalves(a.z, b.z), maxHalves(a.w, b.w));
}
__device__ __forceinline__ uint4 absBf16x8(const uint4 &v) { return make_uint4(absBf16x2(v.x), absBf16x2(v.y), absBf16x2(v.z), absBf16x2(v.w)); }
// Eight bf16 packed in memory order as fp32 (exact: a bf16 is an fp32's upper half).
__device__ __forceinline__ void unpackBf16x8(const uint4 &raw, float (&v)[8])
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[2 * i] = bf16BitsAsFloat(w[i] & 0xffffu);
        v[2 * i + 1] = bf16BitsAsFloat(w[i] >> 16);
    }
}

// A bf16 row of up to CHUNKS * 8 * kThreads columns (a multiple of 8, 16-byte aligned rows) held in
// registers as its own 16-bit values (half the registers of fp32, so several blocks share a
// multiprocessor and one's loads overlap another's arithmetic), read once: its maximum and, with
// COLUMNS, each column's over the block's rows, as 16-bit patterns; then the scale and the cast.
template <int CHUNKS, bool COLUMNS>
__global__ void __launch_bounds__(kThreads) quantizeBf16RowsHeld(const __nv_bfloat16 *x, int64_t rows, int64_t cols, int64_t rowsPerBlock, bool e5m2,
                                                                 uint8_t *out, float *scales, float *colAmax)
{
    __shared__ float partial[kThreads / 32];
    uint4 colMax[CHUNKS];
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k)
        colMax[k] = make_uint4(0, 0, 0, 0);
    const int64_t first = static_cast<int64_t>(blockIdx.x) * rowsPerBlock;
    const int64_t last = first + rowsPerBlock < rows ? first + rowsPerBlock : rows;
    for (int64_t r = first; r < last; ++r) {
        const __nv_bfloat16 *row = x + r * cols;
        uint4 v[CHUNKS];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t c = (static_cast<int64_t>(k) * kThreads + threadIdx.x) * 8;
            v[k] = c < cols ? *reinterpret_cast<const uint4 *>(row + c) : make_uint4(0, 0, 0, 0);
        }
        uint4 m4 = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const uint4 a = absBf16x8(v[k]);
            m4 = maxHalves(m4, a);
            if (COLUMNS)
                colMax[k] = maxHalves(colMax[k], a);
        }
        const uint32_t m2 = maxHalves(maxHalves(m4.x, m4.y), maxHalves(m4.z, m4.w));
        const uint32_t m = (m2 & 0xffffu) > (m2 >> 16) ? (m2 & 0xffffu) : (m2 >> 16);
        const float scale = scaleOf(blockMax(bf16BitsAsFloat(m), partial), e5m2);
        if (threadIdx.x == 0)
            scales[r] = scale;
        uint8_t *o = out + r * cols;
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t c = (static_cast<int64_t>(k) * kThreads + threadIdx.x) * 8;
            if (c < cols) {
                float f[8];
                unpackBf16x8(v[k], f);
                *reinterpret_cast<uint2 *>(o + c) = cast8(f, scale, e5m2);
            }
        }
    }
    if (COLUMNS && first < last) {
        __shared__ float4 stage[2 * kThreads];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
            const int64_t base = static_cast<int64_t>(k) * kThreads * 8;
            if (base >= cols)
                break;
            float f[8];
            unpackBf16x8(colMax[k], f);
            addColumnMaxima(stage, f, base, cols, colAmax);
        }
    }
}

// Any shape: one block a row, the row read twice.
template <typename T> __global__ void quantizeRows(const T *x, int64_t cols, bool e5m2, uint8_t *out, float *scales)
{
    __shared__ float partial[kThreads / 32];
    const T *row = x + blockIdx.x * cols;
    float m = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
        m = fmaxf(m, fabsf(toFloat(row[c])));
    const float scale = scaleOf(blockMax(m, partial), e5m2);
    if (threadIdx.x == 0)
        scales[blockIdx.x] = scale;
    uint8_t *o = out + blockIdx.x * cols;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
        o[c] = cast(__fdiv_rn(toFloat(row[c]), scale), e5m2);
}

// Each column's maximum |x| over a band of kColumnBand rows, one thread a column, into colAmax.
constexpr int kColumnBand = 256;
template <typename T> __global__ void columnAmax(const T *x, int64_t rows, int64_t cols, float *colAmax)
{
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c >= cols)
        return;
    const int64_t first = static_cast<int64_t>(blockIdx.y) * kColumnBand;
    const int64_t last = first + kColumnBand < rows ? first + kColumnBand : rows;
    float m = 0.f;
    for (int64_t r = first; r < last; ++r)
        m = fmaxf(m, fabsf(toFloat(x[r * cols + c])));
    atomicMaxNonNegative(colAmax + c, m);
}

// Wide 16-bit rows in two passes, each with every multiprocessor busy (the register-held row
// leaves one block a multiprocessor there, and its loads wait on its arithmetic). First each row's
// and each column's maximum |x| over tiles of kBand rows x 2048 columns, into rowAmax (zero on
// entry) and, when not null, colAmax; then the cast, one 8-element vector a thread.
constexpr int kBand = 32;
template <typename T> __global__ void __launch_bounds__(kThreads) rowColumnAmax(const T *x, int64_t rows, int64_t cols, float *rowAmax, float *colAmax)
{
    __shared__ float rowPartial[kThreads / 32][kBand];
    __shared__ float4 stage[2 * kThreads];
    const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBand, base = static_cast<int64_t>(blockIdx.x) * kThreads * 8;
    const int64_t c = base + threadIdx.x * 8;
    float colMax[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    // Four rows' loads in flight before their maxima.
    for (int j0 = 0; j0 < kBand; j0 += 4) {
        float v[4][8];
#pragma unroll
        for (int b = 0; b < 4; ++b)
            if (r0 + j0 + b < rows && c < cols)
                load8(x + (r0 + j0 + b) * cols + c, v[b]);
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            float m = 0.f;
            if (r0 + j0 + b < rows && c < cols)
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float a = fabsf(v[b][i]);
                    m = fmaxf(m, a);
                    colMax[i] = fmaxf(colMax[i], a);
                }
            for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            if (threadIdx.x % 32 == 0)
                rowPartial[threadIdx.x / 32][j0 + b] = m;
        }
    }
    stage[2 * threadIdx.x] = make_float4(colMax[0], colMax[1], colMax[2], colMax[3]);
    stage[2 * threadIdx.x + 1] = make_float4(colMax[4], colMax[5], colMax[6], colMax[7]);
    __syncthreads();
    if (threadIdx.x < kBand && r0 + threadIdx.x < rows) {
        float m = rowPartial[0][threadIdx.x];
        for (int w = 1; w < kThreads / 32; ++w)
            m = fmaxf(m, rowPartial[w][threadIdx.x]);
        atomicMaxNonNegative(rowAmax + r0 + threadIdx.x, m);
    }
    if (colAmax != nullptr) {
        const float *staged = reinterpret_cast<const float *>(stage);
        for (int j = threadIdx.x; j < 8 * kThreads && base + j < cols; j += kThreads)
            atomicMaxNonNegative(colAmax + base + j, staged[j]);
    }
}

// out = float8(x / scale(rowAmax[r])) for x [rows, cols] (cols a multiple of 8, 16-byte aligned),
// one block a row.
template <typename T> __global__ void __launch_bounds__(kThreads) quantizeRowsByAmax(const T *x, int64_t cols, const float *rowAmax, bool e5m2, uint8_t *out)
{
    const int64_t r = blockIdx.x;
    const float scale = scaleOf(rowAmax[r], e5m2);
    const T *row = x + r * cols;
    uint8_t *o = out + r * cols;
#pragma unroll 4
    for (int64_t c = threadIdx.x * 8; c < cols; c += kThreads * 8) {
        float v[8];
        load8(row + c, v);
        *reinterpret_cast<uint2 *>(o + c) = cast8(v, scale, e5m2);
    }
}

// In place: each row's maximum becomes its scale.
__global__ void amaxToScale(float *s, int64_t rows, bool e5m2)
{
    const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (r < rows)
        s[r] = scaleOf(s[r], e5m2);
}

// out [cols, rows] = float8(x^T / scale of its row), x [rows, cols] (rows a multiple of 16, cols of
// 8, 16-byte aligned): a 64 x 64 tile a block. Loading, thread t casts 8 columns (t % 8) of rows t / 8
// and 32 + t / 8 into the tile, transposed (tile[column][row] bytes, rows padded to 68 bytes);
// storing, it writes 16 bytes (rows 16 * (t % 4) on) of the output row t / 4.
constexpr int kTile = 64, kTileStride = kTile + 4;
template <typename T>
__global__ void __launch_bounds__(kThreads) quantizeColumnsT(const T *x, int64_t rows, int64_t cols, const float *amax, bool perColumn, bool e5m2,
                                                             uint8_t *out, float *scales)
{
    __shared__ __align__(16) uint8_t tile[kTile * kTileStride];
    const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile, r0 = static_cast<int64_t>(blockIdx.y) * kTile;
    const int t = threadIdx.x, segment = t % 8, rowInTile = t / 8;
    const int64_t c = c0 + segment * 8;
    if (c < cols) {
        float scale[8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
            scale[i] = scaleOf(amax[perColumn ? c + i : 0], e5m2);
        if (scales != nullptr && perColumn && blockIdx.y == 0 && rowInTile == 0)
#pragma unroll
            for (int i = 0; i < 8; ++i)
                scales[c + i] = scale[i];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = rowInTile + half * (kThreads / 8);
            if (r0 + r < rows) {
                float v[8];
                load8(x + (r0 + r) * cols + c, v);
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    tile[(segment * 8 + i) * kTileStride + r] = cast(__fdiv_rn(v[i], scale[i]), e5m2);
            }
        }
    }
    __syncthreads();
    const int outRow = t / 4, part = t % 4;
    const int64_t oc = c0 + outRow, orow = r0 + part * 16;
    if (oc < cols && orow < rows) {
        const auto *w = reinterpret_cast<const uint32_t *>(tile + outRow * kTileStride + part * 16);
        *reinterpret_cast<uint4 *>(out + oc * rows + orow) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

template <typename T> void quantizeColumnsTransposedAs(const T *x, int64_t rows, int64_t cols, const float *amax, bool perColumn, bool e5m2, uint8_t *out,
                                                       float *scales, cudaStream_t s)
{
    const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
    PB_LAUNCH(grid, kThreads, 0, s, quantizeColumnsT<T>)(x, rows, cols, amax, perColumn, e5m2, out, scales);
}

template <typename T, int CHUNKS>
void launchRowsCached(const T *x, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, float *colAmax, cudaStream_t s)
{
    // With column maxima, a block takes several rows (one atomic a column a block): about 512
    // blocks, at least 2 rows each; without, a row a block.
    const int64_t rowsPerBlock = colAmax == nullptr ? 1 : std::max<int64_t>(2, (rows + 511) / 512);
    const unsigned blocks = static_cast<unsigned>((rows + rowsPerBlock - 1) / rowsPerBlock);
    if (colAmax != nullptr)
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeRowsCached<T, CHUNKS, true>)(x, rows, cols, rowsPerBlock, e5m2, out, scales, colAmax);
    else
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeRowsCached<T, CHUNKS, false>)(x, rows, cols, rowsPerBlock, e5m2, out, scales, nullptr);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool wideRowsInOnePass = true;

template <int CHUNKS>
void launchBf16RowsHeld(const __nv_bfloat16 *x, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, float *colAmax, cudaStream_t s)
{
    // With column maxima, about six blocks a multiprocessor (one column atomic a block), else a row
    // a block.
    const int64_t sms = multiprocessorCount();
    const int64_t rowsPerBlock = colAmax == nullptr ? 1 : std::max<int64_t>(2, (rows + 6 * sms - 1) / (6 * sms));
    const unsigned blocks = static_cast<unsigned>((rows + rowsPerBlock - 1) / rowsPerBlock);
    if (colAmax != nullptr)
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeBf16RowsHeld<CHUNKS, true>)(x, rows, cols, rowsPerBlock, e5m2, out, scales, colAmax);
    else
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeBf16RowsHeld<CHUNKS, false>)(x, rows, cols, rowsPerBlock, e5m2, out, scales, nullptr);
}

template <typename T> void quantizeRowsAs(const T *x, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, float *colAmax, cudaStream_t s)
{
    const int64_t chunks = (cols + 8 * kThreads - 1) / (8 * kThreads);
    const bool vectors = cols % 8 == 0 && aligned16(x) && aligned16(out);
    // Measured on an H200 (Llama-3.1-8B widths, 4096 tokens): a register-held row of 14336 columns
    // as fp32 values cast at 0.8 TB/s, the two passes at about 3; an fp32 row of 14336 held in
    // registers still beats reading it twice. Held as 16-bit values, the row takes half the registers.
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
        if (vectors && chunks > 4 && chunks <= 8 && wideRowsInOnePass) {
            launchBf16RowsHeld<8>(x, rows, cols, e5m2, out, scales, colAmax, s);
            return;
        }
    }
    if (vectors && std::is_same<T, __nv_bfloat16>::value && chunks > 4) {
        check(cudaMemsetAsync(scales, 0, static_cast<size_t>(rows) * sizeof(float), s), "float8 row maxima");
        const dim3 grid(static_cast<unsigned>((cols + 8 * kThreads - 1) / (8 * kThreads)), static_cast<unsigned>((rows + kBand - 1) / kBand));
        PB_LAUNCH(grid, kThreads, 0, s, rowColumnAmax<T>)(x, rows, cols, scales, colAmax);
        PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, s, quantizeRowsByAmax<T>)(x, cols, scales, e5m2, out);
        PB_LAUNCH(static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, s, amaxToScale)(scales, rows, e5m2);
        return;
    }
    if (vectors && chunks <= 8) {
        if (chunks <= 1)
            launchRowsCached<T, 1>(x, rows, cols, e5m2, out, scales, colAmax, s);
        else if (chunks <= 2)
            launchRowsCached<T, 2>(x, rows, cols, e5m2, out, scales, colAmax, s);
        else if (chunks <= 4)
            launchRowsCached<T, 4>(x, rows, cols, e5m2, out, scales, colAmax, s);
        else
            launchRowsCached<T, 8>(x, rows, cols, e5m2, out, scales, colAmax, s);
        return;
    }
    PB_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, s, quantizeRows<T>)(x, cols, e5m2, out, scales);
    if (colAmax != nullptr) {
        const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>((rows + kColumnBand - 1) / kColumnBand));
        PB_LAUNCH(grid, kThreads, 0, s, columnAmax<T>)(x, rows, cols, colAmax);
    }
}

template <typename T> __global__ void quantizeWithScale(const T *x, int64_t n, bool e5m2, const float *scale, uint8_t *out)
{
    const float s = scale[0];
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = cast(__fdiv_rn(toFloat(x[i]), s), e5m2);
}

} // namespace

void float8QuantizeRows(const void *x, Dtype type, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, void *stream, float *colAmax)
{
    if (rows == 0 || cols == 0)
        return;
    auto s = static_cast<cudaStream_t>(stream);
    if (type == Dtype::Float32)
        quantizeRowsAs(static_cast<const float *>(x), rows, cols, e5m2, out, scales, colAmax, s);
    else if (type == Dtype::BFloat16)
        quantizeRowsAs(static_cast<const __nv_bfloat16 *>(x), rows, cols, e5m2, out, scales, colAmax, s);
    else
        throw std::invalid_argument("float8QuantizeRows: fp32 or bf16 input");
    check(cudaGetLastError(), "float8 row cast kernel");
}

void float8SetWideRowsInOnePass(bool onePass) { wideRowsInOnePass = onePass; }

bool float8TransposedCastFits(const void *x, int64_t rows, int64_t cols) { return rows % 16 == 0 && cols % 8 == 0 && aligned16(x); }

void float8QuantizeColumnsTransposed(const void *x, Dtype type, int64_t rows, int64_t cols, const float *amax, bool perColumn, bool e5m2, uint8_t *out,
                                     float *scales, void *stream)
{
    if (rows == 0 || cols == 0)
        return;
    if (!float8TransposedCastFits(x, rows, cols) || !aligned16(out))
        throw std::invalid_argument("float8QuantizeColumnsTransposed: rows a multiple of 16, columns of 8, 16-byte aligned");
    auto s = static_cast<cudaStream_t>(stream);
    if (type == Dtype::Float32)
        quantizeColumnsTransposedAs(static_cast<const float *>(x), rows, cols, amax, perColumn, e5m2, out, scales, s);
    else if (type == Dtype::BFloat16)
        quantizeColumnsTransposedAs(static_cast<const __nv_bfloat16 *>(x), rows, cols, amax, perColumn, e5m2, out, scales, s);
    else
        throw std::invalid_argument("float8QuantizeColumnsTransposed: fp32 or bf16 input");
    check(cudaGetLastError(), "float8 transposed cast kernel");
}

void float8QuantizeWithScale(const void *x, Dtype type, int64_t n, bool e5m2, const float *scale, uint8_t *out, void *stream)
{
    if (n == 0)
        return;
    auto s = static_cast<cudaStream_t>(stream);
    const unsigned blocks = elementwiseBlocks(n);
    if (type == Dtype::Float32)
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeWithScale<float>)(static_cast<const float *>(x), n, e5m2, scale, out);
    else if (type == Dtype::BFloat16)
        PB_LAUNCH(blocks, kThreads, 0, s, quantizeWithScale<__nv_bfloat16>)(static_cast<const __nv_bfloat16 *>(x), n, e5m2, scale, out);
    else
        throw std::invalid_argument("float8QuantizeWithScale: fp32 or bf16 input");
    check(cudaGetLastError(), "float8 cast kernel");
}

} // namespace pb::kernels
