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
        // The cards of 2026 (the catalog's entries; its spec_source names each datasheet).
        {"b200-sxm-180gb", "NVIDIA B200 SXM 180GB", "cuda", 183359 * kMiB, 2250.0, 7.7e12,
         "nvidia-smi total 183359 MiB (a public TensorRT-LLM log); NVIDIA HGX B200 datasheet (2250 TFLOP/s BF16 dense, 7.7 TB/s)"},
        {"h200-nvl-141gb", "NVIDIA H200 NVL 141GB", "cuda", 143771 * kMiB, 835.5, 4.8e12,
         "nvidia-smi total 143771 MiB; NVIDIA H200 NVL datasheet (835.5 TFLOP/s BF16 dense, 4.8 TB/s)"},
        {"mi325x-256gb", "AMD Instinct MI325X 256GB", "rocm", (256 * 1024 - 16) * kMiB, 1307.4, 6.0e12,
         "256 GiB less the 16 MiB an MI300X's driver keeps (assumed; no rocm-smi total found); AMD MI325X data sheet (1307.4 TFLOP/s BF16 dense, 6 TB/s)"},
        {"mi355x-288gb", "AMD Instinct MI355X 288GB", "rocm", (288 * 1024 - 16) * kMiB, 2516.6, 8.0e12,
         "288 GiB less the 16 MiB an MI300X's driver keeps (assumed; no rocm-smi total found); AMD MI355X data sheet (2516.6 TFLOP/s BF16 dense, 8 TB/s)"},
        {"l40s-48gb", "NVIDIA L40S 48GB", "cuda", 46068 * kMiB, 362.05, 0.864e12,
         "nvidia-smi total 46068 MiB (ECC on); NVIDIA L40S datasheet (362 TFLOP/s BF16 dense, 864 GB/s)"},
        {"rtx-pro-6000-96gb", "NVIDIA RTX PRO 6000 Server 96GB", "cuda", 97887 * kMiB, 500.0, 1.597e12,
         "nvidia-smi total 97887 MiB; NVIDIA RTX PRO 6000 Server Edition product page (500 TFLOP/s BF16 dense, derived; 1597 GB/s)"},
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
