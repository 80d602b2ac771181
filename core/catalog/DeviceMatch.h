#pragma once
// Confirms the installed accelerator against the catalog: the product name alone is not enough
// (an H100 PCIe is not an H100 SXM, a ROCm build may lack a validated stack), so every difference
// that changes a budget or a projection is reported.
#include "catalog/Catalog.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

struct DetectedDevice {
    std::string name;                  // "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"
    int64_t memoryBytes = 0;           // 0: not reported
    std::string computeCapability;     // "9.0", or a ROCm arch such as "gfx942:sramecc+:xnack-"
    std::string driverVersion;         // kernel driver, "580.159.04"; other text is not compared
    std::string runtimeVersion;        // CUDA or ROCm/HIP runtime, "12.4" / "6.2.41133"
    SoftwareStack backend = SoftwareStack::Cuda;
};

enum class MismatchKind { FormFactor, SmallerMemory, ComputeCapability, Backend, UnvalidatedStack, OldDriver };
const char *toString(MismatchKind kind);

struct DeviceMismatch {
    MismatchKind kind = MismatchKind::FormFactor;
    std::string message;               // what differs and why it matters
};

struct DeviceMatch {
    bool matched = false;              // a catalog card was recognised (possibly with mismatches)
    std::string cardId;                // empty when not matched
    std::vector<DeviceMismatch> mismatches;
    std::vector<std::string> unchecked; // facts that could not be compared (not reported, unparsable)
    std::string message;               // one line: "matches h200-sxm-141gb" / "... with 2 mismatches" / why none
    bool clean() const { return matched && mismatches.empty(); }
    bool has(MismatchKind kind) const;
};

// Memory may read this much below the catalog figure before it counts as smaller (the runtime's
// total is ~0.5 % below nvidia-smi's on an H200).
constexpr double kMemoryMatchTolerance = 0.02;

// The card whose name pattern matches; among several, the one with the fewest mismatches.
DeviceMatch matchDevice(const DetectedDevice &device, const Catalog &catalog);

// Compares dotted versions numerically ("12.10" > "12.9"); leading non-digits are not allowed.
// Returns <0, 0, >0; nullopt when either is not a dotted number.
std::optional<int> compareVersions(const std::string &a, const std::string &b);

} // namespace pb
