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
// The global layers among sliding ones, the last layer named where model.last_layer_global adds it.
std::string describeGlobalLayers(const ModelShape &m);
// A hybrid's layers by kind: "36 Gated DeltaNet layers of 48 (full attention on every 4th layer)";
// empty for a model without linear attention.
std::string describeLinearLayers(const ModelShape &model);
// The model in one line, for `compare` and the report: family, its layers by attention kind, its
// experts, and its parameters (active per token with experts, trainable where fewer train):
// "qwen3_next: 36 Gated DeltaNet layers of 48 (full attention on every 4th layer); 512 experts,
// 10 per token, and a shared expert; 79,674,391,296 parameters, 3,874,929,408 active per token".
std::string describeModelSummary(const RunConfig &config);

} // namespace pb
