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
        projection("in_proj_qkvz", o.hidden, 2 * keyDim + 2 * valueDim, inProjQkvz, options);
        projection("in_proj_ba", o.hidden, 2 * o.valueHeads, inProjBa, options);
    }
    dtBias = register_parameter("dt_bias", placeholder({o.valueHeads}, options));
    aLog = register_parameter("A_log", placeholder({o.valueHeads}, options));
    normWeight = weightOf("norm", {o.valueHeadDim}, options);
    projection("out_proj", valueDim, o.hidden, outProj, options);
    if (o.layout == GatedDeltaNetLayout::SeparateQkvZBA) {
        // Qwen3_5GatedDeltaNet deletes the fused projections and adds these after the rest.
        projection("in_proj_qkv", o.hidden, 2 * keyDim + valueDim, inProjQkv, options);
        projection("in_proj_z", o.hidden, valueDim, inProjZ, options);
        projection("in_proj_b", o.hidden, o.valueHeads, inProjB, options);
        projection("in_proj_a", o.hidden, o.valueHeads, inProjA, options);
    }
    m_o.makeProjection = nullptr; // a builder's captures need not outlive the construction
}

void GatedDeltaNetImpl::projection(const std::string &name, int64_t in, int64_t out, torch::Tensor &weight, const torch::TensorOptions &options)
{
    if (!m_o.makeProjection) {
        weight = weightOf(name, {out, in}, options);
        return;
    }
    torch::nn::AnyModule module = m_o.makeProjection(name, in, out);
    register_module(name, module.ptr());
    m_projections.emplace(name, std::move(module));
}

torch::Tensor GatedDeltaNetImpl::project(const std::string &name, const torch::Tensor &weight, const torch::Tensor &x)
{
    const auto it = m_projections.find(name);
    return it == m_projections.end() ? torch::nn::functional::linear(x, weight) : it->second.forward(x);
}

torch::Tensor GatedDeltaNetImpl::weightOf(const std::string &module, std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    auto holder = register_module(module, std::make_shared<torch::nn::Module>());
    return holder->register_parameter("weight", placeholder(std::move(shape), options));
}

torch::Tensor GatedDeltaNetImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.linear_attention");
    const int64_t b = x.size(0), t = x.size(1);
    const int64_t hk = m_o.keyHeads, hv = m_o.valueHeads, dk = m_o.keyHeadDim, dv = m_o.valueHeadDim;
    const int64_t perKey = hv / hk;
    torch::Tensor mixed, z, beta, a;
    if (m_o.layout == GatedDeltaNetLayout::InterleavedQkvzBa) {
        // fix_query_key_value_ordering: per key head [q | k | its value heads' v | their z] and
        // [its b | its a]; v, z, b and a then flattened over (key head, value head of it).
        const auto qkvz = project("in_proj_qkvz", inProjQkvz, x).view({b, t, hk, 2 * dk + 2 * perKey * dv});
        const auto parts = qkvz.split_with_sizes({dk, dk, perKey * dv, perKey * dv}, -1);
        const auto ba = project("in_proj_ba", inProjBa, x).view({b, t, hk, 2 * perKey});
        const auto gates = ba.split_with_sizes({perKey, perKey}, -1);
        mixed = torch::cat({parts[0].reshape({b, t, -1}), parts[1].reshape({b, t, -1}), parts[2].reshape({b, t, -1})}, -1);
        z = parts[3].reshape({b, t, hv, dv});
        beta = gates[0].reshape({b, t, hv}).sigmoid();
        a = gates[1].reshape({b, t, hv});
    } else {
        mixed = project("in_proj_qkv", inProjQkv, x);
        z = project("in_proj_z", inProjZ, x).view({b, t, hv, dv});
        beta = project("in_proj_b", inProjB, x).sigmoid();
        a = project("in_proj_a", inProjA, x);
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
    const auto attended = chunkGatedDeltaRule(q, k, v, g, beta, m_o.chunkSize, {}, false, /*l2NormQk=*/true, m_o.fusedLoop).output;
    const auto normed = gatedRmsNorm(attended, z, normWeight, m_o.normEps);
    return project("out_proj", outProj, normed.reshape({b, t, m_o.valueDim()}));
}

} // namespace pb
