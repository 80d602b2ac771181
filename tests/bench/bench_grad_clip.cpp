// Gradient clipping on the gradients of a Llama-3.1-8B-width model (LAYERS layers, default 8, the
// embeddings and head untied, vocabulary VOCAB, default 128256 on a GPU), in one run: LibTorch's
// C++ torch::nn::utils::clip_grad_norm_ (a norm and a multiply per parameter) against the
// engine's multi-tensor norm and scale (its path for optimizers other than fused AdamW) and the
// norm alone (fused AdamW's path, whose kernel applies the scale). Prints each one's mean time over
// the repeats, the ratios, and that the clipped gradients agree.
//   bench_grad_clip [--device cuda:0] [--layers N] [--vocab N] [--repeats N]
#include "engine/GradClip.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<torch::Tensor> parameters(int layers, int64_t vocab, const torch::Device &device)
{
    const int64_t hidden = 4096, kv = 1024, ffn = 14336;
    std::vector<std::vector<int64_t>> shapes {{vocab, hidden}, {vocab, hidden}, {hidden}};
    for (int l = 0; l < layers; ++l)
        for (std::vector<int64_t> s : {std::vector<int64_t> {hidden, hidden}, {kv, hidden}, {kv, hidden}, {hidden, hidden}, {ffn, hidden}, {ffn, hidden}, {hidden, ffn}, {hidden}, {hidden}})
            shapes.push_back(s);
    std::vector<torch::Tensor> params;
    for (const auto &s : shapes) {
        auto p = torch::zeros(s, torch::TensorOptions().device(device)).requires_grad_();
        p.mutable_grad() = torch::randn(s, torch::TensorOptions().device(device)) * 1e-3;
        params.push_back(p);
    }
    return params;
}

void sync(const torch::Device &device)
{
    if (device.is_cuda())
        torch::cuda::synchronize();
}

} // namespace

int main(int argc, char **argv)
{
    std::string deviceName = torch::cuda::is_available() ? "cuda:0" : "cpu";
    // The CPU default is smaller: five copies of a full 8-layer set do not fit a small host.
    int layers = torch::cuda::is_available() ? 8 : 1, repeats = 10;
    int64_t vocab = torch::cuda::is_available() ? 128256 : 8192;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--device"))
            deviceName = argv[i + 1];
        else if (!std::strcmp(argv[i], "--layers"))
            layers = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--vocab"))
            vocab = std::atoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--repeats"))
            repeats = std::atoi(argv[i + 1]);
    }
    const torch::Device device(deviceName);
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> params = parameters(layers, vocab, device);
    std::vector<torch::Tensor> original;
    for (const auto &p : params)
        original.push_back(p.grad().clone());
    auto restore = [&] {
        for (size_t i = 0; i < params.size(); ++i)
            params[i].mutable_grad().copy_(original[i]);
    };
    const double maxNorm = 1.0; // below the norm, so both scale every gradient
    auto time = [&](auto &&clip, double *norm) {
        double total = 0;
        for (int r = 0; r <= repeats; ++r) {
            restore();
            sync(device);
            const auto t0 = std::chrono::steady_clock::now();
            *norm = clip();
            sync(device);
            if (r > 0) // the first is the warm-up
                total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        return total / repeats;
    };
    double libtorchNorm = 0, oursNorm = 0;
    const double libtorchMs = time([&] { return torch::nn::utils::clip_grad_norm_(params, maxNorm); }, &libtorchNorm);
    std::vector<torch::Tensor> libtorchGrads;
    for (const auto &p : params)
        libtorchGrads.push_back(p.grad().clone());
    const double oursMs = time([&] { const double n = pb::totalGradNorm(params); pb::scaleGradients(params, pb::clipScale(n, maxNorm)); return n; }, &oursNorm);
    std::vector<torch::Tensor> oursGrads;
    for (const auto &p : params)
        oursGrads.push_back(p.grad().clone());
    double normOnly = 0;
    const double normMs = time([&] { return pb::totalGradNorm(params); }, &normOnly);
    for (size_t i = 0; i < params.size(); ++i)
        params[i].mutable_grad().copy_(oursGrads[i]);
    double worst = 0;
    for (size_t i = 0; i < params.size(); ++i)
        worst = std::max(worst, (params[i].grad() - libtorchGrads[i]).abs().max().item<double>() / std::max(1e-30, libtorchGrads[i].abs().max().item<double>()));
    std::printf("grad clip, %d layers of 8B widths (%zu tensors) on %s: LibTorch clip_grad_norm_ %.2f ms; multi-tensor norm and scale %.2f ms (%.2fx); "
                "norm alone, the scale folded into fused AdamW, %.2f ms (%.2fx)\n",
                layers, params.size(), deviceName.c_str(), libtorchMs, oursMs, libtorchMs / oursMs, normMs, libtorchMs / normMs);
    std::printf("norms %.9g vs %.9g (relative %.2e); clipped gradients differ by at most %.2e of their largest\n", libtorchNorm, oursNorm,
                std::abs(libtorchNorm - oursNorm) / libtorchNorm, worst);
    return std::abs(libtorchNorm - oursNorm) / libtorchNorm < 1e-5 && worst < 1e-5 ? 0 : 1;
}
