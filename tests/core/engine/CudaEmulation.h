#pragma once
// Runs the kernels' .cu files on the host, for CI, which has no GPU (included before them, in a test
// compiled by the host compiler): a block's CUDA threads as fibers (ucontext) on the calling host
// thread, each run until it waits at a barrier, the blocks one after another; __syncthreads a
// barrier of the block's threads, a warp shuffle an exchange between the warp's 32 threads; static
// __shared__ arrays are function statics (one block runs at a time) and dynamic shared memory one
// buffer per block filled with NaN (a read of an element no thread wrote shows); launches through
// PB_LAUNCH (kernels/KernelSupport.cuh). bf16 and fp16 are converted with round-to-nearest-even as
// the card's intrinsics. It checks a kernel's indexing, ownership, synchronisation and arithmetic;
// not its speed, nor the card's rounding where nvcc contracts a * b + c into one fma or uses the
// fast __expf. The threads run in index order between barriers, so a missing __syncthreads shows
// where a thread reads what a higher-numbered one writes (it reads NaN or stale data), not the
// other way round.
#define PB_CUDA_EMULATION 1

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <ucontext.h>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace pb::emu {

// What a CUDA thread reads as its own; the scheduler sets them before it resumes each thread.
inline thread_local dim3 threadIndex {0, 0, 0}, blockIndex {0, 0, 0}, blockDimension, gridDimension;
inline thread_local float *sharedMemory = nullptr;

class Barrier;

// A CUDA thread of the running block: its context, and the barrier generation it waits to pass.
struct Fiber {
    ucontext_t context {};
    std::unique_ptr<char[]> stack;
    bool done = false;
    const Barrier *waitingOn = nullptr;
    unsigned waitGeneration = 0;
};
inline thread_local ucontext_t *schedulerContext = nullptr;
inline thread_local Fiber *currentFiber = nullptr;
inline thread_local const std::function<void()> *fiberBody = nullptr;

// swapcontext returns twice (as setjmp): called apart, so the scheduler's locals stay in its frame.
[[gnu::noinline]] inline void switchTo(ucontext_t *from, ucontext_t *to) { swapcontext(from, to); }

// Threads arriving wait (hand the host thread back to the scheduler) until the last one arrives.
class Barrier {
public:
    explicit Barrier(unsigned count) : m_count(count) {}
    void arriveAndWait()
    {
        const unsigned generation = m_generation;
        if (++m_arrived == m_count) {
            m_arrived = 0;
            ++m_generation;
            return;
        }
        currentFiber->waitingOn = this;
        currentFiber->waitGeneration = generation;
        switchTo(&currentFiber->context, schedulerContext);
    }
    bool passed(unsigned generation) const { return m_generation != generation; }

private:
    unsigned m_count, m_arrived = 0, m_generation = 0;
};
inline thread_local Barrier *blockBarrier = nullptr;
inline thread_local Barrier *warpBarrier = nullptr;
inline thread_local std::vector<uint64_t> *warpSlots = nullptr;   // one per thread of the block

template <typename T> T shuffleXor(T v, int laneMask)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffled value fits 8 bytes");
    const unsigned t = threadIndex.x, base = t / 32 * 32;
    std::memcpy(&(*warpSlots)[t], &v, sizeof(T));
    warpBarrier->arriveAndWait();
    T out;
    std::memcpy(&out, &(*warpSlots)[base + ((t % 32) ^ static_cast<unsigned>(laneMask))], sizeof(T));
    warpBarrier->arriveAndWait();   // nobody overwrites a slot before every lane has read
    return out;
}

inline std::mutex &atomicMutex()
{
    static std::mutex m;
    return m;
}

inline void fiberEntry()
{
    (*fiberBody)();
    currentFiber->done = true; // then uc_link returns to the scheduler
}

// A fiber at the start of fiberEntry on its own stack, returning to `scheduler` when it ends
// (getcontext, too, returns twice).
[[gnu::noinline]] inline void startFiber(Fiber &f, size_t stackBytes, ucontext_t *scheduler)
{
    f.done = false;
    f.waitingOn = nullptr;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = stackBytes;
    f.context.uc_link = scheduler;
    makecontext(&f.context, fiberEntry, 0);
}

// A block's CUDA threads as fibers on the calling host thread, each run until it waits at a barrier
// or ends, in turn (a host thread per CUDA thread of each block made a capped softmax test row of
// 2,056 blocks take 197 s, its time in thread creation and handoffs; 11 s this way). Threads that can never pass their barrier (one ended before a
// __syncthreads the others reached) stop the test with a message instead of hanging.
template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, size_t sharedBytes, Kernel kernel, Args... args)
{
    constexpr size_t kStackBytes = 256 * 1024;
    const unsigned threads = block.x * block.y * block.z;
    std::vector<Fiber> fibers(threads);
    for (auto &f : fibers)
        f.stack.reset(new char[kStackBytes]);
    ucontext_t scheduler {};
    const std::function<void()> body = [&] { kernel(args...); };
    schedulerContext = &scheduler;
    fiberBody = &body;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            std::vector<float> shared(sharedBytes / sizeof(float) + 1, std::numeric_limits<float>::quiet_NaN());
            std::vector<uint64_t> slots(threads);
            Barrier barrier(threads);
            std::vector<std::unique_ptr<Barrier>> warps;
            for (unsigned w = 0; w < (threads + 31) / 32; ++w)
                warps.push_back(std::make_unique<Barrier>(std::min(32u, threads - 32 * w)));
            for (auto &f : fibers)
                startFiber(f, kStackBytes, &scheduler);
            unsigned remaining = threads;
            while (remaining > 0) {
                bool ran = false;
                for (unsigned t = 0; t < threads; ++t) {
                    Fiber &f = fibers[t];
                    if (f.done || (f.waitingOn && !f.waitingOn->passed(f.waitGeneration)))
                        continue;
                    f.waitingOn = nullptr;
                    threadIndex = {t, 0, 0};
                    blockIndex = {bx, by, 0};
                    blockDimension = {block.x, 1, 1};
                    gridDimension = grid;
                    sharedMemory = shared.data();
                    blockBarrier = &barrier;
                    warpBarrier = warps[t / 32].get();
                    warpSlots = &slots;
                    currentFiber = &f;
                    switchTo(&scheduler, &f.context);
                    ran = true;
                    remaining -= f.done ? 1 : 0;
                }
                if (!ran) {
                    std::fprintf(stderr, "CudaEmulation: block (%u, %u): %u threads wait at a barrier that the others ended without reaching\n", bx, by, remaining);
                    std::abort();
                }
            }
        }
}

// PB_LAUNCH(grid, block, shared, stream, kernel)(arguments...)
template <typename Kernel> struct Launcher {
    dim3 grid, block;
    size_t shared;
    Kernel kernel;
    template <typename... Args> void operator()(Args &&...args) const { launch(grid, block, shared, kernel, args...); }
};
template <typename Kernel> Launcher<Kernel> launcher(dim3 grid, dim3 block, size_t shared, Kernel kernel) { return {grid, block, shared, kernel}; }

} // namespace pb::emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __constant__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() ::pb::emu::blockBarrier->arriveAndWait()
#define __shfl_xor_sync(mask, value, laneMask, ...) ::pb::emu::shuffleXor(value, laneMask)
#define threadIdx ::pb::emu::threadIndex
#define blockIdx ::pb::emu::blockIndex
#define blockDim ::pb::emu::blockDimension
#define gridDim ::pb::emu::gridDimension
#define PB_DYNAMIC_SHARED(name) float *name = ::pb::emu::sharedMemory
// The kernel is called through a generic lambda, so its template arguments are deduced from the
// call's as nvcc deduces them from kernel<<<...>>>(arguments).
#define PB_LAUNCH(grid, block, shared, stream, ...)                                                                                                  \
    (static_cast<void>(stream), ::pb::emu::launcher(dim3(grid), dim3(block), static_cast<size_t>(shared), [&](const auto &...emuArgs) { __VA_ARGS__(emuArgs...); }))

// The runtime calls the kernels' host code makes.
using cudaStream_t = void *;
enum cudaError_t { cudaSuccess = 0 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount, cudaDevAttrMaxSharedMemoryPerBlockOptin };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t) { return "no error"; }
inline cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}
// An H200's figures.
inline cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute, int)
{
    *value = attribute == cudaDevAttrMultiProcessorCount ? 132 : 227 * 1024;
    return cudaSuccess;
}
template <typename F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t)
{
    std::memset(p, value, bytes);
    return cudaSuccess;
}

template <typename T> cudaError_t cudaMemcpyToSymbol(T &symbol, const void *source, size_t bytes, size_t offset = 0)
{
    std::memcpy(reinterpret_cast<char *>(&symbol) + offset, source, bytes);
    return cudaSuccess;
}

inline float atomicAdd(float *address, float value)
{
    std::lock_guard<std::mutex> lock(pb::emu::atomicMutex());
    const float old = *address;
    *address = old + value;
    return old;
}

// Vector types and math intrinsics.
struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline int __float_as_int(float f)
{
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}
inline float __uint_as_float(unsigned u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
// Each 16-bit half's unsigned maximum.
inline unsigned __vmaxu2(unsigned a, unsigned b)
{
    return std::max(a & 0xffffu, b & 0xffffu) | (std::max(a >> 16, b >> 16) << 16);
}
inline int atomicMax(int *address, int value)
{
    std::lock_guard<std::mutex> lock(pb::emu::atomicMutex());
    const int old = *address;
    *address = old > value ? old : value;
    return old;
}

// cuda_fp8.h's saturating cast: the nearest e4m3 (3 mantissa bits, exponents -6..8, 448 at most,
// no infinity) or e5m2 (2 bits, -14..15, 57344) value, ties to even, finite values saturated; its
// bits. Written from the formats' definitions, independently of model/Fp8Linear.cpp's rounding.
using __nv_fp8_storage_t = uint8_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float v, __nv_saturation_t, __nv_fp8_interpretation_t format)
{
    const bool e5m2 = format == __NV_E5M2;
    const int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, minExponent = 1 - bias;
    const float largest = e5m2 ? 57344.f : 448.f;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0;
    if (std::isnan(v))
        return static_cast<uint8_t>(sign | (e5m2 ? 0x7f : 0x7f));
    float a = std::fabs(v);
    if (a >= largest) // saturated (infinities too)
        a = largest;
    int exponent = 0;
    std::frexp(a, &exponent);   // a = f * 2^exponent, f in [0.5, 1)
    int e = exponent - 1;
    if (a == 0.f || e < minExponent)
        e = minExponent;
    const float step = std::ldexp(1.f, e - mantissaBits);
    float q = std::nearbyint(a / step) * step;   // the default rounding mode: ties to even
    if (q > largest)
        q = largest;
    if (q == 0.f)
        return sign;
    std::frexp(q, &exponent);
    e = exponent - 1;
    if (e < minExponent) // subnormal: exponent field 0
        return static_cast<uint8_t>(sign | static_cast<int>(q / std::ldexp(1.f, minExponent - mantissaBits)));
    const int mantissa = static_cast<int>((q / std::ldexp(1.f, e) - 1.f) * static_cast<float>(1 << mantissaBits));
    return static_cast<uint8_t>(sign | ((e + bias) << mantissaBits) | mantissa);
}
inline float __fmul_rn(float a, float b) { return a * b; }

// bf16 and fp16 as the card stores them, converted with round-to-nearest-even.
struct __nv_bfloat16 {
    uint16_t x;
};
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
inline float __bfloat162float(__nv_bfloat16 v)
{
    const uint32_t bits = static_cast<uint32_t>(v.x) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline __nv_bfloat16 __float2bfloat16(float f)
{
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN stays a (quiet) NaN
        return {static_cast<uint16_t>((bits >> 16) | 0x40u)};
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return {static_cast<uint16_t>(bits >> 16)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16(a), __float2bfloat16(b)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return {__bfloat162float(v.x), __bfloat162float(v.y)}; }

struct __half {
    uint16_t x;
};
struct __half2 {
    __half x, y;
};
inline float __half2float(__half v)
{
    _Float16 h;
    std::memcpy(&h, &v.x, sizeof h);
    return static_cast<float>(h);
}
inline __half __float2half(float f)
{
    const _Float16 h = static_cast<_Float16>(f);
    __half out;
    std::memcpy(&out.x, &h, sizeof h);
    return out;
}
inline __half2 __floats2half2_rn(float a, float b) { return {__float2half(a), __float2half(b)}; }
inline float2 __half22float2(__half2 v) { return {__half2float(v.x), __half2float(v.y)}; }
