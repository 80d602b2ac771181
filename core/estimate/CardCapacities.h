#pragma once
// Capacities of the catalog cards, held here until the catalog module (core/catalog) provides
// CardSpec entries. Memory is the capacity the driver reports as usable (nvidia-smi / rocm-smi
// "total"), not the marketing figure: the marketing "80 GB" of an A100 is 81,920 MiB of which the
// driver shows 81,920 MiB, an H100 SXM shows 81,559 MiB.
#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct CardCapacity {
    std::string id;                  // a100-sxm-80gb, h100-sxm-80gb, h200-141gb, mi300x-192gb
    std::string name;
    std::string backend;             // "cuda" or "rocm": selects the framework overhead figure
    int64_t memoryBytes = 0;         // usable device memory as the driver reports it
    double denseBf16Tflops = 0;      // dense (no sparsity) BF16 tensor peak
    double hbmBytesPerSecond = 0;
    std::string source;              // where the figures come from
    bool float8 = true;              // float8 tensor cores (train.precision = fp8-*): not on an A100
};

const std::vector<CardCapacity> &cardCapacities();
// Throws InvalidInputError("--card", ...) listing the known ids when `id` is unknown.
const CardCapacity &cardCapacity(const std::string &id);

} // namespace pb
