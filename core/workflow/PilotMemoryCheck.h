#pragma once
// Before a pilot starts: its estimated peak beside what the device offers, so a run that cannot fit
// is named before it allocates until the device (or, on CPU, the host) refuses. The GUI asks, the
// CLI warns. No torch in this header.
#include "config/RunConfig.h"
#include "engine/PilotEngine.h"

#include <cstdint>
#include <optional>

namespace pb {

struct PilotMemoryCheck {
    std::optional<int64_t> estimateBytes; // the whole run's tensor peak; unset where the estimator refuses the shape
    int64_t capacityBytes = 0;            // a CUDA device's total, the host's available memory, or --memory-limit; 0: unknown
    bool fromMemoryLimit = false;         // capacityBytes is options.memoryLimitBytes (CPU)
    bool exceeds() const { return estimateBytes && capacityBytes > 0 && *estimateBytes > capacityBytes; }
};

PilotMemoryCheck checkPilotMemory(const RunConfig &config, const PilotOptions &options);

// A CPU pilot without a memory limit keeps its tensors within 75% (kCpuPilotHostMemoryPercent) of
// the memory the host had available when it started: past that, Linux pages the machine to a crawl long before it refuses an
// allocation, and a run that cannot fit froze the desktop for minutes (a 28 GiB qwen3-next pilot on a
// 23 GiB host, killed by the OOM killer after 150 s). The quarter is for what the tensor count does
// not see: BLAS and oneDNN scratch, the process's code, glibc's freed blocks; that run reached 2 GiB
// of them beside a tracked budget of 90%.
void keepToHostMemory(PilotOptions &options, const PilotMemoryCheck &check);

} // namespace pb
