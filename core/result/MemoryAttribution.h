#pragma once
// Where the bytes were at a training step's peak of allocated memory, as measured: every live
// allocation at the allocator's highest point, grouped by the part of the estimator's breakdown it
// belongs to and by the site (phase, model scope, operator) that allocated it. Plain data, no torch;
// the engine's PeakRecorder fills it, the CLI writes it (--memory-snapshot), the history keeps it
// in the run summary, the report and the GUI draw it beside the estimate.
#include <QJsonObject>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

struct MemoryBreakdown;

// Named as the estimator's breakdown names its parts, so the two bars line up.
enum class MemoryPart { FrozenWeights, TrainableWeights, WeightCasts, Gradients, Optimizer, Activations, Logits, Other };
inline constexpr int kMemoryPartCount = 8;
const char *toString(MemoryPart part);
std::optional<MemoryPart> parseMemoryPart(const std::string &name);

struct MemorySite {
    std::string phase;   // "before" (live when the step began), "forward", "backward", "optimizer"
    std::string scope;   // model scope ("attention", "mlp", "head", ...) or what a resident tensor is
    std::string op;      // the innermost operator that allocated ("" for resident tensors)
    MemoryPart part = MemoryPart::Other;
    int64_t bytes = 0;
    int64_t blocks = 0;
    int64_t layer = -1;  // the decoder layer that made it (a live tensor's); -1: none or a site of many
};

struct MemoryAttribution {
    int64_t step = 0;                   // the optimizer step it was taken in
    std::string device;
    int64_t peakAllocatedBytes = 0;     // the allocator's own counter at the peak
    std::string peakPhase;              // phase of the allocation that reached it
    std::string peakSite;               // "scope / op" of that allocation
    std::array<int64_t, kMemoryPartCount> parts {}; // sums to peakAllocatedBytes; Other takes what no site explains
    std::vector<MemorySite> sites;      // live at the peak, largest first
    // Each tensor made in the step and live at the peak, in the order made (one block each, with its
    // layer): where a site's bytes sit layer by layer. Only the --memory-snapshot file carries it.
    std::vector<MemorySite> live;

    int64_t part(MemoryPart p) const { return parts[static_cast<size_t>(p)]; }
};

// maxSites < 0 keeps every site and the live tensors (the --memory-snapshot file); the run summary
// keeps the largest few sites.
QJsonObject toJson(const MemoryAttribution &attribution, int maxSites = -1);
// Throws InvalidInputError naming the field (prefixed with `where`) that is missing or malformed.
MemoryAttribution memoryAttributionFromJson(const QJsonObject &json, const std::string &where);

// The measured parts folded into the estimator's breakdown fields (weight casts count as trainable
// weights, as the estimator books autocast's copies; "other" as the BLAS workspaces, which is what
// it is on CUDA), for drawing the two side by side.
MemoryBreakdown measuredBreakdown(const MemoryAttribution &attribution);

} // namespace pb
