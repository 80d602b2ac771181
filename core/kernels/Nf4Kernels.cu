// 16 weights a thread (8 packed bytes, 16-byte stores); the 16 values kept in constant memory and
// copied to each block's shared memory.
#include "kernels/Nf4Kernels.h"

#include "config/Nf4Format.h"
#include "kernels/KernelSupport.cuh"

#include <type_traits>

namespace pb::kernels {
namespace {

__constant__ float kValues[16];

__device__ __forceinline__ float blockScale(const int8_t *absmax, const float *scales, float mean, int64_t e)
{
    // As the composite path: the block's maximum rounded to fp32 once, then each value times it.
    const int64_t block = e / kNf4BlockSize;
    return __fadd_rn(__fmul_rn(static_cast<float>(absmax[block]), scales[block / kNf4ScaleGroup]), mean);
}

// 16 weights a thread: 8 packed bytes in one load, the outputs in 16-byte stores (a run of 16
// never crosses a block of 64). Weights [0, 16 * runs).
template <typename T>
__global__ void dequantizeRuns(const uint2 *packed, const int8_t *absmax, const float *scales, const float *offset, T *out, int64_t runs)
{
    // The values in shared memory: constant memory serialises a warp's differing lookups (the
    // profile showed this kernel at 0.74 TB/s with them there).
    __shared__ float values16[16];
    if (threadIdx.x < 16)
        values16[threadIdx.x] = kValues[threadIdx.x];
    __syncthreads();
    const float mean = offset[0];
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < runs; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const uint2 v = packed[i];
        const float scale = blockScale(absmax, scales, mean, 16 * i);
        alignas(16) T values[16];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned byte = ((j < 4 ? v.x : v.y) >> (8 * (j % 4))) & 0xFFu;
            values[2 * j] = fromFloat<T>(__fmul_rn(values16[byte >> 4], scale));
            values[2 * j + 1] = fromFloat<T>(__fmul_rn(values16[byte & 15u], scale));
        }
        auto *to = reinterpret_cast<uint4 *>(out + 16 * i);
        const auto *from = reinterpret_cast<const uint4 *>(values);
#pragma unroll
        for (int k = 0; k < static_cast<int>(sizeof(T)); ++k)
            to[k] = from[k];
    }
}

// The weights from `first` (even) on, one packed byte a thread: the tail after the runs.
template <typename T>
__global__ void dequantizeTail(const uint8_t *packed, const int8_t *absmax, const float *scales, const float *offset, T *out, int64_t first, int64_t numel)
{
    const int64_t e = first + 2 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
    if (e >= numel)
        return;
    const float scale = blockScale(absmax, scales, offset[0], e);
    const uint8_t byte = packed[e / 2];
    out[e] = fromFloat<T>(__fmul_rn(kValues[byte >> 4], scale));
    if (e + 1 < numel)
        out[e + 1] = fromFloat<T>(__fmul_rn(kValues[byte & 15], scale));
}

} // namespace

void nf4Dequantize(const uint8_t *packed, const int8_t *absmax, const float *scales, const float *offset, void *out, Dtype type, int64_t numel,
                   void *stream)
{
    if (numel == 0)
        return;
    static const bool tableSet = [] {
        check(cudaMemcpyToSymbol(kValues, kNf4Values.data(), sizeof(float) * 16), "NF4 table upload");
        return true;
    }();
    (void)tableSet;
    const int64_t runs = numel / 16;
    auto s = static_cast<cudaStream_t>(stream);
    const int64_t tail = numel - 16 * runs;
    auto launch = [&](auto *typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        if (runs > 0)
            PB_LAUNCH(elementwiseBlocks(runs), kThreads, 0, s, dequantizeRuns<T>)(reinterpret_cast<const uint2 *>(packed), absmax, scales, offset, typed, runs);
        if (tail > 0)
            PB_LAUNCH(1, kThreads, 0, s, dequantizeTail<T>)(packed, absmax, scales, offset, typed, 16 * runs, numel);
    };
    switch (type) {
    case Dtype::Float32: launch(static_cast<float *>(out)); break;
    case Dtype::BFloat16: launch(static_cast<__nv_bfloat16 *>(out)); break;
    case Dtype::Float16: launch(static_cast<__half *>(out)); break;
    }
    check(cudaGetLastError(), "NF4 dequantisation kernel");
}

} // namespace pb::kernels
