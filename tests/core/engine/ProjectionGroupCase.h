#pragma once
// Three projections of one [2, 32, 64] input (64, 16 and 32 outputs; the second without a bias,
// the third's weight frozen) and their bf16 output gradients, drawn in that order from torch's
// generator: the case on which the functions over projections that read one input
// (fp8LinearShared, mixedLinearShared) are checked against the projections one by one.
#include <torch/torch.h>

#include <vector>

struct ProjectionGroupCase {
    explicit ProjectionGroupCase(const torch::Device &device)
    {
        for (size_t i = 0; i < outs.size(); ++i) {
            w0.push_back((torch::randn({outs[i], 64}) * 0.05).to(device));
            b0.push_back(i == 1 ? torch::Tensor() : (torch::randn({outs[i]}) * 0.1).to(device));
            grads.push_back((torch::randn({2, 32, outs[i]}) * 1e-3).to(torch::kBFloat16).to(device));
        }
    }
    // Fresh leaves of the weights (the third frozen) and biases, appended to `w` and `b`.
    void leaves(std::vector<torch::Tensor> &w, std::vector<torch::Tensor> &b) const
    {
        for (size_t i = 0; i < outs.size(); ++i) {
            w.push_back(w0[i].clone().requires_grad_(i != 2));
            b.push_back(b0[i].defined() ? b0[i].clone().requires_grad_(true) : torch::Tensor());
        }
    }
    const std::vector<int64_t> outs {64, 16, 32};
    std::vector<torch::Tensor> w0, b0, grads;
};
