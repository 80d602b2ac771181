// One block a row for the row-wise cast (a row is at most a few tens of KiB: its second read hits
// L2); a grid-stride loop for the per-tensor one.
#include "kernels/Float8Kernels.h"

#include "kernels/KernelSupport.cuh"

#include <cuda_fp8.h>

namespace pb::kernels {
namespace {

__device__ __forceinline__ uint8_t cast(float v, bool e5m2)
{
    return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

template <typename T> __global__ void quantizeRows(const T *x, int64_t cols, bool e5m2, uint8_t *out, float *scales)
{
    __shared__ float partial[kThreads / 32];
    const T *row = x + blockIdx.x * cols;
    float m = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
        m = fmaxf(m, fabsf(toFloat(row[c])));
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0)
        partial[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.f;
    for (int i = 0; i < kThreads / 32; ++i)
        m = fmaxf(m, partial[i]);
    const float scale = __fdiv_rn(fmaxf(m, 1e-12f), e5m2 ? 57344.f : 448.f);
    if (threadIdx.x == 0)
        scales[blockIdx.x] = scale;
    uint8_t *o = out + blockIdx.x * cols;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
        o[c] = cast(__fdiv_rn(toFloat(row[c]), scale), e5m2);
}

template <typename T> __global__ void quantizeWithScale(const T *x, int64_t n, bool e5m2, const float *scale, uint8_t *out)
{
    const float s = scale[0];
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = cast(__fdiv_rn(toFloat(x[i]), s), e5m2);
}

} // namespace

void float8QuantizeRows(const void *x, Dtype type, int64_t rows, int64_t cols, bool e5m2, uint8_t *out, float *scales, void *stream)
{
    if (rows == 0)
        return;
    auto s = static_cast<cudaStream_t>(stream);
    if (type == Dtype::Float32)
        quantizeRows<float><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(static_cast<const float *>(x), cols, e5m2, out, scales);
    else if (type == Dtype::BFloat16)
        quantizeRows<__nv_bfloat16><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(static_cast<const __nv_bfloat16 *>(x), cols, e5m2, out, scales);
    else
        throw std::invalid_argument("float8QuantizeRows: fp32 or bf16 input");
    check(cudaGetLastError(), "float8 row cast kernel");
}

void float8QuantizeWithScale(const void *x, Dtype type, int64_t n, bool e5m2, const float *scale, uint8_t *out, void *stream)
{
    if (n == 0)
        return;
    auto s = static_cast<cudaStream_t>(stream);
    const unsigned blocks = elementwiseBlocks(n);
    if (type == Dtype::Float32)
        quantizeWithScale<float><<<blocks, kThreads, 0, s>>>(static_cast<const float *>(x), n, e5m2, scale, out);
    else if (type == Dtype::BFloat16)
        quantizeWithScale<__nv_bfloat16><<<blocks, kThreads, 0, s>>>(static_cast<const __nv_bfloat16 *>(x), n, e5m2, scale, out);
    else
        throw std::invalid_argument("float8QuantizeWithScale: fp32 or bf16 input");
    check(cudaGetLastError(), "float8 cast kernel");
}

} // namespace pb::kernels
