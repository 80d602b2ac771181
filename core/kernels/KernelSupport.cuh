#pragma once
// Internal to the kernels' .cu files: element conversions through fp32, the launch shape of the
// element-wise kernels and the error check after a launch, shared by FusedKernels.cu,
// Nf4Kernels.cu and Float8Kernels.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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

} // namespace pb::kernels
