#include "model/LinearCrossEntropy.h"

#include "engine/TorchCompat.h"
#include "model/FusedOps.h"
#include "estimate/ActivationModel.h"
#include "model/TiedEmbedding.h"

namespace pb {
namespace {

struct LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, torch::Tensor hidden, torch::Tensor weight, torch::Tensor targets, int64_t chunk, double divisor, double softcap,
                                 int64_t rowStride, const c10::intrusive_ptr<TiedHeadGradient> &tied)
    {
        const auto computeType = eagerComputeType(hidden, weight);
        const bool hiddenGrad = hidden.requires_grad(), weightGrad = weight.requires_grad();
        const auto autocastOff = compat::autocastOff(hidden.device().type());
        torch::NoGradGuard noGrad;
        const int64_t n = hidden.size(0), vocab = weight.size(0);
        const int64_t ld = rowStride > 0 ? rowStride : linearCrossEntropyRowStride(vocab, fusedKernelsOn(hidden.device()));
        TORCH_CHECK(ld >= vocab, "linearCrossEntropy: the logits rows' stride ", ld, " is below the vocabulary's ", vocab);
        // Where the rows are padded (a vocabulary not a multiple of 8), the GEMMs take the first
        // `lead` rows of the vocabulary, every dimension then a multiple of 8 as cuBLAS's sm90
        // kernels need (Granite's 49,159 tokens in one GEMM ran sm75 cutlass ones, 63 of a 153 ms
        // step on an H100), and the last few rows in GEMMs of their own, tiny. (Padding a copy of
        // the weight would cost a [V, h] transient where the weight is already in the compute dtype.)
        const int64_t lead = ld != vocab ? vocab / 8 * 8 : vocab, tail = vocab - lead;
        const auto hc = hidden.to(computeType), wc = weight.to(computeType);
        const auto wLead = wc.narrow(0, 0, lead), wTail = wc.narrow(0, lead, tail);
        // The mean's count and 1 / count stay on the device (the kernel reads the factor there): no
        // host read in the step, so it can be captured in a CUDA graph. 1 / count in double, then
        // fp32, as the host computed it before.
        const auto count = targets.ne(-100).sum();
        const auto scale = torch::where(count.gt(0), count.to(torch::kDouble).reciprocal(), torch::zeros({}, count.options().dtype(torch::kDouble))).to(torch::kFloat);
        auto lossSum = torch::zeros({}, hidden.options().dtype(torch::kFloat));
        torch::Tensor gradHidden = hiddenGrad ? torch::empty_like(hc) : torch::Tensor();
        // The first chunk's GEMM writes it (beta 0), so it is never filled with zeros first.
        torch::Tensor gradWeight = !weightGrad ? torch::Tensor()
                                   : n > 0     ? torch::empty(weight.sizes(), weight.options().dtype(torch::kFloat))
                                               : torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat));
        for (int64_t begin = 0; begin < n; begin += chunk) {
            const int64_t len = std::min(chunk, n - begin);
            const auto h = hc.narrow(0, begin, len);
            // The chunk's logits become their own gradient, (softmax - onehot) / count, in place.
            auto logits = ld == vocab ? torch::matmul(h, wc.t()) : torch::empty({len, ld}, hc.options()).narrow(1, 0, vocab);
            auto lLead = logits.narrow(1, 0, lead), lTail = logits.narrow(1, lead, tail);
            if (ld != vocab) {
                at::mm_out(lLead, h, wLead.t());
                if (tail > 0)
                    at::mm_out(lTail, h, wTail.t());
            }
            lossSum += crossEntropyGradInPlace(logits, targets.narrow(0, begin, len), scale, divisor, softcap).sum();
            if (hiddenGrad) {
                auto out = gradHidden.narrow(0, begin, len);
                // The tail's few terms first, then the lead's added inside its GEMM's fp32 sum: one
                // rounding of the tail's small part, none of the whole between the two.
                if (tail > 0) {
                    at::mm_out(out, lTail, wTail);
                    out.addmm_(lLead, wLead);
                } else {
                    at::mm_out(out, logits, wc);
                }
            }
            if (weightGrad) { // accumulated in fp32 by the GEMM, no 16-bit [V, h] product per chunk (where LibTorch can)
                auto gLead = gradWeight.narrow(0, 0, lead); // the whole gradient where nothing is split off
                compat::addMatmulInto(gLead, lLead.t(), h, /*accumulate=*/begin > 0);
                if (tail > 0) {
                    auto gTail = gradWeight.narrow(0, lead, tail);
                    compat::addMatmulInto(gTail, lTail.t(), h, /*accumulate=*/begin > 0);
                }
            }
        }
        const auto mean = lossSum / count; // NaN when every target is ignored, as the eager mean
        const bool shared = tied && weightGrad && gradWeight.scalar_type() == weight.scalar_type();
        if (shared)
            tied->grad = gradWeight;
        ctx->saved_data["shared"] = shared;
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
        // A weight gradient shared with a tied lookup is scaled in place too: the lookup adds its
        // rows into that tensor, which must be the one handed on.
        const bool capturing = compat::streamCapturing(scale);
        const bool unit = !capturing && scale.numel() == 1 && scale.item<double>() == 1.0;
        auto scaled = [&](const torch::Tensor &g, bool inPlace) {
            return unit ? g : capturing || inPlace ? g.mul_(scale.to(g.scalar_type())) : g * scale.to(g.scalar_type());
        };
        torch::Tensor gradHidden, gradWeight;
        if (saved[0].defined())
            gradHidden = scaled(saved[0], false).to(static_cast<at::ScalarType>(ctx->saved_data["hidden_type"].toInt()));
        if (saved[1].defined())
            gradWeight = scaled(saved[1], ctx->saved_data["shared"].toBool()).to(static_cast<at::ScalarType>(ctx->saved_data["weight_type"].toInt()));
        return {gradHidden, gradWeight, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

torch::Tensor linearCrossEntropy(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &targets, int64_t chunkTokens,
                                 const LogitsTransform &transform, int64_t rowStride, const c10::intrusive_ptr<TiedHeadGradient> &tied)
{
    int64_t chunk = chunkTokens;
    if (chunk <= 0) {
        const int64_t c = static_cast<int64_t>(c10::elementSize(eagerComputeType(hidden, weight)));
        const bool kernel = fusedKernelsOn(hidden.device());
        chunk = linearCrossEntropyChunkTokens(hidden.size(0), weight.size(0), linearCrossEntropyBytesPerLogit(c, kernel, transform.softcap > 0), kernel);
    }
    return LinearCrossEntropyFunction::apply(hidden, weight, targets, chunk, transform.divisor, transform.softcap, rowStride, tied);
}

} // namespace pb
