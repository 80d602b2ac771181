#pragma once
// The dense families beyond Llama, each a set of ModelTraits read from its config.json: Qwen3,
// Gemma 2, Gemma 3 (text), OLMo 2, OLMo 3, Phi-3 (Phi-3.x, Phi-4), GLM-4, SmolLM3, Granite,
// Ministral 3. Absent keys take the defaults of the type's Transformers config class.
#include "config/RunConfig.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace pb {

const std::vector<std::string> &hfDenseTraitTypes();
// Sets the traits (and the fields whose defaults differ by family: head_dim, rope, norm eps, tied
// embeddings, biases) of `m`, whose plain Llama fields are already read.
void applyDenseFamily(const QJsonObject &json, const std::string &where, const std::string &type, ModelShape &m);
// Reads `layer_types` (full_attention / sliding_attention per layer) into the window's global
// layers: a period where the list has one, else the list of full layers. False when the key is absent.
bool readLayerTypes(const QJsonObject &json, const std::string &where, ModelShape &m);
// layer_types of full_attention / sliding_attention as true (full) / false per layer, checked
// against `layers`; nullopt where the key is absent or null.
std::optional<std::vector<bool>> hfFullLayers(const QJsonObject &json, const std::string &where, int64_t layers);
// The layers flagged in `picked` as a selection: a period where one describes them, else a list.
LayerSelection hfLayerSelection(const std::vector<bool> &picked);

} // namespace pb
