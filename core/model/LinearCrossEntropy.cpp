#include "model/LinearCrossEntropy.h"

#include "engine/TorchCompat.h"
#include "model/FusedOps.h"
#include "estimate/ActivationModel.h"

namespace pb {
namespace {

struct LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, torch::Tensor hidden, torch::Tensor weight, torch::Tensor targets, int64_t chunk, double divisor, double softcap,
                                 int64_t rowStride)
    {
        const auto computeType = eagerComputeType(hidden, weight);
        const bool hiddenGrad = hidden.requires_grad(), weightGrad = weight.requires_grad();
        const auto autocastOff = compat::autocastOff(hidden.device().type());
        torch::NoGradGuard noGrad;
        const int64_t n = hidden.size(0), vocab = weight.size(0);
        const int64_t ld = rowStride > 0 ? rowStride : linearCrossEntropyRowStride(vocab, fusedKernelsOn(hidden.device()));
        // Where the cast copies the weight anyway, it copies it into ld rows, the last ones zero, so
        // that every dimension of the three GEMMs is a multiple of 8: cuBLAS's sm90 kernels need it
        // (Granite's 49,159-token vocabulary otherwise ran sm75 cutlass ones, 63 of a 153 ms step on
        // an H100). The padding's logits are h . 0 = 0 and its gradient rows 0, never read. A weight
        // already in the compute dtype is not copied for it (a [V, h] transient); its logits rows
        // alone are padded apart.
        TORCH_CHECK(ld >= vocab, "linearCrossEntropy: the logits rows' stride ", ld, " is below the vocabulary's ", vocab);
        const bool padRows = ld != vocab && weight.scalar_type() != computeType;
        const auto hc = hidden.to(computeType);
        torch::Tensor wc;
        if (padRows) {
            wc = torch::empty({ld, weight.size(1)}, weight.options().dtype(computeType));
            wc.narrow(0, 0, vocab).copy_(weight);
            wc.narrow(0, vocab, ld - vocab).zero_();
        } else {
            wc = weight.to(computeType);
        }
        // The mean's count and 1 / count stay on the device (the kernel reads the factor there): no
        // host read in the step, so it can be captured in a CUDA graph. 1 / count in double, then
        // fp32, as the host computed it before.
        const auto count = targets.ne(-100).sum();
        const auto scale = torch::where(count.gt(0), count.to(torch::kDouble).reciprocal(), torch::zeros({}, count.options().dtype(torch::kDouble))).to(torch::kFloat);
        auto lossSum = torch::zeros({}, hidden.options().dtype(torch::kFloat));
        torch::Tensor gradHidden = hiddenGrad ? torch::empty_like(hc) : torch::Tensor();
        const int64_t rows = wc.size(0);
        // The first chunk's GEMM writes it (beta 0), so it is never filled with zeros first.
        torch::Tensor gradWeight = !weightGrad ? torch::Tensor()
                                   : n > 0     ? torch::empty({rows, weight.size(1)}, weight.options().dtype(torch::kFloat))
                                               : torch::zeros({rows, weight.size(1)}, weight.options().dtype(torch::kFloat));
        for (int64_t begin = 0; begin < n; begin += chunk) {
            const int64_t len = std::min(chunk, n - begin);
            const auto h = hc.narrow(0, begin, len);
            // The chunk's logits become their own gradient, (softmax - onehot) / count, in place;
            // the GEMMs read the rows whole (padding included where the weight is padded).
            auto full = padRows || ld == vocab ? torch::matmul(h, wc.t()) : torch::empty({len, ld}, hc.options()).narrow(1, 0, vocab);
            if (!padRows && ld != vocab)
                at::mm_out(full, h, wc.t());
            auto logits = padRows ? full.narrow(1, 0, vocab) : full;
            lossSum += crossEntropyGradInPlace(logits, targets.narrow(0, begin, len), scale, divisor, softcap).sum();
            if (hiddenGrad) {
                auto out = gradHidden.narrow(0, begin, len);
                at::mm_out(out, full, wc);
            }
            if (weightGrad) // accumulated in fp32 by the GEMM, no 16-bit [V, h] product per chunk (where LibTorch can)
                compat::addMatmulInto(gradWeight, full.t(), h, /*accumulate=*/begin > 0);
        }
        // The weight's rows (contiguous: the padding is the storage's tail, 4 x h bytes).
        if (padRows && weightGrad)
            gradWeight = gradWeight.narrow(0, 0, vocab);
        const auto mean = lossSum / count; // NaN when every target is ignored, as the eager mean
        ctx->save_for_backward({gradHidden, gradWeight});
        ctx->saved_data["hidden_type"] = static_cast<int64_t>(hidden.scalar_type());
        ctx->saved_data["weight_type"] = static_cast<int64_t>(weight.scalar_type());
        return mean;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        const auto saved = ctx->get_saved_variables();
        const auto scale = gradOutputs[0];
        // The loss's gradient is exactly 1 without accumulation or loss scaling: the kept gradients
        // are then handed on as they are, with no pass over the [vocab, hidden] fp32 weight gradient
        // and no second copy of it. (Reading the scalar waits for the forward's kernels: the eager
        // step's one host read before clipping's.)
        // Under CUDA graph capture the scalar cannot be read: the kept gradients are scaled in place
        // (by exactly 1 in a plain step), which costs a pass but no second copy.
        const bool capturing = compat::streamCapturing(scale);
        const bool unit = !capturing && scale.numel() == 1 && scale.item<double>() == 1.0;
        auto scaled = [&](const torch::Tensor &g) { return unit ? g : capturing ? g.mul_(scale.to(g.scalar_type())) : g * scale.to(g.scalar_type()); };
        torch::Tensor gradHidden, gradWeight;
        if (saved[0].defined())
            gradHidden = scaled(saved[0]).to(static_cast<at::ScalarType>(ctx->saved_data["hidden_type"].toInt()));
        if (saved[1].defined())
            gradWeight = scaled(saved[1]).to(static_cast<at::ScalarType>(ctx->saved_data["weight_type"].toInt()));
        return {gradHidden, gradWeight, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

torch::Tensor linearCrossEntropy(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &targets, int64_t chunkTokens,
                                 const LogitsTransform &transform, int64_t rowStride)
{
    int64_t chunk = chunkTokens;
    if (chunk <= 0) {
        const int64_t c = static_cast<int64_t>(c10::elementSize(eagerComputeType(hidden, weight)));
        const bool kernel = fusedKernelsOn(hidden.device());
        chunk = linearCrossEntropyChunkTokens(hidden.size(0), weight.size(0), linearCrossEntropyBytesPerLogit(c, kernel, transform.softcap > 0), kernel);
    }
    return LinearCrossEntropyFunction::apply(hidden, weight, targets, chunk, transform.divisor, transform.softcap, rowStride);
}

} // namespace pb
