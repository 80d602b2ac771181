#pragma once
// ||actual - reference|| / ||reference|| in float64 (the norm over every element; a zero reference
// reads as 1e-30): the engine tests' distance between a result and the maths it reproduces.
#include <torch/torch.h>

inline double relativeNormError(const torch::Tensor &actual, const torch::Tensor &reference)
{
    const auto a = actual.to(torch::kDouble), r = reference.to(torch::kDouble);
    return ((a - r).norm() / r.norm().clamp_min(1e-30)).item<double>();
}
