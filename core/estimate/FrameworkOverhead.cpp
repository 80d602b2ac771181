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
        {"cpu", 0, 0, 0, 0.0, true, "no device context; the CPU allocator frees to the system"},
        // Context and handles: measured on this project's stack. LibTorch 2.x takes the cuBLAS and
        // cuBLASLt workspaces (32 MiB each on Hopper, CUBLAS_WORKSPACE_CONFIG :4096:8) from the
        // caching allocator: the peak recorder found 64 MiB resident before every step on an H200,
        // LibTorch 2.11. The fragmentation share (3-10 % for a transformer step) is a typical figure.
        {"cuda", 760 * kMiB, 0, 64 * kMiB, 0.05, true,
         "measured on an NVIDIA H200, LibTorch 2.11.0, CUDA 13.0, driver 580.159.04: peak device used minus peak reserved "
         "was 750.8-770.8 MiB over 10 pilots (760 MiB taken)"},
        // ROCm 6 on MI300X: HIP context and hipBLASLt handles are of the same order; no measured
        // figure yet.
        {"rocm", 640 * kMiB, 32 * kMiB, 0, 0.05, false,
         "typical ROCm 6 / LibTorch 2.x figure on MI300X (HIP context + hipBLAS handles); calibrate with a pilot"},
    }};
    for (const auto &entry : table)
        if (entry.backend == backend)
            return entry;
    throw InvalidInputError("backend", "unknown backend '" + backend + "' (known: cpu, cuda, rocm)");
}

} // namespace pb
