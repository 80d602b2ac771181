#pragma once
// Memory a backend takes outside the tensors the estimator counts: the CUDA/ROCm context, the
// cuBLAS/cuDNN/hipBLAS handles and their workspaces. Stored in one place, each with where the
// figure came from and whether it was measured on this project's stack, so a calibration run can
// replace it (see Calibration.h).
#include <cstdint>
#include <string>

namespace pb {

struct FrameworkOverhead {
    std::string backend;             // "cpu", "cuda", "rocm"
    int64_t contextBytes = 0;        // context + library handles: device used minus allocator reserve
    int64_t blasWorkspaceBytes = 0;  // GEMM workspace outside the allocator's count
    int64_t allocatorBlasBytes = 0;  // GEMM workspaces the caching allocator holds (in its allocated bytes)
    double fragmentationFraction = 0;// reserved / allocated - 1 of the caching allocator
    bool measuredHere = false;       // false: a published/typical figure that must be calibrated
    std::string source;
};

// Throws InvalidInputError("backend", ...) for an unknown backend.
const FrameworkOverhead &frameworkOverhead(const std::string &backend);

} // namespace pb
