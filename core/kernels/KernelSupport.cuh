#pragma once
// Internal to the kernels' .cu files: element conversions through fp32, loads and stores of 8
// elements in 16-byte pieces, the launch shape of the element-wise kernels and the error check
// after a launch, and the launch macro the host emulation redefines, shared by the kernels' .cu and
// .cuh files.
#ifndef PB_CUDA_EMULATION // the tests' host emulation (tests/core/engine/CudaEmulation.h) brings its own
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// A launch, PB_LAUNCH(grid, block, sharedBytes, stream, kernel)(arguments...), and the block's
// dynamic shared memory, written so that the emulation can define them for the host.
#define PB_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define PB_DYNAMIC_SHARED(name) extern __shared__ float name[]
#endif

#include <cstdint>
#include <stdexcept>
#include <string>

namespace pb::kernels {

constexpr int kThreads = 256;

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half(v); }
// v as T holds it (rounded to nearest even), back in fp32.
template <typename T> __device__ __forceinline__ float roundTo(float v) { return toFloat(fromFloat<T>(v)); }

// The block's maximum of `m`, in every thread; `partial` is reusable when it returns.
__device__ __forceinline__ float blockMax(float m, float *partial)
{
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0)
        partial[threadIdx.x / 32] = m;
    __syncthreads();
    m = partial[0];
    for (int i = 1; i < kThreads / 32; ++i)
        m = fmaxf(m, partial[i]);
    __syncthreads();
    return m;
}

// 8 consecutive elements as fp32, through 16-byte loads and stores (p 16-byte aligned).
__device__ __forceinline__ void load8(const float *p, float (&v)[8])
{
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float (&v)[8])
{
    const uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const auto *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void load8(const __half *p, float (&v)[8])
{
    const uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const auto *h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void store8(float *p, const float (&v)[8])
{
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void store8(__nv_bfloat16 *p, const float (&v)[8])
{
    uint4 raw;
    auto *h = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
        h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = raw;
}
__device__ __forceinline__ void store8(__half *p, const float (&v)[8])
{
    uint4 raw;
    auto *h = reinterpret_cast<__half2 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
        h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = raw;
}

// Blocks of kThreads for `work` items of a grid-stride loop: at least 1, at most 65536.
inline unsigned elementwiseBlocks(int64_t work)
{
    const int64_t blocks = (work + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 65536 ? (blocks < 1 ? 1 : blocks) : 65536);
}

inline void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The current device's multiprocessors, which the grids of two (or six) blocks an SM are sized by.
inline int64_t multiprocessorCount()
{
    int device = 0, sms = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "multiprocessor count");
    return sms;
}

} // namespace pb::kernels
