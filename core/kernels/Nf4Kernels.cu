// One thread per packed byte (two weights of one block); the 16 values in constant memory.
#include "kernels/Nf4Kernels.h"

#include "config/Nf4Format.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace pb::kernels {
namespace {

__constant__ float kValues[16];

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half(v); }

template <typename T>
__global__ void dequantizeKernel(const uint8_t *packed, const int8_t *absmax, const float *scales, const float *offset, T *out, int64_t numel)
{
    const int64_t bytes = (numel + 1) / 2;
    const float mean = offset[0];
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < bytes; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t e = 2 * i;
        const int64_t block = e / kNf4BlockSize;
        // As the composite path: the block's maximum rounded to fp32 once, then each value times it.
        const float scale = __fadd_rn(__fmul_rn(static_cast<float>(absmax[block]), scales[block / kNf4ScaleGroup]), mean);
        const uint8_t byte = packed[i];
        out[e] = fromFloat<T>(__fmul_rn(kValues[byte >> 4], scale));
        if (e + 1 < numel)
            out[e + 1] = fromFloat<T>(__fmul_rn(kValues[byte & 15], scale));
    }
}

void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
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
    constexpr int threads = 256;
    const int64_t bytes = (numel + 1) / 2;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((bytes + threads - 1) / threads, 65536));
    auto s = static_cast<cudaStream_t>(stream);
    switch (type) {
    case Dtype::Float32: dequantizeKernel<float><<<blocks, threads, 0, s>>>(packed, absmax, scales, offset, static_cast<float *>(out), numel); break;
    case Dtype::BFloat16: dequantizeKernel<__nv_bfloat16><<<blocks, threads, 0, s>>>(packed, absmax, scales, offset, static_cast<__nv_bfloat16 *>(out), numel); break;
    case Dtype::Float16: dequantizeKernel<__half><<<blocks, threads, 0, s>>>(packed, absmax, scales, offset, static_cast<__half *>(out), numel); break;
    }
    check(cudaGetLastError(), "NF4 dequantisation kernel");
}

} // namespace pb::kernels
