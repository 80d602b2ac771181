#include "model/LatentAttention.h"

#include "config/ParameterTable.h"
#include "engine/TorchCompat.h"
#include "model/FusedOps.h"

#include <cmath>
#include <limits>

namespace pb {
namespace {

// DeepseekV3RMSNorm's default: the latent norms are built without the config's rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

// Transformers' yarn_get_mscale.
double yarnMscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// Transformers' eager_attention_forward without grouped heads: the scores' softmax in fp32, rounded
// back to q's dtype. q, k [B, H, T, Dqk], v [B, H, T, Dv].
torch::Tensor eagerCausalAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale)
{
    auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
    const auto t = q.size(-2);
    const auto hidden = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type()), v);
}

// apply_rotary_pos_emb_interleave's reordering: pairs (2i, 2i+1) laid out as halves (i, i + d/2),
// after which the half rotation turns each pair as the interleaved form would. q and k are both
// reordered, so their products are those of the interleaved rotation.
torch::Tensor interleavedAsHalves(const torch::Tensor &x)
{
    const auto d = x.size(-1);
    return x.unflatten(-1, {d / 2, 2}).transpose(-1, -2).flatten(-2);
}

} // namespace

std::shared_ptr<BlockAttention> makeLatentAttention(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
{
    return std::make_shared<LatentSelfAttentionImpl>(config, runtime, options);
}

LatentSelfAttentionImpl::LatentSelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
    : m_heads(config.model.attentionHeads), m_shape(config.model.latent), m_fused(runtime.fusedAttention)
{
    const ModelShape &m = config.model;
    const bool fusedKernels = config.train.kernels == KernelPath::Fused;
    m_fusedRotary = fusedKernels;
    m_ropeFp32 = m.traits.ropeFp32;
    // DeepseekV3Attention.scaling: qk_head_dim^-0.5, times mscale^2 where the rope scaling gives mscale_all_dim.
    m_scale = 1.0 / std::sqrt(static_cast<double>(m_shape.qkHeadDim()));
    if (m.ropeScaling.type != RopeScalingType::None && m.ropeScaling.mscaleAllDim != 0) {
        const double mscale = yarnMscale(m.ropeScaling.factor, m.ropeScaling.mscaleAllDim);
        m_scale *= mscale * mscale;
    }
    m_rescaled = std::abs(m_scale * std::sqrt(static_cast<double>(m_shape.qkHeadDim())) - 1.0) > 1e-12;
    // Registered in the checkpoint's order of names.
    for (const auto &p : denseProjections(m)) {
        if (!p.attention)
            continue;
        auto layer = register_module(p.name, LoraLinear(p.in, p.out, p.bias, config, p.name, options));
        if (p.name == "q_proj")
            q = layer;
        else if (p.name == "q_a_proj") {
            qA = layer;
            qANorm = register_module("q_a_layernorm", RmsNorm(m_shape.qLoraRank, kLatentNormEps, options, fusedKernels));
        } else if (p.name == "q_b_proj")
            qB = layer;
        else if (p.name == "kv_a_proj_with_mqa") {
            kvA = layer;
            kvANorm = register_module("kv_a_layernorm", RmsNorm(m_shape.kvLoraRank, kLatentNormEps, options, fusedKernels));
        } else if (p.name == "kv_b_proj")
            kvB = layer;
        else
            o = layer;
    }
}

torch::Tensor LatentSelfAttentionImpl::rotate(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) const
{
    // x [B, T, heads, rope]; the tables [T, rope]: fp32 for the fused rotary, else [T, 1, rope] in
    // the hidden stream's dtype (as Transformers casts them) or x's.
    const auto turned = m_shape.ropeInterleave ? interleavedAsHalves(x) : x;
    if (m_fusedRotary)
        return fusedRotary(turned, cos, sin);
    return turned * cos + rotateHalf(turned) * sin;
}

torch::Tensor LatentSelfAttentionImpl::forward(const torch::Tensor &x, const LayerInputs &in)
{
    RECORD_USER_SCOPE("pb.attention");
    const auto b = x.size(0), t = x.size(1);
    const int64_t nope = m_shape.qkNopeHeadDim, rope = m_shape.qkRopeHeadDim, vDim = m_shape.vHeadDim, kvRank = m_shape.kvLoraRank;
    // Queries [B, T, H, qk]: the non-rotary part, then the rotary one.
    const auto queries = (q ? q->forward(x) : qB->forward(qANorm->forward(qA->forward(x)))).view({b, t, m_heads, nope + rope});
    // The key/value latent and the shared rotary key.
    const auto compressed = kvA->forward(x);
    const auto latent = compressed.narrow(-1, 0, kvRank);
    const auto sharedKey = compressed.narrow(-1, kvRank, rope).view({b, t, 1, rope});
    const auto keysValues = kvB->forward(kvANorm->forward(latent)).view({b, t, m_heads, nope + vDim});
    const auto value = keysValues.narrow(-1, nope, vDim);
    // One cast of the tables for q and k (the fused rotary reads the fp32 ones). Transformers casts
    // them to the hidden stream's dtype, so over fp32 masters under autocast its rotary parts turn
    // in fp32 and are rounded once, at SDPA's cast: the eager path turns them so and rounds at once
    // (as model.rope_fp32 asks on either path).
    const auto type = queries.scalar_type();
    const auto tables = m_ropeFp32 || (!m_fusedRotary && x.scalar_type() == torch::kFloat) ? torch::kFloat : type;
    const auto cos = m_fusedRotary ? in.cos : in.cos.to(tables).unsqueeze(1), sin = m_fusedRotary ? in.sin : in.sin.to(tables).unsqueeze(1);
    const auto qRot = rotate(queries.narrow(-1, nope, rope), cos, sin).to(type);
    const auto kRot = rotate(sharedKey, cos, sin).to(keysValues.scalar_type()).expand({b, t, m_heads, rope});
    const auto query = torch::cat({queries.narrow(-1, 0, nope), qRot}, -1).transpose(1, 2);
    const auto key = torch::cat({keysValues.narrow(-1, 0, nope), kRot}, -1).transpose(1, 2);
    const auto v = value.transpose(1, 2);
    torch::Tensor attended;
    // The kernels take a value head narrower than the query's (math and memory-efficient do; flash,
    // which does not, is not picked for such shapes).
    if (usesEagerAttentionForm(0.0, m_fused, false, m_rescaled))
        attended = eagerCausalAttention(query, key, v, m_scale);
    else if (m_rescaled) {
#if PB_TORCH_AT_LEAST(2, 1)
        attended = at::scaled_dot_product_attention(query, key, v, {}, 0.0, /*is_causal=*/true, m_scale);
#else
        attended = eagerCausalAttention(query, key, v, m_scale);
#endif
    } else {
        attended = compat::causalAttention(query, key, v, m_fused);
    }
    return o->forward(attended.transpose(1, 2).reshape({b, t, m_heads * vDim}));
}

} // namespace pb
