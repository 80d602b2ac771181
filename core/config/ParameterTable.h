#pragma once
// Every parameter the engine's model creates, by its Hugging Face name, with its shape and whether
// the run trains it. The parameter counts, the estimator and the safetensors loader all read this,
// so they cannot drift apart.
#include "config/RunConfig.h"

#include <string>
#include <vector>

namespace pb {

struct ParameterInfo {
    std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int layer = -1;              // -1: outside the decoder blocks
    bool trainable = true;
    bool isLora = false;
    bool isMatrix = false;       // 2-D weight of a projection (FLOPs, weight decay)
};

std::vector<ParameterInfo> parameterTable(const RunConfig &config);
// True when `projection` (q_proj, ..., down_proj) gets a LoRA adapter under this config.
bool loraTargets(const RunConfig &config, const std::string &projection);

} // namespace pb
