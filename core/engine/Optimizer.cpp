#include "engine/Optimizer.h"

#include "engine/TorchCompat.h"
#include "util/Errors.h"

#include <cmath>

namespace pb {

void TrainingOptimizer::zeroGrad()
{
    // Dropping the gradients (set_to_none) frees their memory between steps, as PyTorch 2 does.
    for (auto &p : m_params)
        p.mutable_grad() = torch::Tensor();
}

namespace {

// Per-parameter state tensors, created lazily at the first step (that is when their memory
// appears in a real run, and the estimator models it so).
class StatefulOptimizer : public TrainingOptimizer {
public:
    StatefulOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params, std::vector<std::string> slots)
        : m_config(config), m_slots(std::move(slots))
    {
        m_params = std::move(params);
    }

    std::map<std::string, torch::Tensor> state() override
    {
        std::map<std::string, torch::Tensor> out;
        out["step"] = torch::tensor(m_step, torch::kLong);
        for (const auto &[slot, tensors] : m_state)
            for (size_t i = 0; i < tensors.size(); ++i)
                out[slot + "." + std::to_string(i)] = tensors[i];
        return out;
    }

    void restoreState(const std::map<std::string, torch::Tensor> &state) override
    {
        const auto stepIt = state.find("step");
        TORCH_CHECK(stepIt != state.end(), "optimizer state has no step counter");
        m_step = stepIt->second.item<int64_t>();
        m_state.clear();
        if (m_step == 0)
            return;
        for (const auto &slot : m_slots) {
            auto &tensors = m_state[slot];
            for (size_t i = 0; i < m_params.size(); ++i) {
                const auto it = state.find(slot + "." + std::to_string(i));
                TORCH_CHECK(it != state.end(), "optimizer state lacks ", slot, ".", i);
                TORCH_CHECK(it->second.sizes() == m_params[i].sizes(), "optimizer state ", slot, ".", i, " has the wrong shape");
                tensors.push_back(it->second.to(m_params[i].device(), m_params[i].scalar_type()).clone());
            }
        }
        onRestored();
    }

protected:
    std::vector<torch::Tensor> &slot(const std::string &name)
    {
        auto &tensors = m_state[name];
        if (tensors.empty())
            for (auto &p : m_params)
                tensors.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        return tensors;
    }
    virtual void onRestored() {}
    // Calls update(i, p, g) for each parameter with a gradient, g with the weight decay folded in
    // (L2, as SGD, Adagrad and RMSprop do, unlike AdamW).
    template <typename Update>
    void forEachCoupledGradient(Update update)
    {
        for (size_t i = 0; i < m_params.size(); ++i) {
            auto &p = m_params[i];
            if (p.grad().defined())
                update(i, p, m_config.weightDecay != 0 ? p.grad().add(p, m_config.weightDecay) : p.grad());
        }
    }

    OptimizerConfig m_config;
    std::vector<std::string> m_slots;
    std::map<std::string, std::vector<torch::Tensor>> m_state;
    int64_t m_step = 0;
};

class AdamOptimizer final : public StatefulOptimizer {
public:
    AdamOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params, bool decoupled)
        : StatefulOptimizer(config, std::move(params), {"exp_avg", "exp_avg_sq"}), m_decoupled(decoupled)
    {
        m_fused = compat::hasFusedAdamW() && decoupled && !m_params.empty() && m_params.front().is_cuda();
    }

    std::string path() const override { return m_fused ? "fused" : "per-tensor"; }

    void step(double lr) override
    {
        torch::NoGradGuard noGrad;
        ++m_step;
        auto &m = slot("exp_avg");
        auto &v = slot("exp_avg_sq");
#if PB_TORCH_AT_LEAST(2, 1)
        if (m_fused) {
            std::vector<torch::Tensor> params, grads, ms, vs, steps;
            syncStepTensors();
            for (size_t i = 0; i < m_params.size(); ++i) {
                if (!m_params[i].grad().defined())
                    continue;
                params.push_back(m_params[i]);
                grads.push_back(m_params[i].grad());
                ms.push_back(m[i]);
                vs.push_back(v[i]);
                steps.push_back(m_stepTensors[i]);
            }
            // Like torch.optim's _fused_adamw, the counters are advanced before the kernel, which
            // only reads them for the bias corrections (a counter left at 0 divides by zero).
            at::_foreach_add_(steps, 1);
            at::_fused_adamw_(params, grads, ms, vs, {}, steps, lr, m_config.beta1, m_config.beta2, m_config.weightDecay, m_config.eps,
                              /*amsgrad=*/false, /*maximize=*/false, std::nullopt, std::nullopt);
            return;
        }
#endif
        const double bc1 = 1.0 - std::pow(m_config.beta1, static_cast<double>(m_step));
        const double bc2 = 1.0 - std::pow(m_config.beta2, static_cast<double>(m_step));
        for (size_t i = 0; i < m_params.size(); ++i) {
            auto &p = m_params[i];
            if (!p.grad().defined())
                continue;
            auto g = p.grad();
            if (m_config.weightDecay != 0) {
                if (m_decoupled)
                    p.mul_(1.0 - lr * m_config.weightDecay);
                else
                    g = g.add(p, m_config.weightDecay);
            }
            m[i].mul_(m_config.beta1).add_(g, 1.0 - m_config.beta1);
            v[i].mul_(m_config.beta2).addcmul_(g, g, 1.0 - m_config.beta2);
            auto denom = (v[i].sqrt() / std::sqrt(bc2)).add_(m_config.eps);
            p.addcdiv_(m[i], denom, -lr / bc1);
        }
    }

private:
    // The fused kernel keeps one float step counter per parameter on the device, here at the count
    // of steps already taken (step() advances them before the kernel).
    void syncStepTensors()
    {
        if (m_stepTensors.size() != m_params.size()) {
            m_stepTensors.clear();
            for (auto &p : m_params)
                m_stepTensors.push_back(torch::full({}, static_cast<double>(m_step - 1), torch::TensorOptions().dtype(torch::kFloat).device(p.device())));
        }
    }
    void onRestored() override { m_stepTensors.clear(); }

    bool m_decoupled;
    bool m_fused = false;
    std::vector<torch::Tensor> m_stepTensors;
};

class SgdOptimizer final : public StatefulOptimizer {
public:
    SgdOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params) : StatefulOptimizer(config, std::move(params), {"momentum"}) {}
    std::string path() const override { return "per-tensor"; }
    void step(double lr) override
    {
        torch::NoGradGuard noGrad;
        ++m_step;
        auto *buffers = m_config.momentum > 0 ? &slot("momentum") : nullptr;
        forEachCoupledGradient([&](size_t i, torch::Tensor &p, torch::Tensor g) {
            if (buffers) {
                // PyTorch's SGD: the first step copies the gradient into the buffer.
                if (m_step == 1)
                    (*buffers)[i].copy_(g);
                else
                    (*buffers)[i].mul_(m_config.momentum).add_(g);
                g = (*buffers)[i];
            }
            p.add_(g, -lr);
        });
    }
};

class AdagradOptimizer final : public StatefulOptimizer {
public:
    AdagradOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params) : StatefulOptimizer(config, std::move(params), {"sum"}) {}
    std::string path() const override { return "per-tensor"; }
    void step(double lr) override
    {
        torch::NoGradGuard noGrad;
        ++m_step;
        auto &sums = slot("sum");
        forEachCoupledGradient([&](size_t i, torch::Tensor &p, const torch::Tensor &g) {
            sums[i].addcmul_(g, g, 1.0);
            p.addcdiv_(g, sums[i].sqrt().add_(m_config.eps), -lr);
        });
    }
};

class RmsPropOptimizer final : public StatefulOptimizer {
public:
    RmsPropOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params)
        : StatefulOptimizer(config, std::move(params), config.momentum > 0 ? std::vector<std::string> {"square_avg", "momentum"} : std::vector<std::string> {"square_avg"}) {}
    std::string path() const override { return "per-tensor"; }
    void step(double lr) override
    {
        torch::NoGradGuard noGrad;
        ++m_step;
        constexpr double alpha = 0.99; // PyTorch's RMSprop default smoothing constant
        auto &squares = slot("square_avg");
        auto *buffers = m_config.momentum > 0 ? &slot("momentum") : nullptr;
        forEachCoupledGradient([&](size_t i, torch::Tensor &p, const torch::Tensor &g) {
            squares[i].mul_(alpha).addcmul_(g, g, 1.0 - alpha);
            auto avg = squares[i].sqrt().add_(m_config.eps);
            if (buffers) {
                (*buffers)[i].mul_(m_config.momentum).addcdiv_(g, avg);
                p.add_((*buffers)[i], -lr);
            } else {
                p.addcdiv_(g, avg, -lr);
            }
        });
    }
};

} // namespace

std::unique_ptr<TrainingOptimizer> makeOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params)
{
    switch (config.kind) {
    case OptimizerKind::AdamW: return std::make_unique<AdamOptimizer>(config, std::move(params), true);
    case OptimizerKind::Adam: return std::make_unique<AdamOptimizer>(config, std::move(params), false);
    case OptimizerKind::Sgd: return std::make_unique<SgdOptimizer>(config, std::move(params));
    case OptimizerKind::Adagrad: return std::make_unique<AdagradOptimizer>(config, std::move(params));
    case OptimizerKind::RmsProp: return std::make_unique<RmsPropOptimizer>(config, std::move(params));
    case OptimizerKind::AdamW8bit:
    case OptimizerKind::Adafactor:
        break;
    }
    throw InvalidInputError("train.optimizer", std::string("the engine cannot run '") + toString(config.kind) +
                                                   "' (LibTorch has no such kernel); the estimator models it. Pilot with adamw instead.");
}

} // namespace pb
