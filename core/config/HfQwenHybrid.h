#pragma once
// Qwen's hybrid linear-attention text models from their config.json: qwen3_next (Qwen3-Next),
// qwen3_5_text and qwen3_5_moe_text (the text_config of a qwen3_5 / qwen3_5_moe config; the vision
// tower is not piloted). Gated DeltaNet layers with gated full attention every
// full_attention_interval-th layer (or where layer_types says), partial rotary, per-head q/k norm
// and the zero-centred (1 + weight) RMSNorm computed in fp32; Qwen2-MoE's sparse block with its
// gated shared expert (qwen3_next, qwen3_5_moe) or a dense SwiGLU MLP (qwen3_5). Absent keys take
// the defaults of the type's Transformers config class (Qwen3NextConfig, Qwen3_5TextConfig,
// Qwen3_5MoeTextConfig).
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

bool isQwenHybridType(const std::string &type);
ModelShape hfQwenHybridShape(const QJsonObject &json, const std::string &where);

} // namespace pb
