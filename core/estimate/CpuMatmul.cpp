#include "estimate/CpuMatmul.h"

namespace pb {

bool cpuBf16MatmulHoldsFp32Accumulator()
{
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    // The processor's own answer (cpuid), as cpuinfo gives ATen: no torch outside the engine.
    static const bool avx512 = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512;
#else
    return false; // (ARM's bf16 path in later LibTorch releases is not modelled)
#endif
}

} // namespace pb
