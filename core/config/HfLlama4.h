#pragma once
// Llama 4's text model from its config.json (model_type llama4_text, or the text_config of a llama4
// config): sparse layers of top-1 sigmoid routing that scales the expert's input plus a shared
// expert, interleaved with dense ones; chunked attention on the rotary layers, full attention
// without rotary on every fourth, Llama4TextL2Norm on q and k, the query temperature on the NoPE
// layers. Absent keys take Llama4TextConfig's defaults (Transformers 5.17).
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

ModelShape hfLlama4TextShape(const QJsonObject &json, const std::string &where);

} // namespace pb
