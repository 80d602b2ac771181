#include "model/GatedDeltaNet.h"

#include "engine/TorchCompat.h"
#include "model/GatedDeltaRule.h"

namespace pb {

namespace {

torch::Tensor placeholder(std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    // As emptyParam (Transformer.cpp): a shape without memory until the owner gives it storage.
    return torch::empty_strided(shape, std::vector<int64_t>(shape.size(), 0), options);
}

torch::ScalarType atLeastFloat(const torch::Tensor &t) { return c10::promoteTypes(t.scalar_type(), torch::kFloat); }

} // namespace

torch::Tensor gatedRmsNorm(const torch::Tensor &x, const torch::Tensor &gate, const torch::Tensor &weight, double eps)
{
    const auto inputType = x.scalar_type();
    const auto type = atLeastFloat(x);
    auto h = x.to(type);
    h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
    h = weight * h.to(inputType);
    h = h * torch::silu(gate.to(atLeastFloat(gate)));
    return h.to(inputType);
}

GatedDeltaNetImpl::GatedDeltaNetImpl(const GatedDeltaNetOptions &o, const torch::TensorOptions &options) : m_o(o)
{
    TORCH_CHECK(o.hidden > 0 && o.keyHeads > 0 && o.valueHeads > 0 && o.keyHeadDim > 0 && o.valueHeadDim > 0 && o.convKernel > 0 && o.chunkSize > 0,
                "GatedDeltaNet: every size must be positive");
    TORCH_CHECK(o.valueHeads % o.keyHeads == 0, "GatedDeltaNet: ", o.valueHeads, " value heads are not a multiple of ", o.keyHeads, " key heads");
    const int64_t keyDim = o.keyDim(), valueDim = o.valueDim();
    // Transformers' order of registration (LibTorch lists dt_bias and A_log, the module's own, first).
    convWeight = weightOf("conv1d", {o.convChannels(), 1, o.convKernel}, options);
    if (o.layout == GatedDeltaNetLayout::InterleavedQkvzBa) {
        inProjQkvz = weightOf("in_proj_qkvz", {2 * keyDim + 2 * valueDim, o.hidden}, options);
        inProjBa = weightOf("in_proj_ba", {2 * o.valueHeads, o.hidden}, options);
    }
    dtBias = register_parameter("dt_bias", placeholder({o.valueHeads}, options));
    aLog = register_parameter("A_log", placeholder({o.valueHeads}, options));
    normWeight = weightOf("norm", {o.valueHeadDim}, options);
    outProj = weightOf("out_proj", {o.hidden, valueDim}, options);
    if (o.layout == GatedDeltaNetLayout::SeparateQkvZBA) {
        // Qwen3_5GatedDeltaNet deletes the fused projections and adds these after the rest.
        inProjQkv = weightOf("in_proj_qkv", {2 * keyDim + valueDim, o.hidden}, options);
        inProjZ = weightOf("in_proj_z", {valueDim, o.hidden}, options);
        inProjB = weightOf("in_proj_b", {o.valueHeads, o.hidden}, options);
        inProjA = weightOf("in_proj_a", {o.valueHeads, o.hidden}, options);
    }
}

torch::Tensor GatedDeltaNetImpl::weightOf(const std::string &module, std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    auto holder = register_module(module, std::make_shared<torch::nn::Module>());
    return holder->register_parameter("weight", placeholder(std::move(shape), options));
}

torch::Tensor GatedDeltaNetImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.linear_attention");
    namespace F = torch::nn::functional;
    const int64_t b = x.size(0), t = x.size(1);
    const int64_t hk = m_o.keyHeads, hv = m_o.valueHeads, dk = m_o.keyHeadDim, dv = m_o.valueHeadDim;
    const int64_t perKey = hv / hk;
    torch::Tensor mixed, z, beta, a;
    if (m_o.layout == GatedDeltaNetLayout::InterleavedQkvzBa) {
        // fix_query_key_value_ordering: per key head [q | k | its value heads' v | their z] and
        // [its b | its a]; v, z, b and a then flattened over (key head, value head of it).
        const auto qkvz = F::linear(x, inProjQkvz).view({b, t, hk, 2 * dk + 2 * perKey * dv});
        const auto parts = qkvz.split_with_sizes({dk, dk, perKey * dv, perKey * dv}, -1);
        const auto ba = F::linear(x, inProjBa).view({b, t, hk, 2 * perKey});
        const auto gates = ba.split_with_sizes({perKey, perKey}, -1);
        mixed = torch::cat({parts[0].reshape({b, t, -1}), parts[1].reshape({b, t, -1}), parts[2].reshape({b, t, -1})}, -1);
        z = parts[3].reshape({b, t, hv, dv});
        beta = gates[0].reshape({b, t, hv}).sigmoid();
        a = gates[1].reshape({b, t, hv});
    } else {
        mixed = F::linear(x, inProjQkv);
        z = F::linear(x, inProjZ).view({b, t, hv, dv});
        beta = F::linear(x, inProjB).sigmoid();
        a = F::linear(x, inProjA);
    }
    // The causal depthwise conv: padded by kernel - 1 on both sides, the first T outputs kept.
    const int64_t channels = m_o.convChannels();
    mixed = torch::conv1d(mixed.transpose(1, 2), convWeight, {}, /*stride=*/1, /*padding=*/m_o.convKernel - 1, /*dilation=*/1, /*groups=*/channels);
    mixed = torch::silu(mixed.narrow(2, 0, t)).transpose(1, 2);
    const int64_t keyDim = m_o.keyDim();
    auto q = mixed.narrow(-1, 0, keyDim).reshape({b, t, hk, dk});
    auto k = mixed.narrow(-1, keyDim, keyDim).reshape({b, t, hk, dk});
    const auto v = mixed.narrow(-1, 2 * keyDim, m_o.valueDim()).reshape({b, t, hv, dv});
    // "If the model is loaded in fp16, without the .float() here, A might be -inf": at least float32.
    const auto g = -aLog.to(atLeastFloat(aLog)).exp() * torch::softplus(a.to(atLeastFloat(a)) + dtBias, 1, 20);
    if (perKey > 1) {
        q = q.repeat_interleave(perKey, 2);
        k = k.repeat_interleave(perKey, 2);
    }
    const auto attended = chunkGatedDeltaRule(q, k, v, g, beta, m_o.chunkSize, {}, false, /*l2NormQk=*/true).output;
    const auto normed = gatedRmsNorm(attended, z, normWeight, m_o.normEps);
    return F::linear(normed.reshape({b, t, m_o.valueDim()}), outProj);
}

} // namespace pb
