#include "model/Nf4.h"

#include "config/Nf4Format.h"

#include <c10/util/accumulate.h>

#ifdef PB_WITH_CUDA_KERNELS
#include "kernels/Nf4Kernels.h"

#include <c10/cuda/CUDAStream.h>
#endif

namespace pb {
namespace {

// Weights quantised or dequantised per slice: a multiple of the block and of two codes a byte.
constexpr int64_t kSlice = 1 << 20;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

torch::Tensor values(const torch::Device &device)
{
    return torch::tensor(std::vector<float>(kNf4Values.begin(), kNf4Values.end())).to(device);
}

// The slice [start, start + length) of `flat` in fp32 on `device`, zero-padded to whole blocks.
torch::Tensor blockSlice(const torch::Tensor &flat, int64_t start, int64_t length, const torch::Device &device)
{
    auto x = flat.slice(0, start, start + length).to(device, torch::kFloat);
    const int64_t padded = ceilDiv(length, kNf4BlockSize) * kNf4BlockSize;
    if (padded != length)
        x = torch::cat({x, torch::zeros({padded - length}, x.options())});
    return x.view({-1, kNf4BlockSize});
}

struct Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x, const torch::Tensor &packed, const torch::Tensor &absmax,
                                 const torch::Tensor &scales, const torch::Tensor &offset, int64_t rows, int64_t cols, int64_t type)
    {
        ctx->save_for_backward({packed, absmax, scales, offset});
        ctx->saved_data["rows"] = rows;
        ctx->saved_data["cols"] = cols;
        ctx->saved_data["type"] = type;
        const auto t = static_cast<at::ScalarType>(type);
        const auto w = nf4Dequantize({packed, absmax, scales, offset, {rows, cols}}, t);
        return torch::nn::functional::linear(x.to(t), w);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const auto t = static_cast<at::ScalarType>(ctx->saved_data["type"].toInt());
        const auto w = nf4Dequantize({saved[0], saved[1], saved[2], saved[3], {ctx->saved_data["rows"].toInt(), ctx->saved_data["cols"].toInt()}}, t);
        auto gx = grads[0].to(t).matmul(w);
        return {gx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

Nf4Storage nf4Allocate(const std::vector<int64_t> &shape, const torch::Device &device)
{
    const auto parts = nf4Tensors({}, c10::multiply_integers(shape));
    const auto on = torch::TensorOptions().device(device);
    return {torch::empty({parts[0].numel}, on.dtype(torch::kUInt8)), torch::empty({parts[1].numel}, on.dtype(torch::kChar)),
            torch::empty({parts[2].numel}, on.dtype(torch::kFloat)), torch::empty({parts[3].numel}, on.dtype(torch::kFloat)), shape};
}

void nf4Quantize(const torch::Tensor &weight, Nf4Storage &s)
{
    torch::NoGradGuard noGrad;
    const auto device = s.packed.device();
    const auto flat = weight.reshape({-1});
    const int64_t numel = flat.numel();
    TORCH_CHECK(numel == s.packed.numel() * 2 || numel == s.packed.numel() * 2 - 1, "NF4 storage of ", s.packed.numel(), " bytes cannot hold ", numel, " weights");
    const int64_t blocks = s.absmax.numel();
    // First pass: every block's maximum, since the double quantisation needs their mean.
    auto maxima = torch::empty({blocks}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    for (int64_t start = 0; start < numel; start += kSlice) {
        const int64_t length = std::min(kSlice, numel - start);
        const auto x = blockSlice(flat, start, length, device);
        maxima.slice(0, start / kNf4BlockSize, start / kNf4BlockSize + x.size(0)).copy_(x.abs().amax(1));
    }
    {
        // The maxima less their mean, in groups of 256 sharing a scale (an all-equal group: scale 1);
        // gone before the second pass.
        const auto offset = maxima.mean();
        const int64_t groups = s.scales.numel();
        auto centred = torch::zeros({groups * kNf4ScaleGroup}, maxima.options());
        centred.slice(0, 0, blocks).copy_(maxima - offset);
        const auto grouped = centred.view({groups, kNf4ScaleGroup});
        auto scales = grouped.abs().amax(1) / 127.0;
        scales = torch::where(scales > 0, scales, torch::ones_like(scales));
        s.absmax.copy_((grouped / scales.unsqueeze(1)).round().clamp(-127, 127).view({-1}).slice(0, 0, blocks).to(torch::kChar));
        s.scales.copy_(scales);
        s.offset.copy_(offset.reshape({1}));
    }
    // Second pass: each weight over its block's true maximum, to the nearest of the 16 values (the
    // midpoints between them as boundaries; a tie goes to the lower value), two codes a byte.
    const auto table = values(device);
    const auto midpoints = (table.slice(0, 0, 15) + table.slice(0, 1, 16)) / 2;
    const auto tiny = std::numeric_limits<float>::min();
    for (int64_t start = 0; start < numel; start += kSlice) {
        const int64_t length = std::min(kSlice, numel - start);
        auto x = blockSlice(flat, start, length, device);
        const auto m = maxima.slice(0, start / kNf4BlockSize, start / kNf4BlockSize + x.size(0)).clamp_min(tiny).unsqueeze(1);
        const auto codes = torch::bucketize(x / m, midpoints, /*out_int32=*/true).view({-1}).slice(0, 0, ceilDiv(length, 2) * 2).view({-1, 2});
        x = torch::Tensor(); // the estimator's scratch: the slice, its quotient and the codes at once, no more
        const auto bytes = (codes.select(1, 0) * 16).add_(codes.select(1, 1)).to(torch::kUInt8);
        s.packed.slice(0, start / 2, start / 2 + bytes.numel()).copy_(bytes);
    }
}

torch::Tensor nf4BlockMaxima(const Nf4Storage &s)
{
    const int64_t blocks = s.absmax.numel();
    const auto scales = s.scales.repeat_interleave(kNf4ScaleGroup).slice(0, 0, blocks);
    return s.absmax.to(torch::kFloat) * scales + s.offset;
}

torch::Tensor nf4Dequantize(const Nf4Storage &s, at::ScalarType type)
{
    torch::NoGradGuard noGrad;
    const int64_t numel = c10::multiply_integers(s.shape);
    auto out = torch::empty({numel}, s.packed.options().dtype(type));
#ifdef PB_WITH_CUDA_KERNELS
    if (s.packed.is_cuda() && (type == at::kFloat || type == at::kBFloat16 || type == at::kHalf)) {
        const auto kernelType = type == at::kFloat ? kernels::Dtype::Float32 : type == at::kBFloat16 ? kernels::Dtype::BFloat16 : kernels::Dtype::Float16;
        kernels::nf4Dequantize(s.packed.data_ptr<uint8_t>(), s.absmax.data_ptr<int8_t>(), s.scales.data_ptr<float>(), s.offset.data_ptr<float>(),
                               out.data_ptr(), kernelType, numel, c10::cuda::getCurrentCUDAStream(s.packed.device().index()).stream());
        return out.view(s.shape);
    }
#endif
    const auto table = values(s.packed.device());
    const auto maxima = nf4BlockMaxima(s);
    for (int64_t start = 0; start < numel; start += kSlice) {
        const int64_t length = std::min(kSlice, numel - start);
        const auto bytes = s.packed.slice(0, start / 2, ceilDiv(start + length, 2));
        const auto codes = torch::stack({bytes.__rshift__(4), bytes.__and__(15)}, 1).view({-1}).slice(0, 0, length).to(torch::kLong);
        const auto m = maxima.slice(0, start / kNf4BlockSize, ceilDiv(start + length, kNf4BlockSize)).repeat_interleave(kNf4BlockSize).slice(0, 0, length);
        out.slice(0, start, start + length).copy_(table.index_select(0, codes) * m);
    }
    return out.view(s.shape);
}

torch::Tensor nf4Linear(const torch::Tensor &x, const Nf4Storage &s, at::ScalarType computeType)
{
    return Nf4LinearFunction::apply(x, s.packed, s.absmax, s.scales, s.offset, s.shape.at(0), s.shape.at(1), static_cast<int64_t>(computeType));
}

} // namespace pb
