#include "model/GroupedExperts.h"

#include "engine/TorchCompat.h"

#include <QString>

#include <algorithm>
#include <numeric>

namespace pb {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x [N, K] times each expert's w[e] [K, O] on its rows: [N, O]; one matmul per expert where the
// grouped GEMM does not take these tensors.
torch::Tensor groupedRows(const torch::Tensor &x, const torch::Tensor &w, c10::ArrayRef<int64_t> counts)
{
    auto out = compat::groupedMatmul(x, w, counts);
    if (out.defined())
        return out;
    const auto slices = x.split_with_sizes(counts, 0);
    std::vector<torch::Tensor> outputs;
    for (size_t e = 0; e < counts.size(); ++e)
        if (counts[e] > 0)
            outputs.push_back(slices[e].mm(w[static_cast<int64_t>(e)]));
    if (outputs.empty())
        return torch::zeros({0, w.size(2)}, x.options());
    return outputs.size() == 1 ? outputs.front() : torch::cat(outputs, 0);
}

// Per expert, a_e^T b_e over its rows: a [n, O], b [n, K] -> [E, O, K], zeros for an expert
// without rows.
torch::Tensor groupedOuter(const torch::Tensor &a, const torch::Tensor &b, c10::ArrayRef<int64_t> counts)
{
    const auto experts = static_cast<int64_t>(counts.size());
    auto out = compat::groupedMatmulWeights(a, b, counts);
    if (out.defined()) {
        for (int64_t e = 0; e < experts; ++e)
            if (counts[static_cast<size_t>(e)] == 0)
                out[e].zero_();
        return out;
    }
    out = torch::zeros({experts, a.size(1), b.size(1)}, a.options());
    int64_t row = 0;
    for (int64_t e = 0; e < experts; ++e) {
        const int64_t rows = counts[static_cast<size_t>(e)];
        if (rows > 0)
            out[e].copy_(a.narrow(0, row, rows).t().mm(b.narrow(0, row, rows)));
        row += rows;
    }
    return out;
}

// The weights' gradient [E, O, K] in `type`. Cast from the compute dtype a few experts at a time,
// so the 16-bit gradient of the whole stack never exists beside its fp32 copy (autograd's loop
// casts expert by expert too).
torch::Tensor weightGradients(const torch::Tensor &go, const torch::Tensor &x, c10::ArrayRef<int64_t> counts, at::ScalarType type)
{
    if (go.scalar_type() == type)
        return groupedOuter(go, x, counts);
    const auto experts = static_cast<int64_t>(counts.size());
    auto out = torch::empty({experts, go.size(1), x.size(1)}, go.options().dtype(type));
    const int64_t chunk = std::max<int64_t>(1, (experts + 7) / 8);
    int64_t row = 0;
    for (int64_t first = 0; first < experts; first += chunk) {
        const int64_t n = std::min(chunk, experts - first);
        const auto part = counts.slice(static_cast<size_t>(first), static_cast<size_t>(n));
        const int64_t rows = std::accumulate(part.begin(), part.end(), int64_t {0});
        out.narrow(0, first, n).copy_(groupedOuter(go.narrow(0, row, rows), x.narrow(0, row, rows), part));
        row += rows;
    }
    return out;
}

struct GroupedCall {
    torch::Tensor stacked;           // the pool seen as [E, O, K], outside autograd
    c10::ArrayRef<int64_t> counts;
};

// y = x W_e^T on each expert's rows, with the gradients of the pool's parameters (`leaves`, in
// pool order: each one `O / (leaves / E)` rows of its expert's [O, K]) returned as views of one
// [E, O, K] gradient, so they too share one allocation.
class GroupedLinear : public torch::autograd::Function<GroupedLinear> {
public:
    static torch::Tensor forward(AutogradContext *ctx, const torch::Tensor &x, torch::TensorList leaves, const GroupedCall &call)
    {
        const auto w = call.stacked.scalar_type() == x.scalar_type() ? call.stacked : call.stacked.to(x.scalar_type());
        const bool weightsGrad = std::any_of(leaves.begin(), leaves.end(), [](const torch::Tensor &t) { return t.requires_grad(); });
        ctx->saved_data["counts"] = c10::IValue(call.counts);
        ctx->saved_data["leaves"] = static_cast<int64_t>(leaves.size());
        ctx->saved_data["weight_type"] = static_cast<int64_t>(call.stacked.scalar_type());
        // x for the weights' gradient, the 16-bit cast (autocast's per-expert casts, made once) for
        // x's. Saved variables, not saved_data: autograd frees those once this node's backward
        // has run, saved_data only with the whole graph (measured: 3.4 GB more at the end of a
        // 4-layer Moonlight backward on the H200).
        ctx->save_for_backward({weightsGrad ? x : torch::Tensor(), x.requires_grad() ? w : torch::Tensor()});
        return groupedRows(x, w.transpose(1, 2), call.counts);
    }

    static variable_list backward(AutogradContext *ctx, variable_list grads)
    {
        // The saved weights are detached views of the pool: a graph of this backward would miss
        // the terms through them, so it is refused rather than silently wrong.
        TORCH_CHECK(!torch::GradMode::is_enabled(), "grouped experts: no double backward (set PILOTBENCH_EXPERTS=loop)");
        const auto counts = ctx->saved_data["counts"].toIntVector();
        const auto leaves = ctx->saved_data["leaves"].toInt();
        const auto saved = ctx->get_saved_variables();
        const auto &x = saved[0], &w = saved[1];
        const auto go = grads[0].contiguous();
        variable_list out(static_cast<size_t>(leaves) + 2);
        if (w.defined())
            out[0] = groupedRows(go, w, counts);
        if (x.defined()) {
            const auto type = static_cast<at::ScalarType>(ctx->saved_data["weight_type"].toInt());
            const auto dw = weightGradients(go, x, counts, type);
            const int64_t experts = dw.size(0), perExpert = leaves / experts, rows = dw.size(1) / perExpert;
            for (int64_t j = 0; j < leaves; ++j)
                out[static_cast<size_t>(j) + 1] = dw[j / perExpert].narrow(0, (j % perExpert) * rows, rows);
        }
        return out;
    }
};

// `weights` as views of one pool laid out [E, perExpert * rows, K] in order, or undefined.
torch::Tensor stackedAlias(const std::vector<torch::Tensor> &weights, int64_t experts)
{
    const auto &first = weights.front();
    const int64_t perExpert = static_cast<int64_t>(weights.size()) / experts;
    const int64_t rows = first.size(0), cols = first.size(1), step = rows * cols * static_cast<int64_t>(first.element_size());
    const auto *base = static_cast<const char *>(first.data_ptr());
    for (size_t j = 0; j < weights.size(); ++j) {
        const auto &w = weights[j];
        if (!w.is_contiguous() || w.sizes() != first.sizes() || w.scalar_type() != first.scalar_type() || !w.is_alias_of(first) ||
            static_cast<const char *>(w.data_ptr()) != base + static_cast<int64_t>(j) * step)
            return {};
    }
    return first.detach().as_strided({experts, perExpert * rows, cols}, {perExpert * rows * cols, cols, 1});
}

} // namespace

torch::Tensor groupedExperts(const std::vector<Mlp> &experts, const torch::Tensor &x, c10::ArrayRef<int64_t> counts)
{
    const QString path = qEnvironmentVariable("PILOTBENCH_EXPERTS"); // read per call: tests switch it
    const bool forced = path == QLatin1String("grouped");
    if (experts.empty() || path == QLatin1String("loop") || (!forced && !(x.is_cuda() && x.scalar_type() == torch::kBFloat16 && compat::hasGroupedMatmul())))
        return {};
    std::vector<torch::Tensor> gateUp, down;
    for (const auto &e : experts) {
        if (!e->gate || !e->up || !e->down || e->gateUp || e->activation() != ActivationKind::SwiGlu || !e->gate->plainMatmul() ||
            !e->up->plainMatmul() || !e->down->plainMatmul())
            return {};
        gateUp.push_back(e->gate->weight);
        gateUp.push_back(e->up->weight);
        down.push_back(e->down->weight);
    }
    const auto n = static_cast<int64_t>(experts.size());
    const auto gateUpStack = stackedAlias(gateUp, n), downStack = stackedAlias(down, n);
    if (!gateUpStack.defined() || !downStack.defined())
        return {};
    RECORD_USER_SCOPE("pb.experts");
    const auto h = GroupedLinear::apply(x, torch::TensorList(gateUp), GroupedCall {gateUpStack, counts});
    const int64_t width = h.size(-1) / 2;
    const auto act = torch::silu(h.narrow(-1, 0, width)) * h.narrow(-1, width, width);
    return GroupedLinear::apply(act, torch::TensorList(down), GroupedCall {downStack, counts});
}

} // namespace pb
