#pragma once
// Internal to the engine (includes torch): what the autograd functions over projections that read
// one input share (model/Fp8Linear.cpp's and model/MixedLinear.cpp's): they take x, the weights,
// the biases (an empty tensor for none) and one number, and their backward returns a gradient for
// each of those.
#include <torch/torch.h>

#include <vector>

namespace pb {

// The biases as those functions take them: an empty tensor (in the weight's options) for none.
// Throws, naming `function`, unless there is a bias (or none) per weight and at most 62 weights
// (their bit masks are int64s).
inline std::vector<torch::Tensor> groupBiases(const char *function, const std::vector<torch::Tensor> &weights, const std::vector<torch::Tensor> &biases)
{
    TORCH_CHECK(!weights.empty() && weights.size() == biases.size() && weights.size() < 63, function, ": a bias (or none) per weight");
    std::vector<torch::Tensor> present;
    for (size_t i = 0; i < weights.size(); ++i)
        present.push_back(biases[i].defined() ? biases[i] : torch::empty({0}, weights[i].options()));
    return present;
}

// Their backward's result: the input's gradient (undefined for none), each weight's, each bias's,
// and none for the number.
inline torch::autograd::variable_list groupGradients(const torch::Tensor &gx, const torch::autograd::variable_list &gw,
                                                     const torch::autograd::variable_list &gb)
{
    torch::autograd::variable_list result {gx};
    result.insert(result.end(), gw.begin(), gw.end());
    result.insert(result.end(), gb.begin(), gb.end());
    result.push_back(torch::Tensor());
    return result;
}

} // namespace pb
