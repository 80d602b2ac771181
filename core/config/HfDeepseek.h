#pragma once
// DeepSeek-V3-architecture config.json files (model_type deepseek_v3, and kimi_k2, whose remote
// config class is DeepSeek-V3's): multi-head latent attention, sigmoid group-limited routing with
// the correction bias, shared experts and the first dense layers. Absent keys take the defaults of
// Transformers' DeepseekV3Config; kimi_k2, which Transformers has no class for, must give them all.
// glm4_moe (GLM-4.5, GLM-4.5-Air, GLM-4.6): the same routing, shared experts and first dense layers
// (Transformers' Glm4MoeMoE is DeepseekV3MoE), with grouped-query attention in place of the latent
// one: partial rotary on the first dims of each head (rotate_half, not interleaved), q/k/v biases
// under attention_bias, the per-head q/k RMSNorm under use_qk_norm. Absent keys take Glm4MoeConfig's
// defaults. Its multi-token-prediction layers (num_nextn_predict_layers, stored as the layers after
// num_hidden_layers) are not built, as Glm4MoeForCausalLM does not build them.
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

bool isDeepseekV3Type(const std::string &type);
bool isGlm4MoeType(const std::string &type);
// Sets the latent attention, the routing and the fields whose defaults differ from Llama's of `m`,
// whose plain fields (sizes, rope, norm eps, activation) are already read.
void applyDeepseekV3(const QJsonObject &json, const std::string &where, const std::string &type, ModelShape &m);
// Likewise for glm4_moe: its attention's traits, the routing, and the fields whose Glm4MoeConfig
// defaults differ from Llama's (num_key_value_heads 8, rms_norm_eps 1e-5, partial_rotary_factor 0.5).
void applyGlm4Moe(const QJsonObject &json, const std::string &where, ModelShape &m);
// The LoRA targets of a model's attention and MLP as its checkpoints name them (q_proj or q_a_proj and
// q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj): what an import sets for latent attention,
// where Llama's q_proj, k_proj, v_proj would name nothing.
std::vector<std::string> latentLoraTargets(const ModelShape &m);

} // namespace pb
