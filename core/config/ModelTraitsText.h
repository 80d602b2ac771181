#pragma once
// The model's traits in words, one (label, text) pair per group that differs from Llama's: what
// `config show`, the report and the GUI's config form print.
#include "config/RunConfig.h"

#include <string>
#include <utility>
#include <vector>

namespace pb {

std::vector<std::pair<std::string, std::string>> describeModelTraits(const ModelShape &model);
// "every 6th layer", "layers 0, 3", "every 4th layer and layer 1".
std::string describeLayerSelection(const LayerSelection &selection);

} // namespace pb
