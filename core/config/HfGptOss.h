#pragma once
// gpt-oss from its config.json (model_type gpt_oss): attention with a learned sink per head and q/k/v/o
// biases, alternating sliding (window 128) and full layers, YaRN rotary; every layer sparse, its
// router biased, top-k of the logits then a softmax over the k; experts stored stacked with biases
// and gpt-oss's clamped SwiGLU. Absent keys take GptOssConfig's defaults (Transformers 5.17).
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

ModelShape hfGptOssShape(const QJsonObject &json, const std::string &where);

} // namespace pb
