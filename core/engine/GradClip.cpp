#include "engine/GradClip.h"

#include <algorithm>
#include <map>
#include <string>

namespace pb {
namespace {

// _foreach ops take tensors of one device and dtype.
std::map<std::string, std::vector<torch::Tensor>> gradientsByDeviceAndDtype(const std::vector<torch::Tensor> &params)
{
    std::map<std::string, std::vector<torch::Tensor>> groups;
    for (const auto &p : params)
        if (p.grad().defined())
            groups[p.grad().device().str() + "/" + std::string(c10::toString(p.grad().scalar_type()))].push_back(p.grad());
    return groups;
}

// The float64 2-norm of each device-and-dtype group's gradients, on that group's device.
std::vector<torch::Tensor> groupNorms(const std::vector<torch::Tensor> &params)
{
    std::vector<torch::Tensor> totals;
    for (auto &[key, grads] : gradientsByDeviceAndDtype(params))
        totals.push_back(torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat64).norm(2));
    return totals;
}

} // namespace

double totalGradNorm(const std::vector<torch::Tensor> &params)
{
    std::vector<torch::Tensor> totals = groupNorms(params);
    for (auto &t : totals)
        t = t.cpu();
    return totals.empty() ? 0.0 : torch::stack(totals).norm(2).item<double>();
}

torch::Tensor totalGradNormOnDevice(const std::vector<torch::Tensor> &params)
{
    const std::vector<torch::Tensor> totals = groupNorms(params);
    TORCH_CHECK(totals.empty() || std::all_of(totals.begin(), totals.end(), [&](const torch::Tensor &t) { return t.device() == totals.front().device(); }),
                "totalGradNormOnDevice: gradients on more than one device");
    return totals.empty() ? torch::Tensor() : torch::stack(totals).norm(2);
}

torch::Tensor clipDivisorOnDevice(const torch::Tensor &norm, double maxNorm)
{
    // (A scalar over a tensor is LibTorch's reciprocal times the scalar: a division here, as the host's.)
    const auto coef = torch::scalar_tensor(maxNorm, norm.options()).div(norm + 1e-6).clamp_max(1.0);
    return coef.reciprocal().to(torch::kFloat);
}

double clipScale(double norm, double maxNorm)
{
    const double coef = maxNorm / (norm + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}

void scaleGradients(const std::vector<torch::Tensor> &params, double scale, bool evenByOne)
{
    if (scale == 1.0 && !evenByOne)
        return;
    for (auto &[key, grads] : gradientsByDeviceAndDtype(params))
        at::_foreach_mul_(grads, scale);
}

} // namespace pb
