#pragma once
// One accelerator of the catalog: datasheet figures, the software stack it is validated with, the
// patterns that recognise it in a detected device name, and its modelled prices. Plain data; the
// catalog file format and its validation live in CatalogJson.h.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class SoftwareStack { Cuda, Rocm };
const char *toString(SoftwareStack stack);

// A device name pattern that means "this is another form of the card" (PCIe, NVL instead of SXM).
struct VariantPattern {
    std::string pattern;               // regular expression, case-insensitive
    std::string meaning;               // what the variant changes, shown with the mismatch
};

// Where a card's modelled prices come from: the public reference they were modelled on, and the
// date that reference was read (the "price as of" shown beside the figures).
struct PriceSource {
    std::string text;                  // "Lambda on demand, 1x B200: $6.99 per GPU-hour; modelled at ..."
    std::string asOf;                  // YYYY-MM-DD
    std::string url;                   // "" when the reference has no page
};

// Per-GPU-hour prices of one term (or on demand) by card count.
struct TermPrice {
    std::string termId;                // catalog term id ("1w", "1m", "3m") or "on_demand"
    std::map<int, double> perGpuHourByGpus;
};

struct CardSpec {
    std::string id;                    // "h100-sxm-80gb"
    std::string name;                  // "NVIDIA H100 SXM 80GB"
    std::string vendor;
    std::string formFactor;            // "SXM5", "OAM"
    double memoryGb = 0;               // marketing figure
    int64_t memoryBytes = 0;           // visible to software (nvidia-smi / amd-smi total)
    std::string memoryBytesBasis;      // how memoryBytes was obtained
    double memoryBandwidthTbps = 0;    // TB/s (1e12 bytes/s)
    double bf16DenseTflops = 0;        // dense, no sparsity
    std::optional<double> fp8DenseTflops; // unset: no FP8 tensor cores
    std::optional<double> fp4DenseTflops; // unset: no FP4 tensor cores
    std::string specSource;            // the datasheet the figures come from ("" not stated)
    std::string interconnect;
    double interconnectGBps = 0;       // GB/s per GPU, as the datasheet states it
    double powerW = 0;
    SoftwareStack stack = SoftwareStack::Cuda;
    std::string minRuntimeVersion;     // lowest validated CUDA / ROCm version
    std::string minDriverVersion;      // lowest validated kernel driver version
    std::string computeCapability;     // "9.0" (CUDA) or "gfx942" (ROCm)
    std::vector<std::string> namePatterns;   // regular expressions, case-insensitive
    std::vector<VariantPattern> variantPatterns;
    TermPrice onDemand;                // termId "on_demand"
    std::vector<TermPrice> terms;      // in the catalog's term order
    std::optional<PriceSource> priceSource; // unset: a catalog that does not say (older files)

    // Per-GPU-hour price; throws InvalidInputError when the term or the card count is not priced.
    double onDemandPerGpuHour(int gpus) const;
    double termPerGpuHour(const std::string &termId, int gpus) const;
};

// A fixed-term length as the catalog defines it.
struct TermSpec {
    std::string id;                    // "1w"
    std::string label;                 // "1 week"
    double hours = 0;                  // 168
};

struct CatalogOptions {
    double storagePerTbMonth = 0;
    double egressPerTb = 0;
    double supportPerMonth = 0;
    double hoursPerMonth = 730;        // how a "month" of storage and support is counted
};

} // namespace pb
