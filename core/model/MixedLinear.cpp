#include "model/MixedLinear.h"

#include "engine/TorchCompat.h"
#include "model/ProjectionGroup.h"

#include <algorithm>

namespace pb {
namespace {

struct MixedLinearFunction : public torch::autograd::Function<MixedLinearFunction> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, at::TensorList weights,
                                                  at::TensorList biases, int64_t computeType)
    {
        const auto type = static_cast<at::ScalarType>(computeType); // autocast's dtype
        const int64_t in = x.size(-1), count = static_cast<int64_t>(weights.size());
        const bool trainsWeight = std::any_of(weights.begin(), weights.end(), [](const torch::Tensor &w) { return w.requires_grad(); });
        // As autograd's mm: X for the weights' gradients, each 16-bit weight for the input's.
        torch::autograd::variable_list outputs, toSave {trainsWeight ? x.reshape({-1, in}) : torch::Tensor()};
        int64_t biasTrains = 0, trains = 0; // bit i: bias i, weight i trains
        std::vector<int64_t> outs, types;
        for (int64_t i = 0; i < count; ++i) {
            const auto w = weights[i].to(type);
            // at::linear as autocast calls it, so the outputs are its bits (LibTorch's bias path
            // differs by version).
            const auto y = at::linear(x, w, biases[i].numel() > 0 ? biases[i].to(type) : torch::Tensor());
            biasTrains |= biases[i].numel() > 0 && biases[i].requires_grad() ? int64_t {1} << i : 0;
            trains |= weights[i].requires_grad() ? int64_t {1} << i : 0;
            outs.push_back(w.size(0));
            types.push_back(static_cast<int64_t>(weights[i].scalar_type()));
            // Not a view: a view made inside a custom function may not be changed in place.
            outputs.push_back(y.is_view() ? at::_unsafe_view(y, y.sizes()) : y);
            toSave.push_back(x.requires_grad() ? w : torch::Tensor());
        }
        ctx->save_for_backward(toSave);
        // Of the masters, only their shapes and dtypes: keeping one would hold a gathered FSDP weight.
        ctx->saved_data["bias_trains"] = biasTrains;
        ctx->saved_data["trains"] = trains;
        ctx->saved_data["in"] = in;
        ctx->saved_data["outs"] = outs;
        ctx->saved_data["types"] = types;
        ctx->set_materialize_grads(false);
        return outputs;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const int64_t count = static_cast<int64_t>(grads.size()), biasTrains = ctx->saved_data["bias_trains"].toInt(), in = ctx->saved_data["in"].toInt();
        const int64_t trains = ctx->saved_data["trains"].toInt();
        const auto outs = ctx->saved_data["outs"].toIntVector(), types = ctx->saved_data["types"].toIntVector();
        const auto &x2 = saved[0];
        torch::Tensor gx;
        torch::autograd::variable_list gw(count), gb(count);
        std::vector<int64_t> shape;
        for (int64_t i = 0; i < count; ++i) {
            if (!grads[i].defined())
                continue;
            const auto &w16 = saved[1 + i];
            const auto masterType = static_cast<at::ScalarType>(types[static_cast<size_t>(i)]);
            const auto g = grads[i].reshape({-1, outs[static_cast<size_t>(i)]});
            shape = grads[i].sizes().vec();
            if (w16.defined()) // dX = sum of dY W, each product added by its GEMM
                gx = gx.defined() ? gx.addmm_(g, w16) : at::mm(g, w16);
            if ((trains >> i) & 1) {
                // dW = dY^T X into the master's dtype by the GEMM (compat::addMatmulInto; beta = 0,
                // so the fresh tensor is never read).
                auto acc = at::empty({outs[static_cast<size_t>(i)], in}, g.options().dtype(masterType));
                compat::addMatmulInto(acc, g.t(), x2, /*accumulate=*/false);
                gw[i] = acc;
            }
            if ((biasTrains >> i) & 1)
                gb[i] = at::sum(g, {0}, false, masterType);
        }
        if (gx.defined()) {
            shape.back() = in;
            gx = at::_unsafe_view(gx, shape);
        }
        return groupGradients(gx, gw, gb);
    }
};

} // namespace

bool mixedLinearApplies(const torch::Tensor &x)
{
    const auto device = x.device().type();
    return torch::GradMode::is_enabled() && compat::autocastEnabled(device) && x.scalar_type() == compat::autocastDtype(device);
}

std::vector<torch::Tensor> mixedLinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases)
{
    const auto present = groupBiases("mixedLinearShared", weights, biases);
    return MixedLinearFunction::apply(x, at::TensorList(weights), at::TensorList(present), static_cast<int64_t>(compat::autocastDtype(x.device().type())));
}

} // namespace pb
