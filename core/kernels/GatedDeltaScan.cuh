#pragma once
// The device code of kernels/GatedDeltaScanKernels.h. It also compiles as host C++ under the tests'
// CUDA emulation (tests/core/engine/CudaEmulation.h: one std::thread per CUDA thread, a barrier
// for __syncthreads), so CI runs this very code against the LibTorch loop; the card runs it through
// GatedDeltaScanKernels.cu.
#include "kernels/GatedDeltaScanKernels.h"
#include "kernels/KernelSupport.cuh"

namespace pb::kernels {

constexpr int kScanThreads = 256;

__host__ __device__ inline float scanAt(const ScanMatrix &m, int64_t matrix, int64_t r, int64_t c) { return m.p[matrix * m.batch + r * m.row + c * m.col]; }

// Floats of shared memory a block needs for `tile` value columns: the state's tile, the
// innovation's, the chunk's X and Z whole (rows padded by one float, so the rows a narrow tile's warp
// reads at once fall in different banks), and Xr and Yr's tile where that term is there.
inline int64_t deltaScanSharedFloats(const DeltaScanArgs &a, int64_t tile)
{
    return a.dk * tile + a.chunk * tile + a.dk * (a.chunk + 1) + a.chunk * (a.dk + 1) + (a.xr.p ? a.dk * (a.chunk + 1) + a.chunk * tile : 0);
}

// The widest tile (at most 32 columns, down to 1) whose block fits `maxSharedBytes`, narrowed while
// the grid has fewer than two blocks per multiprocessor and a tile stays at least 8 wide; 0 where
// not even one column fits.
inline int64_t deltaScanTile(const DeltaScanArgs &a, int64_t maxSharedBytes, int64_t multiprocessors)
{
    int64_t tile = a.dv < 32 ? a.dv : 32;
    while (tile > 0 && deltaScanSharedFloats(a, tile) * static_cast<int64_t>(sizeof(float)) > maxSharedBytes)
        tile /= 2;
    while (tile > 8 && a.heads * ((a.dv + tile - 1) / tile) < 2 * multiprocessors)
        tile /= 2;
    return tile;
}

// Copies matrix m of `mat` ([rows, cols]) into shared memory at dst[r * dstRow + c], the block's
// threads stepping along whichever of its dimensions is contiguous, so a warp's reads coalesce also
// for the backward's transposed views.
__device__ __forceinline__ void loadMatrix(const ScanMatrix &mat, int64_t m, int64_t rows, int64_t cols, float *dst, int64_t dstRow, int64_t tid,
                                           int64_t threads)
{
    const bool rowsFastest = mat.row == 1 && mat.col != 1;
    for (int64_t e = tid; e < rows * cols; e += threads) {
        const int64_t r = rowsFastest ? e % rows : e / cols, c = rowsFastest ? e / rows : e % cols;
        dst[r * dstRow + c] = scanAt(mat, m, r, c);
    }
}

// Block (head, tile of value columns); each thread owns elements e = threadIdx.x + k * blockDim.x of
// the [rows, tile] matrices it writes, so no element has two writers. A warp reads one row of X or
// Z (a broadcast) against consecutive columns of the state or the innovation.
__global__ void gatedDeltaScanKernel(DeltaScanArgs a)
{
    PB_DYNAMIC_SHARED(shared);
    const int64_t head = blockIdx.x, j0 = static_cast<int64_t>(blockIdx.y) * a.tile;
    const int64_t width = a.dv - j0 < a.tile ? a.dv - j0 : a.tile;
    const int64_t tile = a.tile, c = a.chunk, dk = a.dk, dv = a.dv;
    const int64_t tid = threadIdx.x, threads = blockDim.x;
    const int64_t xStride = c + 1, zStride = dk + 1;
    float *state = shared;                // [dk][tile]
    float *innov = state + dk * tile;     // [c][tile]
    float *xs = innov + c * tile;         // [dk][xStride]
    float *zs = xs + dk * xStride;        // [c][zStride]
    float *xrs = zs + c * zStride;        // [dk][xStride]
    float *yrs = xrs + dk * xStride;      // [c][tile]
    const bool extra = a.xr.p != nullptr;

    for (int64_t e = tid; e < dk * width; e += threads) {
        const int64_t k = e / width, j = e % width;
        state[k * tile + j] = a.initial ? a.initial[(head * dk + k) * dv + j0 + j] : 0.f;
    }
    for (int64_t step = 0; step < a.chunks; ++step) {
        const int64_t i = a.reverse ? a.chunks - 1 - step : step;
        const int64_t m = head * a.chunks + i;
        // Each thread stores the state elements it owns (set by itself in the previous step).
        for (int64_t e = tid; e < dk * width; e += threads) {
            const int64_t k = e / width, j = e % width;
            a.entering[(m * dk + k) * dv + j0 + j] = state[k * tile + j];
        }
        loadMatrix(a.x, m, dk, c, xs, xStride, tid, threads);
        loadMatrix(a.z, m, c, dk, zs, zStride, tid, threads);
        if (extra)
            loadMatrix(a.xr, m, dk, c, xrs, xStride, tid, threads);
        for (int64_t e = tid; e < c * width; e += threads) {
            const int64_t r = e / width, j = e % width;
            innov[r * tile + j] = scanAt(a.y, m, r, j0 + j);
            if (extra)
                yrs[r * tile + j] = scanAt(a.yr, m, r, j0 + j);
        }
        __syncthreads();
        // innovation = Y + zScale * Z S: reads the whole state, writes only its own elements.
        for (int64_t e = tid; e < c * width; e += threads) {
            const int64_t r = e / width, j = e % width;
            float acc = 0.f;
            for (int64_t k = 0; k < dk; ++k)
                acc += zs[r * zStride + k] * state[k * tile + j];
            const float value = innov[r * tile + j] + a.zScale * acc;
            innov[r * tile + j] = value;
            a.innovation[(m * c + r) * dv + j0 + j] = value;
        }
        __syncthreads();
        // S = decay S + xScale X innovation (+ Xr Yr): reads the innovation whole, its own state element.
        const float decay = a.decay[m];
        for (int64_t e = tid; e < dk * width; e += threads) {
            const int64_t k = e / width, j = e % width;
            float acc = 0.f, accExtra = 0.f;
            for (int64_t r = 0; r < c; ++r)
                acc += xs[k * xStride + r] * innov[r * tile + j];
            if (extra)
                for (int64_t r = 0; r < c; ++r)
                    accExtra += xrs[k * xStride + r] * yrs[r * tile + j];
            state[k * tile + j] = decay * state[k * tile + j] + a.xScale * acc + accExtra;
        }
        __syncthreads();
    }
    for (int64_t e = tid; e < dk * width; e += threads) {
        const int64_t k = e / width, j = e % width;
        a.final[(head * dk + k) * dv + j0 + j] = state[k * tile + j];
    }
}

} // namespace pb::kernels
