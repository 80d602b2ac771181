#include "estimate/FrameworkOverhead.h"

#include "util/Errors.h"

#include <array>

namespace pb {
namespace {

constexpr int64_t kMiB = 1024LL * 1024;

} // namespace

const FrameworkOverhead &frameworkOverhead(const std::string &backend)
{
    static const std::array<FrameworkOverhead, 3> table {{
        // CPU: the tensor peak is what the pilot measures; the process's own code and libraries
        // are not tensor memory, and there is no caching allocator on CPU.
        {"cpu", 0, 0, 0.0, true, "no device context; the CPU allocator frees to the system"},
        // CUDA 12 on Hopper: nvidia-smi "used" minus torch.cuda.memory_reserved() right after the
        // first cuBLAS GEMM is about 500-600 MiB (context ~ 400-500 MiB with lazy module loading,
        // cuBLAS/cuBLASLt handles, cuDNN when loaded). cuBLAS takes a 32 MiB workspace per
        // stream/handle on Hopper (CUBLAS_WORKSPACE_CONFIG default :4096:8 = 32 MiB) through the
        // caching allocator. The fragmentation share (reserved/allocated - 1) of a transformer
        // training step under the expandable-segments-off allocator is typically 3-10 %.
        {"cuda", 560 * kMiB, 32 * kMiB, 0.05, false,
         "typical CUDA 12 / LibTorch 2.x figure on Hopper (context + cuBLAS/cuDNN handles); calibrate with a pilot"},
        // ROCm 6 on MI300X: HIP context and hipBLASLt handles are of the same order; no measured
        // figure yet.
        {"rocm", 640 * kMiB, 32 * kMiB, 0.05, false,
         "typical ROCm 6 / LibTorch 2.x figure on MI300X (HIP context + hipBLAS handles); calibrate with a pilot"},
    }};
    for (const auto &entry : table)
        if (entry.backend == backend)
            return entry;
    throw InvalidInputError("backend", "unknown backend '" + backend + "' (known: cpu, cuda, rocm)");
}

} // namespace pb
