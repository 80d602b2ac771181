#include "model/Fp8Linear.h"

#include "engine/TorchCompat.h"

#ifdef PB_WITH_CUDA_KERNELS
#include "kernels/Float8Kernels.h"

#include <c10/cuda/CUDAStream.h>
#endif

namespace pb {
namespace {

constexpr double kE4m3Max = 448.0, kE5m2Max = 57344.0;

// An operand on the float8 grid and its scale: value ~ q * scale. q is a float8 tensor on the
// native path and fp32 on the grid on the emulated one.
struct Scaled {
    torch::Tensor q, scale;
};

// max(amax, 1e-12) / fmax in fp32 as a true division (a division by a scalar may be done by
// its reciprocal, which the kernel does not do); `amax` [rows, 1], or one value kept as [1].
torch::Tensor scaleOf(const torch::Tensor &amax, double fmax)
{
    const auto a = amax.to(torch::kFloat).clamp_min(1e-12).reshape({amax.dim() == 0 ? 1 : amax.size(0), -1});
    return a / torch::full_like(a, fmax);
}

// `t` [rows, cols] scaled per row (over the columns, the contracted dimension) or per tensor.
Scaled scaled(const torch::Tensor &t, bool perRow, bool e5m2, bool native)
{
#if defined(PB_WITH_CUDA_KERNELS) && PB_TORCH_AT_LEAST(2, 5)
    // One pass a row (kernels/Float8Kernels.h) instead of abs, amax, divide, clamp and cast; the
    // profile showed those passes costing more than the float8 GEMMs saved.
    if (native && t.is_cuda() && t.dim() == 2 && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16)) {
        const auto in = t.contiguous();
        auto q = torch::empty(in.sizes(), in.options().dtype(e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn));
        const auto type = in.scalar_type() == torch::kFloat ? kernels::Dtype::Float32 : kernels::Dtype::BFloat16;
        void *stream = c10::cuda::getCurrentCUDAStream(in.device().index()).stream();
        torch::Tensor scale;
        if (perRow) {
            scale = torch::empty({in.size(0), 1}, in.options().dtype(torch::kFloat));
            kernels::float8QuantizeRows(in.data_ptr(), type, in.size(0), in.size(1), e5m2, static_cast<uint8_t *>(q.data_ptr()), scale.data_ptr<float>(), stream);
        } else {
            const auto [low, high] = torch::aminmax(in); // max |t| without a copy of |t|
            scale = scaleOf(torch::maximum(low.neg(), high), e5m2 ? kE5m2Max : kE4m3Max).reshape({1});
            kernels::float8QuantizeWithScale(in.data_ptr(), type, in.numel(), e5m2, scale.data_ptr<float>(), static_cast<uint8_t *>(q.data_ptr()), stream);
        }
        return {q, scale};
    }
#endif
    const auto amax = perRow ? t.abs().amax({1}, /*keepdim=*/true) : t.abs().amax();
    auto scale = scaleOf(amax, e5m2 ? kE5m2Max : kE4m3Max);
    if (!perRow)
        scale = scale.reshape({1});
    const auto values = t.to(torch::kFloat) / (perRow ? scale : scale.expand({t.size(0), 1}));
    return {native ? compat::toFloat8(values, e5m2) : roundToFloat8(values, e5m2), scale};
}

// a [M, K] times bT [N, K] transposed (both contracted over K), in `outType`.
torch::Tensor matmul(const Scaled &a, const Scaled &bT, at::ScalarType outType, bool native)
{
    const auto scaleB = bT.scale.numel() == 1 ? bT.scale : bT.scale.reshape({1, -1});
    if (native)
        return compat::scaledMatmul(a.q, bT.q.t(), a.scale, scaleB, outType);
    // Emulated: fp32 products of grid values (exact in fp32) accumulated in fp32, then scaled, as
    // _scaled_mm does; autocast must not round the operands or the sum to 16 bits.
    const auto type = a.q.device().type();
    const bool autocast = compat::autocastEnabled(type);
    const auto autocastType = compat::autocastDtype(type);
    compat::setAutocast(type, false, autocastType);
    auto out = (torch::matmul(a.q, bT.q.t()) * a.scale * scaleB).to(outType);
    compat::setAutocast(type, autocast, autocastType);
    return out;
}

struct Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, const torch::Tensor &weight, const torch::Tensor &bias,
                                 int64_t scaling)
    {
        const bool rowwise = static_cast<Fp8Scaling>(scaling) == Fp8Scaling::Rowwise;
        const bool native = fp8Native(x.device());
        const int64_t in = x.size(-1), out = weight.size(0);
        auto shape = x.sizes().vec();
        const auto computeType = compat::autocastEnabled(x.device().type()) ? compat::autocastDtype(x.device().type()) : x.scalar_type();
        const auto x2 = x.reshape({-1, in}).to(computeType);
        TORCH_CHECK(!native || (x2.size(0) % 16 == 0 && in % 16 == 0 && out % 16 == 0), "float8 matmuls need multiples of 16: ", x2.size(0), " x ", in, " x ", out);
        const auto xq = scaled(x2, rowwise, false, native);
        auto y = matmul(xq, scaled(weight, rowwise, false, native), computeType, native);
        if (bias.numel() > 0)
            y = y + bias.to(computeType);
        // For the weight's gradient, tensorwise keeps the float8 input (its scale survives the
        // transpose), rowwise the 16-bit one; a frozen weight needs neither.
        if (weight.requires_grad())
            ctx->save_for_backward({rowwise ? x2 : xq.q, xq.scale, weight});
        else
            ctx->save_for_backward({torch::Tensor(), torch::Tensor(), weight});
        ctx->saved_data["scaling"] = scaling;
        ctx->saved_data["has_bias"] = bias.numel() > 0;
        shape.back() = out;
        return y.view(shape);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &weight = saved[2];
        const bool rowwise = static_cast<Fp8Scaling>(ctx->saved_data["scaling"].toInt()) == Fp8Scaling::Rowwise;
        const bool native = fp8Native(weight.device());
        const int64_t out = weight.size(0), in = weight.size(1);
        const auto g = grads[0].reshape({-1, out});
        const auto type = g.scalar_type();
        const bool e5m2 = !rowwise; // tensorwise: gradients in e5m2's wider range
        // dX = dY W: dY scaled per row over the outputs, W^T per row over the outputs as well.
        const auto gq = scaled(g, rowwise, e5m2, native);
        auto gx = matmul(gq, scaled(weight.t().contiguous(), rowwise, false, native), type, native);
        torch::Tensor gw, gb;
        if (weight.requires_grad()) {
            // dW = dY^T X, contracted over the tokens: both re-scaled along them (rowwise), or the
            // forward's float8 X and the gradient's e5m2 values transposed with their scales.
            const Scaled gT = rowwise ? scaled(g.t().contiguous(), true, false, native) : Scaled {gq.q.t().contiguous(), gq.scale};
            const Scaled xT = rowwise ? scaled(saved[0].t().contiguous(), true, false, native) : Scaled {saved[0].t().contiguous(), saved[1]};
            gw = matmul(gT, xT, type, native).to(weight.scalar_type());
        }
        if (ctx->saved_data["has_bias"].toBool())
            gb = g.sum(0);
        auto shape = grads[0].sizes().vec();
        shape.back() = in;
        return {gx.view(shape), gw, gb, torch::Tensor()};
    }
};

} // namespace

torch::Tensor roundToFloat8(const torch::Tensor &x, bool e5m2)
{
    // Mantissa bits and the smallest normal exponent: e4m3 3 and -6, e5m2 2 and -14; below that the
    // spacing stays the subnormal one. |x| is clamped first, so frexp's exponent is that of the
    // saturated value.
    const int mantissa = e5m2 ? 2 : 3, minExponent = e5m2 ? -14 : -6;
    const double max = e5m2 ? kE5m2Max : kE4m3Max;
    const auto v = x.to(torch::kFloat).clamp(-max, max);
    const auto [fraction, exponent] = torch::frexp(v); // v = fraction * 2^exponent, |fraction| in [0.5, 1)
    (void)fraction;
    const auto e = torch::clamp_min(exponent - 1, minExponent).to(torch::kFloat);
    const auto spacing = torch::pow(2.0, e - mantissa);
    return (torch::round(v / spacing) * spacing).clamp(-max, max);
}

bool fp8Native(const torch::Device &device) { return device.is_cuda() && compat::hasFloat8(); }

std::pair<torch::Tensor, torch::Tensor> float8Quantize(const torch::Tensor &t, bool perRow, bool e5m2)
{
    const auto s = scaled(t, perRow, e5m2, fp8Native(t.device()));
    return {s.q, s.scale};
}

torch::Tensor fp8Linear(const torch::Tensor &x, const torch::Tensor &weight, const torch::Tensor &bias, Fp8Scaling scaling)
{
    return Fp8LinearFunction::apply(x, weight, bias.defined() ? bias : torch::empty({0}, weight.options()), static_cast<int64_t>(scaling));
}

} // namespace pb
