#include "engine/GradClip.h"

#include <map>
#include <string>

namespace pb {

double clipGradNorm(const std::vector<torch::Tensor> &params, double maxNorm)
{
    std::map<std::string, std::vector<torch::Tensor>> groups;
    for (const auto &p : params)
        if (p.grad().defined())
            groups[p.grad().device().str() + "/" + std::string(c10::toString(p.grad().scalar_type()))].push_back(p.grad());
    if (groups.empty())
        return 0.0;
    std::vector<torch::Tensor> totals;
    for (auto &[key, grads] : groups)
        totals.push_back(torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat64).norm(2).cpu());
    const double total = torch::stack(totals).norm(2).item<double>();
    const double coef = maxNorm / (total + 1e-6);
    if (coef < 1.0)
        for (auto &[key, grads] : groups)
            at::_foreach_mul_(grads, coef);
    return total;
}

} // namespace pb
