#include "model/Fp8Linear.h"

#include "engine/TorchCompat.h"
#include "model/ProjectionGroup.h"

#include <algorithm>
#include <atomic>

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

#if defined(PB_WITH_CUDA_KERNELS) && PB_TORCH_AT_LEAST(2, 5)
// Whether the cast kernels take `t`: a 2-D fp32 or bf16 CUDA tensor on the native path.
bool castByKernel(const torch::Tensor &t, bool native)
{
    return native && t.is_cuda() && t.dim() == 2 && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
}

// `t` contiguous and 16-byte aligned (a view may start anywhere), as the kernels read it.
torch::Tensor kernelInput(const torch::Tensor &t)
{
    auto in = t.contiguous();
    return reinterpret_cast<uintptr_t>(in.data_ptr()) % 16 == 0 ? in : in.clone();
}

kernels::Dtype kernelType(const torch::Tensor &t) { return t.scalar_type() == torch::kFloat ? kernels::Dtype::Float32 : kernels::Dtype::BFloat16; }
void *streamOf(const torch::Tensor &t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

// `t` [rows, cols] scaled per row (over the columns, the contracted dimension) or per tensor. With
// `colAmax` (per row only), where the kernel casts, each column's absolute maximum too (fp32
// [cols]), for scaledTransposed; left undefined elsewhere.
Scaled scaled(const torch::Tensor &t, bool perRow, bool e5m2, bool native, torch::Tensor *colAmax = nullptr)
{
#if defined(PB_WITH_CUDA_KERNELS) && PB_TORCH_AT_LEAST(2, 5)
    // One pass a row (kernels/Float8Kernels.h) instead of abs, amax, divide, clamp and cast; the
    // profile showed those passes costing more than the float8 GEMMs saved.
    if (castByKernel(t, native)) {
        const auto in = kernelInput(t);
        auto q = torch::empty(in.sizes(), in.options().dtype(e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn));
        torch::Tensor scale;
        if (perRow) {
            scale = torch::empty({in.size(0), 1}, in.options().dtype(torch::kFloat));
            float *amax = nullptr;
            if (colAmax != nullptr) {
                *colAmax = torch::zeros({in.size(1)}, in.options().dtype(torch::kFloat));
                amax = colAmax->data_ptr<float>();
            }
            kernels::float8QuantizeRows(in.data_ptr(), kernelType(in), in.size(0), in.size(1), e5m2, static_cast<uint8_t *>(q.data_ptr()),
                                        scale.data_ptr<float>(), streamOf(in), amax);
        } else {
            const auto [low, high] = torch::aminmax(in); // max |t| without a copy of |t|
            scale = scaleOf(torch::maximum(low.neg(), high), e5m2 ? kE5m2Max : kE4m3Max).reshape({1});
            kernels::float8QuantizeWithScale(in.data_ptr(), kernelType(in), in.numel(), e5m2, scale.data_ptr<float>(), static_cast<uint8_t *>(q.data_ptr()),
                                             streamOf(in));
        }
        return {q, scale};
    }
#endif
    (void)colAmax;
    const auto amax = perRow ? t.abs().amax({1}, /*keepdim=*/true) : t.abs().amax();
    auto scale = scaleOf(amax, e5m2 ? kE5m2Max : kE4m3Max);
    if (!perRow)
        scale = scale.reshape({1});
    const auto values = t.to(torch::kFloat) / (perRow ? scale : scale.expand({t.size(0), 1}));
    return {native ? compat::toFloat8(values, e5m2) : roundToFloat8(values, e5m2), scale};
}

// t^T [cols, rows] as scaled(t.t().contiguous(), perRow, ...) gives it (per row of t^T: per
// column of t, over t's rows), cast straight into the transposed layout by the kernel, with no
// 16-bit or fp32 transposed copy: per row from `colAmax` (scaled's column maxima of t), per tensor
// from t's own maximum. Where the kernel does not take t (or colAmax is undefined, per row), the
// contiguous transpose is scaled.
Scaled scaledTransposed(const torch::Tensor &t, const torch::Tensor &colAmax, bool perRow, bool e5m2, bool native)
{
#if defined(PB_WITH_CUDA_KERNELS) && PB_TORCH_AT_LEAST(2, 5)
    if (castByKernel(t, native) && (!perRow || colAmax.defined())) {
        const auto in = kernelInput(t);
        const int64_t rows = in.size(0), cols = in.size(1);
        if (kernels::float8TransposedCastFits(in.data_ptr(), rows, cols)) {
            auto q = torch::empty({cols, rows}, in.options().dtype(e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn));
            torch::Tensor scale, amax = colAmax;
            if (perRow) {
                scale = torch::empty({cols, 1}, in.options().dtype(torch::kFloat));
            } else {
                const auto [low, high] = torch::aminmax(in);
                amax = torch::maximum(low.neg(), high).to(torch::kFloat).reshape({1});
                scale = scaleOf(amax, e5m2 ? kE5m2Max : kE4m3Max).reshape({1});
            }
            kernels::float8QuantizeColumnsTransposed(in.data_ptr(), kernelType(in), rows, cols, amax.data_ptr<float>(), perRow, e5m2,
                                                     static_cast<uint8_t *>(q.data_ptr()), perRow ? scale.data_ptr<float>() : nullptr, streamOf(in));
            return {q, scale};
        }
    }
#endif
    (void)colAmax;
    return scaled(t.t().contiguous(), perRow, e5m2, native);
}

// a [M, K] times bT [N, K] transposed (both contracted over K), in `outType`.
torch::Tensor matmul(const Scaled &a, const Scaled &bT, at::ScalarType outType, bool native)
{
    const auto scaleB = bT.scale.numel() == 1 ? bT.scale : bT.scale.reshape({1, -1});
    if (native) {
        // A weight gradient goes straight into its fp32 master's dtype; a LibTorch whose row-wise
        // scaling writes bf16 only refuses that once (before any launch), then gets bf16 and a cast.
        static std::atomic<bool> fp32RowwiseRefused {false};
        if (outType == torch::kFloat && a.scale.numel() > 1 && !fp32RowwiseRefused.load()) {
            try {
                return compat::scaledMatmul(a.q, bT.q.t(), a.scale, scaleB, outType);
            } catch (const c10::Error &) {
                fp32RowwiseRefused = true;
            }
        }
        if (outType == torch::kFloat && a.scale.numel() > 1)
            return compat::scaledMatmul(a.q, bT.q.t(), a.scale, scaleB, torch::kBFloat16).to(outType);
        return compat::scaledMatmul(a.q, bT.q.t(), a.scale, scaleB, outType);
    }
    // Emulated: fp32 products of grid values (exact in fp32) accumulated in fp32, then scaled, as
    // _scaled_mm does; autocast must not round the operands or the sum to 16 bits.
    const auto autocastOff = compat::autocastOff(a.q.device().type());
    return (torch::matmul(a.q, bT.q.t()) * a.scale * scaleB).to(outType);
}

// x [..., in] times each of weights[i] [out_i, in] (+ biases[i], empty for none), x cast once for
// all of them: its float8 copy in the forward, its transposed one (rowwise) in the backward.
struct Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, at::TensorList weights,
                                                  at::TensorList biases, int64_t scaling)
    {
        const bool rowwise = static_cast<Fp8Scaling>(scaling) == Fp8Scaling::Rowwise;
        const bool native = fp8Native(x.device());
        const int64_t in = x.size(-1), count = static_cast<int64_t>(weights.size());
        auto shape = x.sizes().vec();
        const auto computeType = compat::autocastEnabled(x.device().type()) ? compat::autocastDtype(x.device().type()) : x.scalar_type();
        const auto x2 = x.reshape({-1, in}).to(computeType);
        const bool trainsWeight = std::any_of(weights.begin(), weights.end(), [](const torch::Tensor &w) { return w.requires_grad(); });
        // Rowwise also takes each column's maximum of X and W as it casts them (where the kernel
        // casts): the scales of X^T for the weights' gradients and of W^T for the input's.
        torch::Tensor colAmaxX;
        const auto xq = scaled(x2, rowwise, false, native, rowwise && trainsWeight ? &colAmaxX : nullptr);
        torch::autograd::variable_list outputs, toSave;
        // For the weights' gradients, tensorwise keeps the float8 input (its scale survives the
        // transpose), rowwise the 16-bit one; frozen weights need neither.
        if (trainsWeight)
            toSave = {rowwise ? x2 : xq.q, xq.scale, colAmaxX};
        else
            toSave = {torch::Tensor(), torch::Tensor(), torch::Tensor()};
        int64_t hasBias = 0;
        for (int64_t i = 0; i < count; ++i) {
            const auto &weight = weights[i];
            TORCH_CHECK(!native || (x2.size(0) % 16 == 0 && in % 16 == 0 && weight.size(0) % 16 == 0), "float8 matmuls need multiples of 16: ", x2.size(0), " x ",
                        in, " x ", weight.size(0));
            torch::Tensor colAmaxW;
            auto y = matmul(xq, scaled(weight, rowwise, false, native, rowwise ? &colAmaxW : nullptr), computeType, native);
            if (biases[i].numel() > 0) {
                y = y + biases[i].to(computeType);
                hasBias |= int64_t {1} << i;
            }
            shape.back() = weight.size(0);
            outputs.push_back(y.view(shape));
            toSave.push_back(weight);
            toSave.push_back(colAmaxW);
        }
        ctx->save_for_backward(toSave);
        ctx->saved_data["scaling"] = scaling;
        ctx->saved_data["has_bias"] = hasBias;
        ctx->set_materialize_grads(false);
        return outputs;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const int64_t count = static_cast<int64_t>(grads.size()), hasBias = ctx->saved_data["has_bias"].toInt();
        const bool rowwise = static_cast<Fp8Scaling>(ctx->saved_data["scaling"].toInt()) == Fp8Scaling::Rowwise;
        const bool native = fp8Native(saved[3].device());
        const bool e5m2 = !rowwise; // tensorwise: gradients in e5m2's wider range
        torch::Tensor gx;
        Scaled xT;
        torch::autograd::variable_list gw(count), gb(count);
        const int64_t in = saved[3].size(1);
        std::vector<int64_t> shape;
        for (int64_t i = 0; i < count; ++i) {
            if (!grads[i].defined())
                continue;
            const auto &weight = saved[3 + 2 * i];
            const int64_t out = weight.size(0);
            const auto g = grads[i].reshape({-1, out});
            shape = grads[i].sizes().vec();
            // dX = sum of dY W: dY scaled per row over the outputs, W^T per row over the outputs as well.
            torch::Tensor colAmaxG;
            const auto gq = scaled(g, rowwise, e5m2, native, rowwise && weight.requires_grad() ? &colAmaxG : nullptr);
            const auto part = matmul(gq, scaledTransposed(weight, saved[4 + 2 * i], rowwise, false, native), g.scalar_type(), native);
            gx = gx.defined() ? gx.add_(part) : part;
            if (weight.requires_grad()) {
                // dW = dY^T X, contracted over the tokens: both re-scaled along them (rowwise), or the
                // forward's float8 X and the gradient's e5m2 values transposed with their scales; in
                // the weight's own dtype (an fp32 master's, with no 16-bit copy between). X^T is
                // cast once for every weight.
                if (!xT.q.defined())
                    xT = rowwise ? scaledTransposed(saved[0], saved[2], true, false, native) : Scaled {saved[0].t().contiguous(), saved[1]};
                const Scaled gT = rowwise ? scaledTransposed(g, colAmaxG, true, false, native) : Scaled {gq.q.t().contiguous(), gq.scale};
                gw[i] = matmul(gT, xT, weight.scalar_type(), native);
            }
            if ((hasBias >> i) & 1)
                gb[i] = g.sum(0);
        }
        if (gx.defined()) {
            shape.back() = in;
            gx = gx.view(shape);
        }
        return groupGradients(gx, gw, gb);
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

std::pair<torch::Tensor, torch::Tensor> float8QuantizeTransposed(const torch::Tensor &t, bool perRow, bool e5m2)
{
    const bool native = fp8Native(t.device());
    torch::Tensor colAmax;
    if (perRow)
        scaled(t, true, e5m2, native, &colAmax); // the column maxima, as the forward takes them
    const auto s = scaledTransposed(t, colAmax, perRow, e5m2, native);
    return {s.q, s.scale};
}

torch::Tensor fp8Linear(const torch::Tensor &x, const torch::Tensor &weight, const torch::Tensor &bias, Fp8Scaling scaling)
{
    return fp8LinearShared(x, {weight}, {bias}, scaling)[0];
}

std::vector<torch::Tensor> fp8LinearShared(const torch::Tensor &x, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases,
                                           Fp8Scaling scaling)
{
    const auto present = groupBiases("fp8LinearShared", weights, biases);
    return Fp8LinearFunction::apply(x, at::TensorList(weights), at::TensorList(present), static_cast<int64_t>(scaling));
}

} // namespace pb
