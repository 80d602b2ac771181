#include "model/FusedOps.h"

#include "engine/TorchCompat.h"
#include "model/HeadLayoutProducts.h"

#ifdef PB_WITH_CUDA_KERNELS
#include "kernels/FusedKernels.h"

#include <c10/cuda/CUDAStream.h>
#endif

namespace pb {
namespace {

#ifdef PB_WITH_CUDA_KERNELS
kernels::Dtype kernelType(at::ScalarType t)
{
    switch (t) {
    case at::kFloat: return kernels::Dtype::Float32;
    case at::kBFloat16: return kernels::Dtype::BFloat16;
    case at::kHalf: return kernels::Dtype::Float16;
    default: throw std::invalid_argument(std::string("no fused kernel for dtype ") + c10::toString(t));
    }
}

bool kernelDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

void *currentStream(const torch::Tensor &t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

bool sameKernelType(const torch::Tensor &a, const torch::Tensor &b)
{
    return a.is_cuda() && kernelDtype(a.scalar_type()) && a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes();
}
#endif

constexpr int64_t kUnitOffset = 1, kScaleInFp32 = 2;

// The weight as the norm multiplies by it: Gemma's 1 + weight, in fp32 where the product is
// (`1.0 + weight.float()`), else in the weight's dtype (`1.0 + weight`).
torch::Tensor scaleOf(const torch::Tensor &weight, int64_t form)
{
    if (!(form & kUnitOffset))
        return weight;
    return (form & kScaleInFp32) ? weight.to(torch::kFloat) + 1.0 : weight + 1.0;
}

#ifdef PB_WITH_CUDA_KERNELS
kernels::RmsNormForm kernelForm(int64_t form) { return {(form & kUnitOffset) != 0, (form & kScaleInFp32) != 0}; }
#endif

// The composite norm's forward and backward (LibTorch ops; the same maths as the kernels) on
// x2 [rows, cols]: y, and rstd into `rstd`; dx and dw.
torch::Tensor compositeNorm(const torch::Tensor &x2, const torch::Tensor &weight, double eps, at::ScalarType out, int64_t form, torch::Tensor &rstd)
{
    const auto xf = x2.to(torch::kFloat);
    rstd = torch::rsqrt(xf.pow(2).mean(-1) + eps);
    const auto xn = xf * rstd.unsqueeze(1);
    return (form & kScaleInFp32) ? (xn * scaleOf(weight, form).to(torch::kFloat)).to(out) : (scaleOf(weight, form) * xn.to(x2.scalar_type())).to(out);
}

torch::Tensor compositeNormBackward(const torch::Tensor &dy, const torch::Tensor &x2, const torch::Tensor &weight, const torch::Tensor &rstd, int64_t form,
                                    torch::Tensor &dw)
{
    const auto xn = x2.to(torch::kFloat) * rstd.unsqueeze(1);
    const auto g = dy.to(torch::kFloat);
    dw = (g * ((form & kScaleInFp32) ? xn : xn.to(x2.scalar_type()).to(torch::kFloat))).sum(0).to(weight.scalar_type());
    const auto gw = g * scaleOf(weight, form).to(torch::kFloat);
    const auto mean = (gw * xn).mean(-1, /*keepdim=*/true);
    return (rstd.unsqueeze(1) * (gw - xn * mean)).to(x2.scalar_type());
}

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
    // `form`: bit 0 the unit offset (1 + weight), bit 1 the weight's product in fp32 (Gemma, OLMo 2).
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, const torch::Tensor &weight, double eps,
                                 int64_t outType, int64_t form)
    {
        const auto out = static_cast<at::ScalarType>(outType);
        ctx->saved_data["form"] = form;
        const auto cols = x.size(-1);
        const auto x2 = x.contiguous().view({-1, cols});
        torch::Tensor y, rstd;
#ifdef PB_WITH_CUDA_KERNELS
        if (x.is_cuda() && kernelDtype(x.scalar_type()) && kernelDtype(weight.scalar_type()) && kernelDtype(out)) {
            const auto w = weight.contiguous();
            y = torch::empty(x2.sizes(), x2.options().dtype(out));
            rstd = torch::empty({x2.size(0)}, x2.options().dtype(torch::kFloat));
            kernels::rmsNormForward(x2.data_ptr(), kernelType(x2.scalar_type()), w.data_ptr(), kernelType(w.scalar_type()), y.data_ptr(),
                                    kernelType(out), rstd.data_ptr<float>(), x2.size(0), cols, static_cast<float>(eps), kernelForm(form), currentStream(x2));
        }
#endif
        if (!y.defined())
            y = compositeNorm(x2, weight, eps, out, form, rstd);
        ctx->save_for_backward({x2, weight, rstd});
        auto shape = x.sizes().vec();
        return y.view(shape);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &x2 = saved[0], &weight = saved[1], &rstd = saved[2];
        const int64_t form = ctx->saved_data["form"].toInt();
        const auto cols = x2.size(1);
        const auto shape = gradOutputs[0].sizes().vec();
        const auto dy = gradOutputs[0].contiguous().view({-1, cols});
        torch::Tensor dx, dw;
#ifdef PB_WITH_CUDA_KERNELS
        if (x2.is_cuda() && kernelDtype(dy.scalar_type()) && kernelDtype(x2.scalar_type()) && kernelDtype(weight.scalar_type())) {
            const auto w = weight.contiguous();
            dx = torch::empty_like(x2);
            const auto partials = torch::empty({kernels::rmsNormPartials(x2.size(0)), cols}, x2.options().dtype(torch::kFloat));
            kernels::rmsNormBackward(dy.data_ptr(), kernelType(dy.scalar_type()), x2.data_ptr(), kernelType(x2.scalar_type()), w.data_ptr(),
                                     kernelType(w.scalar_type()), rstd.data_ptr<float>(), dx.data_ptr(), partials.data_ptr<float>(),
                                     partials.size(0), x2.size(0), cols, kernelForm(form), currentStream(x2));
            dw = partials.sum(0).to(weight.scalar_type());
        }
#endif
        if (!dx.defined())
            dx = compositeNormBackward(dy, x2, weight, rstd, form, dw);
        return {dx.view(shape), weight.requires_grad() ? dw : torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

// The residual add and the norm after it as one node: h = x + branch * scale, y = norm(h). Where
// the kernels run it is one launch each way (the add's output was written, then read back by the
// norm; its gradient was accumulated by an add and cast by another kernel); elsewhere the same ops
// as the add followed by RmsNormFunction. Keeps what the norm alone keeps (h, the weight, rstd).
struct AddRmsNormFunction : public torch::autograd::Function<AddRmsNormFunction> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, const torch::Tensor &branch,
                                                  const torch::Tensor &weight, double eps, double scale, int64_t outType, int64_t form)
    {
        const auto out = static_cast<at::ScalarType>(outType);
        // The sum's own gradient is absent where nothing else reads it (the final norm's input):
        // left undefined, not a zero tensor of the stream's size.
        ctx->set_materialize_grads(false);
        ctx->saved_data["form"] = form;
        ctx->saved_data["scale"] = scale;
        ctx->saved_data["branch_type"] = static_cast<int64_t>(branch.scalar_type());
        const auto cols = x.size(-1);
        torch::Tensor h, y, rstd;
#ifdef PB_WITH_CUDA_KERNELS
        if (x.is_cuda()) { // addRmsNormFits held when fusedAddRmsNorm chose this node
            const auto x2 = x.contiguous().view({-1, cols}), b2 = branch.contiguous().view({-1, cols});
            const auto w = weight.contiguous();
            h = torch::empty_like(x2);
            y = torch::empty(x2.sizes(), x2.options().dtype(out));
            rstd = torch::empty({x2.size(0)}, x2.options().dtype(torch::kFloat));
            kernels::addRmsNormForward(x2.data_ptr(), kernelType(x2.scalar_type()), w.data_ptr(), kernelType(w.scalar_type()), y.data_ptr(), kernelType(out),
                                       rstd.data_ptr<float>(), x2.size(0), cols, static_cast<float>(eps), kernelForm(form),
                                       kernels::ResidualIn {b2.data_ptr(), static_cast<float>(scale), h.data_ptr()}, currentStream(x2));
        }
#endif
        if (!h.defined()) {
            h = residualAdd(x, branch, scale).contiguous().view({-1, cols});
            y = compositeNorm(h, weight, eps, out, form, rstd);
        }
        ctx->save_for_backward({h, weight, rstd});
        return {h.view(x.sizes()), y.view(x.sizes())};
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &h = saved[0], &weight = saved[1], &rstd = saved[2];
        const int64_t form = ctx->saved_data["form"].toInt();
        const double scale = ctx->saved_data["scale"].toDouble();
        const auto branchType = static_cast<at::ScalarType>(ctx->saved_data["branch_type"].toInt());
        const auto cols = h.size(1);
        const auto shape = gradOutputs[1].defined() ? gradOutputs[1].sizes().vec() : gradOutputs[0].sizes().vec();
        // The stream's own gradient (from the add after the MLP) and the norm output's.
        const auto dSum = gradOutputs[0].defined() ? gradOutputs[0].contiguous().view({-1, cols}) : torch::Tensor();
        auto dy = gradOutputs[1].defined() ? gradOutputs[1].contiguous().view({-1, cols}) : torch::zeros({h.size(0), cols}, h.options());
        // The branch's gradient is dx itself where the add neither casts nor scales it.
        const bool branchOwnGrad = branchType != h.scalar_type() || scale != 1.0;
        torch::Tensor dx, dBranch, dw;
#ifdef PB_WITH_CUDA_KERNELS
        const auto w = weight.contiguous();
        // The outputs are new allocations, aligned: whether the kernel takes the rows is the inputs'.
        const void *read[] = {dy.data_ptr(), h.data_ptr(), w.data_ptr(), dSum.defined() ? dSum.data_ptr() : nullptr};
        if (h.is_cuda() && kernelDtype(dy.scalar_type()) && dy.scalar_type() == branchType && kernels::addRmsNormFits(cols, read, 4)) {
            dx = torch::empty_like(h);
            if (branchOwnGrad)
                dBranch = torch::empty(h.sizes(), h.options().dtype(branchType));
            const auto partials = torch::empty({kernels::rmsNormPartials(h.size(0)), cols}, h.options().dtype(torch::kFloat));
            kernels::addRmsNormBackward(dy.data_ptr(), kernelType(dy.scalar_type()), h.data_ptr(), kernelType(h.scalar_type()), w.data_ptr(),
                                        kernelType(w.scalar_type()), rstd.data_ptr<float>(), dx.data_ptr(), partials.data_ptr<float>(), partials.size(0),
                                        h.size(0), cols, kernelForm(form),
                                        kernels::ResidualGrad {read[3], dBranch.defined() ? dBranch.data_ptr() : nullptr, static_cast<float>(scale)},
                                        currentStream(h));
            dw = partials.sum(0).to(weight.scalar_type());
        }
#endif
        if (!dx.defined()) {
            // As autograd runs the unfused pair: the norm's dx in the stream's dtype, the stream's
            // own gradient added to it, then add's gradient cast to the branch's dtype and scaled.
            dx = compositeNormBackward(dy, h, weight, rstd, form, dw);
            if (dSum.defined())
                dx.add_(dSum);
            if (branchOwnGrad)
                dBranch = scale == 1.0 ? dx.to(branchType) : dx.to(branchType) * scale;
        }
        const auto dxOut = dx.view(shape);
        return {dxOut, branchOwnGrad ? dBranch.view(shape) : dxOut, weight.requires_grad() ? dw : torch::Tensor(), torch::Tensor(), torch::Tensor(),
                torch::Tensor(), torch::Tensor()};
    }
};

// a * b, written into a's own buffer where a already has the product's dtype (a is a temporary).
torch::Tensor timesInPlace(torch::Tensor a, const torch::Tensor &b)
{
    return a.scalar_type() == at::promote_types(a.scalar_type(), b.scalar_type()) ? a.mul_(b) : a * b;
}

// The activation of a gated MLP as eager computes it: silu, or gelu ("tanh" or exact).
torch::Tensor activate(const torch::Tensor &gate, GateActivation act)
{
    return act == GateActivation::Silu ? torch::silu(gate) : torch::gelu(gate, act == GateActivation::GeluTanh ? "tanh" : "none");
}

torch::Tensor activationBackward(const torch::Tensor &grad, const torch::Tensor &gate, GateActivation act)
{
    return act == GateActivation::Silu ? torch::silu_backward(grad, gate) : torch::gelu_backward(grad, gate, act == GateActivation::GeluTanh ? "tanh" : "none");
}

#ifdef PB_WITH_CUDA_KERNELS
kernels::GateActivation kernelActivation(GateActivation act)
{
    return act == GateActivation::Silu ? kernels::GateActivation::Silu : act == GateActivation::GeluTanh ? kernels::GateActivation::GeluTanh : kernels::GateActivation::GeluErf;
}
#endif

struct GatedActivationFunction : public torch::autograd::Function<GatedActivationFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &gate, const torch::Tensor &up, int64_t activation)
    {
        ctx->save_for_backward({gate, up});
        ctx->saved_data["activation"] = activation;
        const auto act = static_cast<GateActivation>(activation);
#ifdef PB_WITH_CUDA_KERNELS
        if (sameKernelType(gate, up)) {
            const auto g = gate.contiguous(), u = up.contiguous();
            auto out = torch::empty_like(g);
            kernels::swigluForward(g.data_ptr(), u.data_ptr(), out.data_ptr(), kernelType(g.scalar_type()), g.numel(), kernelActivation(act), currentStream(g));
            return out;
        }
#endif
        return timesInPlace(activate(gate, act), up);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &gate = saved[0], &up = saved[1];
        const auto &dOut = gradOutputs[0];
        const auto act = static_cast<GateActivation>(ctx->saved_data["activation"].toInt());
#ifdef PB_WITH_CUDA_KERNELS
        if (sameKernelType(gate, up) && dOut.scalar_type() == gate.scalar_type()) {
            const auto g = gate.contiguous(), u = up.contiguous(), d = dOut.contiguous();
            auto dg = torch::empty_like(g), du = torch::empty_like(u);
            kernels::swigluBackward(d.data_ptr(), g.data_ptr(), u.data_ptr(), dg.data_ptr(), du.data_ptr(), kernelType(g.scalar_type()), g.numel(),
                                    kernelActivation(act), currentStream(g));
            return {dg, du, torch::Tensor()};
        }
#endif
        // Eager's roundings, one intermediate alive at a time: the activation's gradient from
        // dOut * up, then up's from dOut * act(gate) in the activation's own buffer.
        const auto dg = activationBackward((dOut * up).to(gate.scalar_type()), gate, act);
        return {dg, timesInPlace(activate(gate, act), dOut).to(up.scalar_type()), torch::Tensor()};
    }
};

// The gated activation on a fused gate_up output [..., 2 x width]: one node keeping that output
// alone, whose backward makes its gradient in one tensor (split views would be copied for the
// kernel, and their two gradients concatenated).
struct PackedGatedActivationFunction : public torch::autograd::Function<PackedGatedActivationFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &gateUp, int64_t activation)
    {
        const auto gu = gateUp.contiguous();
        ctx->save_for_backward({gu});
        ctx->saved_data["activation"] = activation;
        const auto act = static_cast<GateActivation>(activation);
        const int64_t width = gu.size(-1) / 2;
#ifdef PB_WITH_CUDA_KERNELS
        if (gu.is_cuda() && kernelDtype(gu.scalar_type())) {
            auto shape = gu.sizes().vec();
            shape.back() = width;
            auto out = torch::empty(shape, gu.options());
            kernels::gatedForwardPacked(gu.data_ptr(), out.data_ptr(), kernelType(gu.scalar_type()), gu.numel() / std::max<int64_t>(2 * width, 1), width,
                                        kernelActivation(act), currentStream(gu));
            return out;
        }
#endif
        return timesInPlace(activate(gu.narrow(-1, 0, width), act), gu.narrow(-1, width, width));
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto gu = ctx->get_saved_variables()[0];
        const auto &dOut = gradOutputs[0];
        const auto act = static_cast<GateActivation>(ctx->saved_data["activation"].toInt());
        const int64_t width = gu.size(-1) / 2;
        auto dgu = torch::empty_like(gu);
#ifdef PB_WITH_CUDA_KERNELS
        if (gu.is_cuda() && kernelDtype(gu.scalar_type()) && dOut.scalar_type() == gu.scalar_type()) {
            const auto d = dOut.contiguous();
            kernels::gatedBackwardPacked(d.data_ptr(), gu.data_ptr(), dgu.data_ptr(), kernelType(gu.scalar_type()), gu.numel() / std::max<int64_t>(2 * width, 1),
                                         width, kernelActivation(act), currentStream(gu));
            return {dgu, torch::Tensor()};
        }
#endif
        // GatedActivationFunction's composite, each half written into its place in the one gradient.
        const auto g = gu.narrow(-1, 0, width), u = gu.narrow(-1, width, width);
        auto dg = dgu.narrow(-1, 0, width), du = dgu.narrow(-1, width, width);
        {
            const auto grad = (dOut * u).to(g.scalar_type());
            if (act == GateActivation::Silu)
                at::silu_backward_out(dg, grad, g);
            else
                at::gelu_backward_out(dg, grad, g, act == GateActivation::GeluTanh ? "tanh" : "none");
        }
        du.copy_(timesInPlace(activate(g, act), dOut));
        return {dgu, torch::Tensor()};
    }
};

// rotate_half's transpose: (x1, x2) -> (x2, -x1).
torch::Tensor rotateHalfTransposed(const torch::Tensor &x)
{
    const auto half = x.size(-1) / 2;
    return torch::cat({x.slice(-1, half), -x.slice(-1, 0, half)}, -1);
}

// x [b, t, heads, hd] rotated by the tables (or by minus their angle), in fp32, rounded once.
torch::Tensor rotate(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin, bool inverse)
{
    const auto xc = x.contiguous();
#ifdef PB_WITH_CUDA_KERNELS
    if (xc.is_cuda() && kernelDtype(xc.scalar_type()) && cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat) {
        const auto c = cos.contiguous(), s = sin.contiguous();
        auto y = torch::empty_like(xc);
        kernels::rotary(xc.data_ptr(), y.data_ptr(), kernelType(xc.scalar_type()), c.data_ptr<float>(), s.data_ptr<float>(),
                        xc.size(0) * xc.size(1), xc.size(2), xc.size(3), xc.size(1), inverse, currentStream(xc));
        return y;
    }
#endif
    const auto t = xc.size(1), hd = xc.size(3);
    const auto c = cos.to(torch::kFloat).view({1, t, 1, hd}), s = sin.to(torch::kFloat).view({1, t, 1, hd});
    auto xf = xc.to(torch::kFloat);
    auto turned = (inverse ? rotateHalfTransposed(xf * s) : rotateHalf(xf).mul_(s));
    auto y = xf.is_same(xc) ? xf * c : xf.mul_(c);
    return y.add_(turned).to(xc.scalar_type());
}

struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin)
    {
        ctx->save_for_backward({cos, sin});
        return rotate(x, cos, sin, false);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        return {rotate(gradOutputs[0], saved[0], saved[1], true), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

at::ScalarType eagerComputeType(const torch::Tensor &input, const torch::Tensor &weight)
{
    const auto deviceType = input.device().type();
    return compat::autocastEnabled(deviceType) ? compat::autocastDtype(deviceType) : at::promote_types(input.scalar_type(), weight.scalar_type());
}

bool fusedKernelsOn(const torch::Device &device)
{
#ifdef PB_WITH_CUDA_KERNELS
    return device.is_cuda();
#else
    (void)device;
    return false;
#endif
}

#ifdef PB_WITH_CUDA_KERNELS
namespace {

struct CappedSoftmaxFunction : public torch::autograd::Function<CappedSoftmaxFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &scores, double scale, double softcap, int64_t window)
    {
        const auto s = scores.contiguous();
        const int64_t keys = s.size(-1), rows = s.numel() / std::max<int64_t>(keys, 1);
        auto probs = torch::empty_like(s);
        auto stats = torch::empty({2, rows}, s.options().dtype(torch::kFloat));
        const kernels::ScoreCap cap {static_cast<float>(scale), static_cast<float>(softcap), window};
        kernels::cappedSoftmaxForward(s.data_ptr(), probs.data_ptr(), kernelType(s.scalar_type()), stats[0].data_ptr<float>(), stats[1].data_ptr<float>(), rows,
                                      keys, cap, currentStream(s));
        ctx->save_for_backward({s, stats});
        ctx->saved_data["scale"] = scale;
        ctx->saved_data["softcap"] = softcap;
        ctx->saved_data["window"] = window;
        return probs;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &s = saved[0], &stats = saved[1];
        const auto dp = gradOutputs[0].to(s.scalar_type()).contiguous();
        auto ds = torch::empty_like(s);
        const int64_t keys = s.size(-1), rows = s.numel() / std::max<int64_t>(keys, 1);
        const kernels::ScoreCap cap {static_cast<float>(ctx->saved_data["scale"].toDouble()), static_cast<float>(ctx->saved_data["softcap"].toDouble()),
                                     ctx->saved_data["window"].toInt()};
        kernels::cappedSoftmaxBackward(s.data_ptr(), stats[0].data_ptr<float>(), stats[1].data_ptr<float>(), dp.data_ptr(), ds.data_ptr(),
                                       kernelType(s.scalar_type()), rows, keys, cap, currentStream(s));
        return {ds, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace
#endif

bool cappedSoftmaxRuns(const torch::Device &device, at::ScalarType scores)
{
#ifdef PB_WITH_CUDA_KERNELS
    return device.is_cuda() && kernelDtype(scores);
#else
    (void)device;
    (void)scores;
    return false;
#endif
}

torch::Tensor cappedSoftmax(const torch::Tensor &scores, double scale, double softcap, int64_t window)
{
    TORCH_CHECK(cappedSoftmaxRuns(scores.device(), scores.scalar_type()) && softcap > 0 && scores.dim() >= 2 && scores.size(-1) == scores.size(-2),
                "cappedSoftmax: the kernel takes square [..., T, T] fp32, bf16 or fp16 scores on a CUDA device with a soft cap");
#ifdef PB_WITH_CUDA_KERNELS
    return CappedSoftmaxFunction::apply(scores, scale, softcap, window);
#else
    (void)scale;
    (void)window;
    return {};
#endif
}

torch::Tensor groupedHeadsAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v,
                                    const std::function<torch::Tensor(const torch::Tensor &)> &probabilities)
{
    const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3), kv = k.size(1);
    TORCH_CHECK(k.dim() == 4 && v.sizes() == k.sizes() && kv > 0 && heads % kv == 0 && k.size(0) == b && k.size(2) == t && k.size(3) == d,
                "groupedHeadsAttention: q [B, H, T, D] and k, v [B, KV, T, D] with H a multiple of KV");
    // Laid out [B, T, heads, D] (the projections' and the rotary's outputs, transposed), the
    // products read them in place and leave the output so for o_proj.
    const auto q4 = q.transpose(1, 2), k4 = k.transpose(1, 2), v4 = v.transpose(1, 2);
    if (q4.is_contiguous() && k4.is_contiguous() && v4.is_contiguous() &&
        headLayoutProductsTake(q.scalar_type(), k.scalar_type(), v.scalar_type(), b, heads / kv))
        return headLayoutValues(probabilities(headLayoutScores(q4, k4)), v4).transpose(1, 2);
    const int64_t rows = heads / kv * t;
    const auto scores = torch::bmm(q.reshape({b * kv, rows, d}), k.reshape({b * kv, t, d}).transpose(1, 2)).view({b, heads, t, t});
    return torch::bmm(probabilities(scores).reshape({b * kv, rows, t}), v.reshape({b * kv, t, d})).view({b, heads, t, d});
}

torch::Tensor crossEntropyGradInPlace(torch::Tensor &logits, const torch::Tensor &targets, double scale, double divisor, double softcap)
{
    return crossEntropyGradInPlace(logits, targets, torch::full({}, scale, logits.options().dtype(torch::kFloat)), divisor, softcap);
}

torch::Tensor crossEntropyGradInPlace(torch::Tensor &logits, const torch::Tensor &targets, const torch::Tensor &scale, double divisor, double softcap)
{
    TORCH_CHECK(logits.dim() == 2 && logits.stride(1) == 1 && logits.stride(0) >= logits.size(1),
                "crossEntropyGradInPlace: logits must be a [rows, vocab] tensor of whole rows (contiguous, or rows padded apart)");
    TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == torch::kFloat && scale.device() == logits.device(),
                "crossEntropyGradInPlace: scale must be one fp32 value on the logits' device");
#ifdef PB_WITH_CUDA_KERNELS
    if (logits.is_cuda() && kernelDtype(logits.scalar_type())) {
        const auto rows = logits.size(0), vocab = logits.size(1);
        const auto t = targets.to(torch::kLong).contiguous();
        auto rowLoss = torch::empty({rows}, logits.options().dtype(torch::kFloat));
        kernels::crossEntropyGradInPlace(logits.data_ptr(), logits.stride(0), kernelType(logits.scalar_type()), t.data_ptr<int64_t>(), rows, vocab, -100,
                                         scale.data_ptr<float>(), kernels::LogitsCap {static_cast<float>(divisor), static_cast<float>(softcap)},
                                         rowLoss.data_ptr<float>(), currentStream(logits));
        return rowLoss;
    }
#endif
    // The cap as eager applies it, each step rounded to the logits' dtype; its derivative, 1 -
    // tanh^2, taken before the logits become their gradient.
    torch::Tensor capDerivative;
    if (divisor != 1.0)
        logits.div_(divisor);
    if (softcap > 0) {
        logits.div_(softcap).tanh_();
        // In place on the square (1 - x^2 rounds as -(x^2) + 1): a second logits-sized temporary
        // would be the chunk's worst point where the logits are fp32.
        capDerivative = logits.square().neg_().add_(1);
        logits.mul_(softcap);
    }
    // The same maths in place on one fp32 copy: shift by the row maximum, exponentiate, normalise.
    const auto valid = targets.ne(-100);
    const auto safe = targets.clamp_min(0).unsqueeze(1);
    auto lf = logits.scalar_type() == torch::kFloat ? logits : logits.to(torch::kFloat);
    lf.sub_(std::get<0>(lf.max(1, /*keepdim=*/true)));
    const auto shiftedTarget = lf.gather(1, safe).squeeze(1);
    lf.exp_();
    const auto sum = lf.sum(1);
    const auto keep = valid.to(torch::kFloat);
    const auto rowLoss = (sum.log() - shiftedTarget) * keep;
    lf.div_(sum.unsqueeze(1));
    lf.scatter_add_(1, safe, -torch::ones_like(safe, lf.options()));
    lf.mul_((keep * scale).unsqueeze(1));
    if (!lf.is_same(logits))
        logits.copy_(lf);
    if (capDerivative.defined())
        logits.mul_(capDerivative);
    if (divisor != 1.0)
        logits.div_(divisor);
    return rowLoss;
}

torch::Tensor fusedRmsNorm(const torch::Tensor &x, const torch::Tensor &weight, double eps, bool unitOffset, bool scaleInFp32)
{
    return RmsNormFunction::apply(x, weight, eps, static_cast<int64_t>(eagerComputeType(x, weight)),
                                  (unitOffset ? kUnitOffset : 0) | (scaleInFp32 ? kScaleInFp32 : 0));
}

torch::Tensor residualAdd(const torch::Tensor &x, const torch::Tensor &branch, double scale) { return x + (scale == 1.0 ? branch : branch * scale); }

std::pair<torch::Tensor, torch::Tensor> fusedAddRmsNorm(const torch::Tensor &x, const torch::Tensor &branch, double scale, const torch::Tensor &weight,
                                                        double eps, bool unitOffset, bool scaleInFp32)
{
    const int64_t form = (unitOffset ? kUnitOffset : 0) | (scaleInFp32 ? kScaleInFp32 : 0);
    const auto out = eagerComputeType(x, weight);
    // One node where the add keeps the stream's dtype and the branch has the norm output's (the
    // projections' autocast or model dtype): the kernel's one form. Else the two ops as before.
    bool oneNode = x.sizes() == branch.sizes() && x.device() == branch.device() && branch.scalar_type() == out &&
                   at::promote_types(x.scalar_type(), branch.scalar_type()) == x.scalar_type() && x.device() == weight.device();
#ifdef PB_WITH_CUDA_KERNELS
    if (oneNode && x.is_cuda()) {
        const auto x2 = x.contiguous(), b2 = branch.contiguous(), w = weight.contiguous();
        const void *pointers[] = {x2.data_ptr(), b2.data_ptr(), w.data_ptr()};
        oneNode = kernelDtype(x.scalar_type()) && kernelDtype(weight.scalar_type()) && kernels::addRmsNormFits(x.size(-1), pointers, 3);
    }
#endif
    if (!oneNode) {
        auto h = residualAdd(x, branch, scale);
        auto y = fusedRmsNorm(h, weight, eps, unitOffset, scaleInFp32);
        return {h, y};
    }
    const auto both = AddRmsNormFunction::apply(x, branch, weight, eps, scale, static_cast<int64_t>(out), form);
    return {both[0], both[1]};
}

torch::Tensor rotateHalf(const torch::Tensor &x)
{
    const auto half = x.size(-1) / 2;
    return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

torch::Tensor fusedGatedActivation(const torch::Tensor &gate, const torch::Tensor &up, GateActivation activation)
{
    return GatedActivationFunction::apply(gate, up, static_cast<int64_t>(activation));
}

torch::Tensor fusedSwiglu(const torch::Tensor &gate, const torch::Tensor &up) { return fusedGatedActivation(gate, up, GateActivation::Silu); }

torch::Tensor fusedGatedActivationPacked(const torch::Tensor &gateUp, GateActivation activation)
{
    TORCH_CHECK(gateUp.dim() >= 1 && gateUp.size(-1) % 2 == 0, "fusedGatedActivationPacked: the last dimension must hold gate and up halves");
    return PackedGatedActivationFunction::apply(gateUp, static_cast<int64_t>(activation));
}

void addDroppedLowRank(torch::Tensor &dx, const torch::Tensor &dDown, const torch::Tensor &a, const torch::Tensor &keep, double scale)
{
    TORCH_CHECK(dx.dim() == 2 && dDown.dim() == 2 && a.dim() == 2 && dDown.size(0) == dx.size(0) && a.size(0) == dDown.size(1) &&
                    a.size(1) == dx.size(1) && keep.sizes() == dx.sizes() && keep.scalar_type() == at::kBool,
                "addDroppedLowRank: dx [rows, cols], dDown [rows, rank], a [rank, cols] and a bool keep [rows, cols]");
#ifdef PB_WITH_CUDA_KERNELS
    constexpr int64_t kMaxRank = 64;
    if (dx.is_cuda() && dx.is_contiguous() && kernelDtype(dx.scalar_type()) && dDown.scalar_type() == dx.scalar_type() &&
        a.scalar_type() == dx.scalar_type() && a.size(0) <= kMaxRank) {
        const auto d = dDown.contiguous(), ac = a.contiguous(), k = keep.contiguous();
        kernels::addDroppedLowRank(dx.data_ptr(), d.data_ptr(), ac.data_ptr(), static_cast<const uint8_t *>(k.data_ptr()), static_cast<float>(scale),
                                   kernelType(dx.scalar_type()), dx.size(0), dx.size(1), a.size(0), currentStream(dx));
        return;
    }
#endif
    dx.add_(at::native_dropout_backward(at::mm(dDown, a), keep, scale));
}

torch::Tensor droppedInputProduct(const torch::Tensor &dDown, const torch::Tensor &x, const torch::Tensor &keep, double scale)
{
    TORCH_CHECK(dDown.dim() == 2 && x.dim() == 2 && dDown.size(0) == x.size(0) && keep.sizes() == x.sizes() && keep.scalar_type() == at::kBool,
                "droppedInputProduct: dDown [rows, rank], x [rows, cols] and a bool keep [rows, cols]");
#ifdef PB_WITH_CUDA_KERNELS
    if (x.is_cuda() && kernelDtype(x.scalar_type()) && dDown.scalar_type() == x.scalar_type() && dDown.size(1) <= kernels::kDroppedRankMax) {
        const auto xc = x.contiguous(), d = dDown.contiguous(), k = keep.contiguous();
        auto partials = at::empty({kernels::droppedInputChunks(x.size(0), x.size(1)), d.size(1), x.size(1)}, x.options().dtype(at::kFloat));
        kernels::droppedInputProduct(xc.data_ptr(), static_cast<const uint8_t *>(k.data_ptr()), static_cast<float>(scale), d.data_ptr(),
                                     kernelType(x.scalar_type()), partials.data_ptr<float>(), x.size(0), x.size(1), d.size(1), currentStream(x));
        return partials.sum(0);
    }
#endif
    auto acc = at::empty({dDown.size(1), x.size(1)}, x.options().dtype(at::kFloat));
    compat::addMatmulInto(acc, dDown.t(), at::native_dropout_backward(x, keep, scale), /*accumulate=*/false);
    return acc;
}

torch::Tensor fusedRotary(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin)
{
    TORCH_CHECK(x.dim() == 4 && cos.dim() == 2 && x.size(1) == cos.size(0) && x.size(3) == cos.size(1) && x.size(3) % 2 == 0 &&
                    sin.sizes() == cos.sizes() && sin.device() == x.device() && cos.device() == x.device(),
                "fusedRotary: x must be [batch, seq, heads, headDim] with [seq, headDim] tables on its device and an even headDim");
    return RotaryFunction::apply(x, cos, sin);
}

} // namespace pb
