#include "model/StackedExperts.h"

#include "engine/TorchCompat.h"

#include <QString>

namespace pb {

namespace {

torch::Tensor emptyStacked(std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    // As emptyParam (Transformer.cpp): a shape without memory until DecoderModel gives it storage.
    return torch::empty_strided(shape, std::vector<int64_t>(shape.size(), 0), options);
}

} // namespace

torch::Tensor stackedExpertActivation(const torch::Tensor &gateUp, const StackedExpertsOptions &o)
{
    const int64_t width = gateUp.size(-1) / 2;
    torch::Tensor gate, up;
    if (o.interleavedGateUp) {
        const auto pairs = gateUp.unflatten(-1, {width, 2});
        gate = pairs.select(-1, 0);
        up = pairs.select(-1, 1);
    } else {
        gate = gateUp.narrow(-1, 0, width);
        up = gateUp.narrow(-1, width, width);
    }
    if (o.swigluLimit > 0) {
        // gpt-oss: the clamps keep the product bounded; the +1 on up is part of its trained form.
        gate = gate.clamp_max(o.swigluLimit);
        up = up.clamp(-o.swigluLimit, o.swigluLimit);
        return (up + 1) * (gate * torch::sigmoid(gate * o.swigluAlpha));
    }
    return torch::silu(gate) * up;
}

StackedExpertsImpl::StackedExpertsImpl(const StackedExpertsOptions &o, const torch::TensorOptions &options) : m_o(o)
{
    gateUp = register_parameter("gate_up_proj", emptyStacked({o.experts, o.hidden, 2 * o.intermediate}, options));
    if (o.bias)
        gateUpBias = register_parameter("gate_up_proj_bias", emptyStacked({o.experts, 2 * o.intermediate}, options));
    down = register_parameter("down_proj", emptyStacked({o.experts, o.intermediate, o.hidden}, options));
    if (o.bias)
        downBias = register_parameter("down_proj_bias", emptyStacked({o.experts, o.hidden}, options));
}

torch::Tensor StackedExpertsImpl::forward(const torch::Tensor &x, c10::ArrayRef<int64_t> counts)
{
    RECORD_USER_SCOPE("pb.experts");
    TORCH_CHECK(static_cast<int64_t>(counts.size()) == m_o.experts, "StackedExperts: ", counts.size(), " counts for ", m_o.experts, " experts");
    const auto deviceType = x.device().type();
    const auto computeType = compat::autocastEnabled(deviceType) ? compat::autocastDtype(deviceType) : x.scalar_type();
    auto cast = [&](const torch::Tensor &t) { return t.scalar_type() == computeType ? t : t.to(computeType); };
    // The whole stack cast once (what autocast does expert by expert for the experts a batch hits).
    const auto xc = cast(x), gateUpW = cast(gateUp), downW = cast(down);

    // PILOTBENCH_EXPERTS=loop forces the portable loop, so a bench can state the grouped GEMM's gain.
    static const bool loopOnly = qEnvironmentVariable("PILOTBENCH_EXPERTS") == QLatin1String("loop");
    const auto grouped = loopOnly ? torch::Tensor() : compat::groupedMatmul(xc, gateUpW, counts);
    if (grouped.defined()) {
        auto h = grouped;
        torch::Tensor rowsOf;
        if (m_o.bias) {
            rowsOf = torch::arange(m_o.experts, torch::TensorOptions().dtype(torch::kLong)).repeat_interleave(torch::tensor(counts.vec())).to(x.device());
            h = h + gateUpBias.index_select(0, rowsOf);
        }
        const auto out = compat::groupedMatmul(cast(stackedExpertActivation(h, m_o)), downW, counts);
        if (out.defined())
            return m_o.bias ? out + downBias.index_select(0, rowsOf) : out;
    }

    // One matmul per expert on its slice. split and unbind, not narrow and select: their backward
    // concatenates or stacks the pieces' gradients once instead of writing each into its own
    // zero tensor of the whole.
    const auto slices = xc.split_with_sizes(counts, 0);
    const auto gateUps = gateUpW.unbind(0), downs = downW.unbind(0);
    std::vector<torch::Tensor> gateUpBiases, downBiases;
    if (m_o.bias) {
        gateUpBiases = gateUpBias.unbind(0);
        downBiases = downBias.unbind(0);
    }
    std::vector<torch::Tensor> outputs;
    for (int64_t e = 0; e < m_o.experts; ++e) {
        if (counts[static_cast<size_t>(e)] == 0)
            continue;
        const auto i = static_cast<size_t>(e);
        auto h = torch::mm(slices[i], gateUps[i]);
        if (m_o.bias)
            h = h + gateUpBiases[i];
        auto out = torch::mm(cast(stackedExpertActivation(h, m_o)), downs[i]);
        if (m_o.bias)
            out = out + downBiases[i];
        outputs.push_back(out);
    }
    if (outputs.empty())
        return torch::zeros({0, m_o.hidden}, x.options().dtype(m_o.bias ? downBias.scalar_type() : computeType));
    return outputs.size() == 1 ? outputs.front() : torch::cat(outputs, 0);
}

} // namespace pb
