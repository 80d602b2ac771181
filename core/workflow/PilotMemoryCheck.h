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

} // namespace pb
