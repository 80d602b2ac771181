#include "workflow/PilotMemoryCheck.h"

#include "engine/Environment.h"
#include "engine/MemoryProbe.h"
#include "estimate/MemoryEstimator.h"

#include <exception>

namespace pb {

PilotMemoryCheck checkPilotMemory(const RunConfig &config, const PilotOptions &options)
{
    PilotMemoryCheck check;
    const bool cpu = options.device == "cpu";
    try {
        EstimateOptions e;
        e.device = cpu ? DeviceKind::Cpu : DeviceKind::Cuda;
        check.estimateBytes = estimatePeakAllocatedBytes(config, e, config.train.microBatch);
    } catch (const std::exception &) {
        return check; // a shape the estimator refuses still runs; the engine reports what it meets
    }
    check.capacityBytes = deviceMemoryForPilot(options.device);
    if (cpu && options.memoryLimitBytes > 0 && (check.capacityBytes <= 0 || options.memoryLimitBytes < check.capacityBytes)) {
        check.capacityBytes = options.memoryLimitBytes;
        check.fromMemoryLimit = true;
    }
    return check;
}

void keepToHostMemory(PilotOptions &options, const PilotMemoryCheck &check)
{
    if (options.device == "cpu" && options.memoryLimitBytes <= 0 && check.capacityBytes > 0)
        options.memoryLimitBytes = check.capacityBytes / 100 * kCpuPilotHostMemoryPercent;
}

} // namespace pb
