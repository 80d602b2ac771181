#include "estimate/CardCapacities.h"

#include "util/Errors.h"

namespace pb {
namespace {

constexpr int64_t kMiB = 1024LL * 1024;

} // namespace

const std::vector<CardCapacity> &cardCapacities()
{
    // Memory: the "total" that nvidia-smi / rocm-smi print for the card (MiB), which is what the
    // allocator can ever see. TFLOP/s: dense BF16 from the vendors' data sheets (A100: 312;
    // H100 SXM and H200: 989.4, the sparsity figure halved; MI300X: 1307.4). Bandwidth: data sheets.
    static const std::vector<CardCapacity> cards {
        {"a100-sxm-80gb", "NVIDIA A100 SXM 80GB", "cuda", 81920 * kMiB, 312.0, 2.039e12,
         "nvidia-smi total 81920 MiB; NVIDIA A100 data sheet (312 TFLOP/s BF16 dense, 2039 GB/s; no FP8)", false},
        {"h100-sxm-80gb", "NVIDIA H100 SXM 80GB", "cuda", 81559 * kMiB, 989.0, 3.35e12,
         "nvidia-smi total 81559 MiB; NVIDIA H100 data sheet (989 TFLOP/s BF16 dense, 3.35 TB/s)"},
        {"h200-141gb", "NVIDIA H200 141GB", "cuda", 143771 * kMiB, 989.0, 4.8e12,
         "nvidia-smi total 143771 MiB; NVIDIA H200 data sheet (989 TFLOP/s BF16 dense, 4.8 TB/s)"},
        {"mi300x-192gb", "AMD Instinct MI300X 192GB", "rocm", 196592 * kMiB, 1307.0, 5.3e12,
         "rocm-smi total 196592 MiB (192 GiB less the driver's reserve); AMD MI300X data sheet (1307 TFLOP/s BF16 dense, 5.3 TB/s)"},
    };
    return cards;
}

const CardCapacity &cardCapacity(const std::string &id)
{
    std::string known;
    for (const auto &card : cardCapacities()) {
        if (card.id == id)
            return card;
        known += (known.empty() ? "" : ", ") + card.id;
    }
    throw InvalidInputError("--card", "unknown card '" + id + "' (known: " + known + ")");
}

} // namespace pb
