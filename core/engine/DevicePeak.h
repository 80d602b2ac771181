#pragma once
// The dense BF16 peak FLOP/s of a CUDA device, taken from the catalog entry the detected device
// matches, for model FLOPs utilisation. No torch here.
#include <optional>
#include <string>

namespace pb {

// nullopt on CPU, for a card the catalog does not recognise, or when detection fails: MFU is then
// reported as unknown rather than guessed. Mismatches (PCIe/NVL parts, smaller memory) are logged.
std::optional<double> catalogPeakFlops(const std::string &device);

} // namespace pb
