#include "model/MixedLinear.h"

#include "engine/TorchCompat.h"
#include "model/FusedOps.h"
#include "model/ProjectionGroup.h"

#include <algorithm>

namespace pb {
namespace {

// x dropped as torch::dropout(x, p, true) drops it, with what its backward needs: on a CUDA device
// native_dropout's output and boolean mask (at::dropout calls it there), elsewhere at::dropout's
// own form, x times a noise tensor of x's dtype holding 0 or 1 / (1 - p). The same generator calls
// in the same order, so the same draws as the adapter outside the node.
std::pair<torch::Tensor, torch::Tensor> dropWithMask(const torch::Tensor &x, double p)
{
    if (x.is_cuda()) {
        auto [dropped, mask] = at::native_dropout(x, p, true);
        return {dropped, mask};
    }
    auto noise = at::empty_like(x).bernoulli_(1 - p);
    noise.div_(1 - p);
    return {x * noise, noise};
}

// t times the mask dropWithMask made (its backward, and x's dropped copy made again from x).
torch::Tensor applyMask(const torch::Tensor &t, const torch::Tensor &mask, double p)
{
    return mask.scalar_type() == at::kBool ? at::native_dropout_backward(t, mask, 1.0 / (1.0 - p)) : t * mask;
}

struct MixedLinearFunction : public torch::autograd::Function<MixedLinearFunction> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, at::TensorList weights,
                                                  at::TensorList biases, at::TensorList loraA, at::TensorList loraB, int64_t computeType,
                                                  std::vector<double> scalings, std::vector<double> dropouts)
    {
        const auto type = static_cast<at::ScalarType>(computeType); // autocast's dtype
        const int64_t in = x.size(-1), count = static_cast<int64_t>(weights.size());
        const bool keepsInput = std::any_of(weights.begin(), weights.end(), [](const torch::Tensor &w) { return w.requires_grad(); }) ||
                                  std::any_of(loraA.begin(), loraA.end(), [](const torch::Tensor &a) { return a.numel() > 0; });
        // As autograd's mm: X for the weights' (and lora_A's) gradients, each 16-bit weight for the
        // input's; an adapter adds what autograd keeps for it: A's 16-bit copy (for the input's
        // gradient), B's and A's output (for each other's gradient), and a dropout's mask.
        torch::autograd::variable_list outputs, toSave {keepsInput ? x.reshape({-1, in}) : torch::Tensor()};
        torch::autograd::variable_list adapterSaved;
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
            auto out = y.is_view() ? at::_unsafe_view(y, y.sizes()) : y;
            toSave.push_back(x.requires_grad() ? w : torch::Tensor());
            if (loraA[i].numel() > 0) {
                // As LoraLinearImpl::withAdapter: lora_A's product as at::linear, then y += s * down B^T
                // by the GEMM's own accumulation, the same calls so the same bits.
                const auto a = loraA[i].to(type), b = loraB[i].to(type);
                const double p = dropouts[static_cast<size_t>(i)];
                torch::Tensor dropped, mask;
                if (p > 0)
                    std::tie(dropped, mask) = dropWithMask(x, p);
                const auto down = at::linear(p > 0 ? dropped : x, a).reshape({-1, a.size(0)});
                out.view({-1, out.size(-1)}).addmm_(down, b.t(), 1.0, scalings[static_cast<size_t>(i)]);
                // The mask is kept whether or not x needs a gradient: the backward makes lora_A's input again from it.
                // As x, kept in the 2-D shape the backward's products take.
                adapterSaved.insert(adapterSaved.end(), {x.requires_grad() ? a : torch::Tensor(), b, down, p > 0 ? mask.reshape({-1, in}) : mask});
            } else {
                adapterSaved.insert(adapterSaved.end(), {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()});
            }
            outputs.push_back(out);
        }
        toSave.insert(toSave.end(), adapterSaved.begin(), adapterSaved.end());
        ctx->save_for_backward(toSave);
        ctx->saved_data["scalings"] = scalings;
        ctx->saved_data["dropouts"] = dropouts;
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
        torch::autograd::variable_list gw(count), gb(count), ga(count), gbLora(count);
        const auto scalings = ctx->saved_data["scalings"].toDoubleVector(), dropouts = ctx->saved_data["dropouts"].toDoubleVector();
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
            const auto &a16 = saved[1 + count + 4 * i], &b16 = saved[2 + count + 4 * i], &down = saved[3 + count + 4 * i];
            const auto &mask = saved[4 + count + 4 * i];
            if (down.defined()) {
                // As addmm's backward: dDown = s dY B; dB = s dY^T down and dA = dDown^T X, each
                // into the adapter's fp32 master by its GEMM; dX gains dDown A in the same sum.
                // With dropout X is the dropped copy, made again, and dDown A gated by the mask
                // as it joins (the mask is not the GEMM's to apply): on a card one kernel each in
                // place of the dropped copy and dA's GEMM, and of the product, its masked copy and the add.
                const double s = scalings[static_cast<size_t>(i)], p = dropouts[static_cast<size_t>(i)];
                auto gDown = at::mm(g, b16);
                if (s != 1.0)
                    gDown = gDown * s;
                auto accB = at::empty({b16.size(0), b16.size(1)}, g.options().dtype(at::kFloat));
                compat::addMatmulInto(accB, g.t(), down, /*accumulate=*/false);
                gbLora[i] = s != 1.0 ? accB.mul_(s) : accB;
                const bool cardMask = mask.defined() && mask.scalar_type() == at::kBool; // native_dropout's: the kernels take it
                if (cardMask) {
                    ga[i] = droppedInputProduct(gDown, x2, mask, 1.0 / (1.0 - p));
                } else {
                    auto accA = at::empty({gDown.size(1), in}, g.options().dtype(at::kFloat));
                    compat::addMatmulInto(accA, gDown.t(), mask.defined() ? applyMask(x2, mask, p) : x2, /*accumulate=*/false);
                    ga[i] = accA;
                }
                if (a16.defined() && cardMask && gx.defined()) {
                    addDroppedLowRank(gx, gDown, a16, mask, 1.0 / (1.0 - p));
                } else if (a16.defined() && mask.defined()) {
                    const auto part = applyMask(at::mm(gDown, a16), mask, p);
                    gx = gx.defined() ? gx.add_(part) : part;
                } else if (a16.defined()) {
                    gx = gx.defined() ? gx.addmm_(gDown, a16) : at::mm(gDown, a16);
                }
            }
        }
        if (gx.defined()) {
            shape.back() = in;
            gx = at::_unsafe_view(gx, shape);
        }
        auto result = groupGradients(gx, gw, gb);
        result.pop_back(); // groupGradients' none for computeType, which follows the adapters here
        result.insert(result.end(), ga.begin(), ga.end());
        result.insert(result.end(), gbLora.begin(), gbLora.end());
        result.insert(result.end(), {torch::Tensor(), torch::Tensor(), torch::Tensor()}); // computeType, scalings, dropouts
        return result;
    }
};

} // namespace

bool mixedLinearApplies(const torch::Tensor &x)
{
    const auto device = x.device().type();
    return torch::GradMode::is_enabled() && compat::autocastEnabled(device) && x.scalar_type() == compat::autocastDtype(device);
}

std::vector<torch::Tensor> mixedLinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases,
                                             const std::vector<MixedAdapter> &adapters)
{
    const auto present = groupBiases("mixedLinearShared", weights, biases);
    TORCH_CHECK(adapters.empty() || adapters.size() == weights.size(), "mixedLinearShared: an adapter (or none) per weight");
    std::vector<torch::Tensor> a, b;
    std::vector<double> scalings, dropouts;
    for (size_t i = 0; i < weights.size(); ++i) {
        const bool has = i < adapters.size() && adapters[i].a.defined();
        a.push_back(has ? adapters[i].a : torch::empty({0}, weights[i].options()));
        b.push_back(has ? adapters[i].b : torch::empty({0}, weights[i].options()));
        scalings.push_back(has ? adapters[i].scaling : 0.0);
        dropouts.push_back(has ? adapters[i].dropout : 0.0);
    }
    return MixedLinearFunction::apply(x, at::TensorList(weights), at::TensorList(present), at::TensorList(a), at::TensorList(b),
                                      static_cast<int64_t>(compat::autocastDtype(x.device().type())), scalings, dropouts);
}

} // namespace pb
