#include "engine/DevicePeak.h"

#include "catalog/Catalog.h"
#include "catalog/DeviceMatch.h"
#include "engine/Environment.h"

#include <spdlog/spdlog.h>

namespace pb {

std::optional<double> catalogPeakFlops(const std::string &device)
{
    if (device.rfind("cuda", 0) != 0 || !cudaAvailable())
        return std::nullopt;
    try {
        const Environment env = captureEnvironment(device);
        DetectedDevice detected;
        detected.name = env.deviceName;
        detected.memoryBytes = env.deviceMemoryBytes;
        detected.computeCapability = env.computeCapability;
        detected.runtimeVersion = env.cudaRuntime;
        const Catalog catalog = builtInCatalog();
        const DeviceMatch match = matchDevice(detected, catalog);
        spdlog::info("device check: {}", match.message);
        for (const auto &m : match.mismatches)
            spdlog::warn("device mismatch: {}", m.message);
        if (!match.matched)
            return std::nullopt;
        return catalog.card(match.cardId).bf16DenseTflops * 1e12;
    } catch (const std::exception &e) {
        spdlog::warn("device check failed, MFU left unknown: {}", e.what());
        return std::nullopt;
    }
}

} // namespace pb
