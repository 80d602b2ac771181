#pragma once
// Gemma 4's text model from its config.json (model_type gemma4_text, or the text_config of a gemma4
// config): sliding layers of head_dim and global ones of their own head width, key/value heads and
// proportional rotary, values from k_proj where attention_k_eq_v says so, a weightless value norm,
// q/k norms, four norms per layer in fp32 without Gemma 2/3's unit offset, attention unscaled, the
// layer scalar, and the final soft-cap. Absent keys take Gemma4TextConfig's defaults (Transformers
// 5.17). What it has and PilotBench does not model yet (per-layer input embeddings, key/value
// states shared across layers, the 26B-A4B's experts) is refused by name.
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

ModelShape hfGemma4TextShape(const QJsonObject &json, const std::string &where);

} // namespace pb
