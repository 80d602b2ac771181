#pragma once
// Internal to the engine (includes torch): DeepSeek-V3's multi-head latent attention (MLA), as
// Transformers' DeepseekV3Attention computes it. Queries come from q_proj, or through a low-rank
// latent (q_a_proj, its RMSNorm q_a_layernorm, q_b_proj); keys and values from one latent per token
// (kv_a_proj_with_mqa, whose last qk_rope_head_dim columns are a rotary key shared by every head;
// kv_a_layernorm; kv_b_proj up to each head's non-rotary key and value). A head's query and key are
// qk_nope_head_dim + qk_rope_head_dim wide, its value v_head_dim; the softmax scale is
// qk_head_dim^-0.5, times YaRN's mscale(factor, mscale_all_dim)^2 where the rope scaling gives it.
#include "model/Transformer.h"

namespace pb {

class LatentSelfAttentionImpl : public BlockAttention {
public:
    LatentSelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options);
    // x [B, T, hidden]; in.cos, in.sin [T, qk_rope_head_dim] (fp32).
    torch::Tensor forward(const torch::Tensor &x, const LayerInputs &in) override;
    double scale() const { return m_scale; }

    LoraLinear q {nullptr};                  // q_lora_rank 0
    LoraLinear qA {nullptr}, qB {nullptr};   // q_lora_rank > 0
    RmsNorm qANorm {nullptr};
    LoraLinear kvA {nullptr}, kvB {nullptr}, o {nullptr};
    RmsNorm kvANorm {nullptr};

private:
    torch::Tensor rotate(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) const;
    int64_t m_heads;
    LatentAttention m_shape;
    double m_scale;
    bool m_rescaled;       // a scale other than SDPA's default 1/sqrt(qk_head_dim)
    bool m_fused;          // scaled_dot_product_attention where the build has it
    bool m_fusedRotary;    // train.kernels = fused
    bool m_ropeFp32 = false; // model.rope_fp32: the fp32 tables, the result cast back
};

} // namespace pb
