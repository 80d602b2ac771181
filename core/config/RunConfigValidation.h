#pragma once
#include "config/RunConfig.h"

#include <string>
#include <vector>

namespace pb {

// The most decoder layers a config may have (model.layers; an import refuses more before it builds
// per-layer lists).
inline constexpr int64_t kMaxModelLayers = 10000;

struct ValidationIssue {
    std::string field;   // JSON path, e.g. "model.kv_heads"
    std::string message; // the rule that was broken, in words a user can act on
};

// Every rule the config breaks (empty: valid). Never throws, never clamps.
std::vector<ValidationIssue> validateRunConfig(const RunConfig &config);
// Throws InvalidInputError for the first issue found.
void requireValid(const RunConfig &config);

} // namespace pb
