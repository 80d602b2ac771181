#include "engine/Optimizer.h"

#include "engine/GradClip.h"

#include "engine/TorchCompat.h"
#include "util/Errors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <unordered_map>

namespace pb {

void TrainingOptimizer::zeroGrad()
{
    // Dropping the gradients (set_to_none) frees their memory between steps, as PyTorch 2 does.
    for (auto &p : m_params)
        p.mutable_grad() = torch::Tensor();
}

void TrainingOptimizer::stepOnDevice(const torch::Tensor &, const torch::Tensor &, const torch::Tensor &)
{
    throw std::logic_error("stepOnDevice: the " + path() + " optimizer steps with host values");
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
                tensors.push_back(it->second.to(m_params[i].device(), m_params[i].scalar_type())); // the caller's freshly read tensor: no second copy
            }
        }
        m_restoreTargets.clear(); // what was not filled is dropped; what was is held by m_state
        onRestored();
    }

    torch::Tensor restoreTarget(const std::string &name, c10::IntArrayRef shape, at::ScalarType type) override
    {
        const auto dot = name.rfind('.');
        if (dot == std::string::npos || std::find(m_slots.begin(), m_slots.end(), name.substr(0, dot)) == m_slots.end())
            return {};
        size_t index = 0;
        try {
            index = std::stoul(name.substr(dot + 1));
        } catch (const std::exception &) {
            return {};
        }
        if (index >= m_params.size())
            return {};
        auto &targets = m_restoreTargets[name.substr(0, dot)];
        if (targets.empty())
            targets = zerosMirroring(m_params, /*zero=*/false);
        const auto &t = targets[index];
        if (t.sizes() != shape || t.scalar_type() != type)
            return {};
        return t;
    }

protected:
    std::vector<torch::Tensor> &slot(const std::string &name)
    {
        auto &tensors = m_state[name];
        if (tensors.empty())
            tensors = zerosMirroring(m_params);
        return tensors;
    }
    // A zero state per parameter, shaped as it. Parameters that exactly fill one storage together
    // (ParameterTable's pools: a layer's expert matrices) get their states as views of one
    // allocation laid out the same, so the caching allocator holds one block, not one per expert.
    static std::vector<torch::Tensor> zerosMirroring(const std::vector<torch::Tensor> &params, bool zero = true)
    {
        auto make = [zero](c10::IntArrayRef shape, const torch::Tensor &like) {
            return zero ? torch::zeros(shape, like.options()) : torch::empty(shape, like.options());
        };
        std::unordered_map<const void *, int64_t> covered;
        for (const auto &p : params)
            covered[p.storage().unsafeGetStorageImpl()] += p.numel();
        std::unordered_map<const void *, torch::Tensor> shared;
        std::vector<torch::Tensor> out;
        for (const auto &p : params) {
            const void *key = p.storage().unsafeGetStorageImpl();
            const int64_t storageNumel = static_cast<int64_t>(p.storage().nbytes()) / static_cast<int64_t>(p.element_size());
            if (covered[key] == p.numel() || covered[key] != storageNumel) {
                out.push_back(make(p.sizes(), p));
                continue;
            }
            auto &base = shared[key];
            if (!base.defined())
                base = make({storageNumel}, p);
            out.push_back(base.as_strided(p.sizes(), p.strides(), p.storage_offset()));
        }
        return out;
    }
    virtual void onRestored() {}

    OptimizerConfig m_config;
    std::vector<std::string> m_slots;
    std::map<std::string, std::vector<torch::Tensor>> m_state;
    std::map<std::string, std::vector<torch::Tensor>> m_restoreTargets;
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

    void doStep(double lr, double gradScale) override
    {
        torch::NoGradGuard noGrad;
        ++m_step;
        auto &m = slot("exp_avg");
        auto &v = slot("exp_avg_sq");
#if PB_TORCH_AT_LEAST(2, 1)
        if (m_fused) {
            syncStepTensors();
            auto [params, grads, ms, vs, steps] = fusedLists(m, v);
            // Like torch.optim's _fused_adamw, the counters are advanced before the kernel, which
            // only reads them for the bias corrections (a counter left at 0 divides by zero).
            at::_foreach_add_(steps, 1);
            // The kernel divides each gradient by grad_scale (AMP's unscale): clipping in the same pass.
            std::optional<torch::Tensor> divisor;
            if (gradScale != 1.0)
                divisor = torch::full({}, 1.0 / gradScale, torch::TensorOptions().dtype(torch::kFloat32).device(params.front().device()));
            at::_fused_adamw_(params, grads, ms, vs, {}, steps, lr, m_config.beta1, m_config.beta2, m_config.weightDecay, m_config.eps,
                              /*amsgrad=*/false, /*maximize=*/false, divisor, std::nullopt);
            return;
        }
#endif
        scaleGradients(m_params, gradScale);
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

    bool stepsOnDevice() const override { return m_fused && compat::kDeviceSideAdamW; }

    void stepOnDevice(const torch::Tensor &lr, const torch::Tensor &divisor, const torch::Tensor &skip) override
    {
        if (!stepsOnDevice())
            return TrainingOptimizer::stepOnDevice(lr, divisor, skip);
        if (m_step == 0 || m_stepTensors.empty())
            throw std::logic_error("stepOnDevice: the state is made by a step() first (not inside a graph)");
        torch::NoGradGuard noGrad;
        auto [params, grads, ms, vs, steps] = fusedLists(slot("exp_avg"), slot("exp_avg_sq"));
        // As doStep's counters, advanced only where the step is taken (the kernel itself skips).
        const auto taken = skip.neg().add(1);
        at::_foreach_add_(steps, std::vector<torch::Tensor>(steps.size(), taken));
        compat::fusedAdamWDeviceSide(params, grads, ms, vs, steps, lr, m_config.beta1, m_config.beta2, m_config.weightDecay, m_config.eps, divisor, skip);
    }

    void countStep() override { ++m_step; }

private:
    // The fused kernel's lists: the parameters with a gradient, their gradients, moments and counters.
    std::array<std::vector<torch::Tensor>, 5> fusedLists(const std::vector<torch::Tensor> &m, const std::vector<torch::Tensor> &v) const
    {
        std::array<std::vector<torch::Tensor>, 5> lists;
        for (size_t i = 0; i < m_params.size(); ++i) {
            if (!m_params[i].grad().defined())
                continue;
            lists[0].push_back(m_params[i]);
            lists[1].push_back(m_params[i].grad());
            lists[2].push_back(m[i]);
            lists[3].push_back(v[i]);
            lists[4].push_back(m_stepTensors[i]);
        }
        return lists;
    }

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

// SGD, Adagrad and RMSprop are LibTorch's own torch::optim classes, each step's learning rate set
// on their parameter group. They keep per-parameter state under the parameter's TensorImpl
// (compat::optimizerStateKey), made when a step first sees its gradient (Adagrad's when it is
// constructed, as in PyTorch); state() names it by the parameter's position instead,
// "<field>.<index>" like AdamW's slots ("momentum_buffer.3", "step.3"), so a checkpoint restores
// into a process whose tensors live elsewhere.
class TorchOptimOptimizer : public TrainingOptimizer {
public:
    using Fields = std::map<std::string, torch::Tensor>;  // one parameter's state by field name
    using ParamState = torch::optim::OptimizerParamState;

    explicit TorchOptimOptimizer(std::vector<torch::Tensor> params) { m_params = std::move(params); }

    std::string path() const override { return "torch::optim"; }

    void doStep(double lr, double gradScale) override
    {
        scaleGradients(m_params, gradScale);
        for (auto &group : m_optimizer->param_groups())
            group.options().set_lr(lr);
        m_optimizer->step();
        ++m_step;
    }

    std::map<std::string, torch::Tensor> state() override
    {
        std::map<std::string, torch::Tensor> out;
        out["step"] = torch::tensor(m_step, torch::kLong);
        const auto &states = m_optimizer->state();
        for (size_t i = 0; i < m_params.size(); ++i) {
            const auto it = states.find(compat::optimizerStateKey(states, m_params[i]));
            if (it == states.end() || !it->second)
                continue;
            for (const auto &[field, tensor] : fieldsOf(*it->second))
                if (tensor.defined())
                    out[field + "." + std::to_string(i)] = tensor;
        }
        return out;
    }

    void restoreState(const std::map<std::string, torch::Tensor> &state) override
    {
        const auto stepIt = state.find("step");
        TORCH_CHECK(stepIt != state.end(), "optimizer state has no step counter");
        const int64_t steps = stepIt->second.item<int64_t>();
        std::vector<Fields> byParameter(m_params.size());
        for (const auto &[name, tensor] : state) {
            if (name == "step")
                continue;
            const auto dot = name.rfind('.');
            const std::string index = dot == std::string::npos ? std::string() : name.substr(dot + 1);
            const bool isIndex = !index.empty() && index.size() < 10 && std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
            TORCH_CHECK(isIndex && std::stoul(index) < m_params.size(), "optimizer state ", name, " names none of this optimizer's ", m_params.size(), " parameters");
            std::string field = name.substr(0, dot);
            if (field == "momentum") // the hand-written SGD and RMSprop this replaced saved it so
                field = "momentum_buffer";
            byParameter[std::stoul(index)][field] = tensor;
        }
        // All parameters first, so a refused checkpoint leaves this optimizer as it was.
        std::vector<std::unique_ptr<ParamState>> restored;
        for (size_t i = 0; i < m_params.size(); ++i)
            restored.push_back(byParameter[i].empty() ? initialState(m_params[i]) : stateFrom(byParameter[i], i, steps));
        auto &states = m_optimizer->state();
        states.clear();
        for (size_t i = 0; i < m_params.size(); ++i)
            if (restored[i])
                states[compat::optimizerStateKey(states, m_params[i])] = std::move(restored[i]);
        m_step = steps;
    }

protected:
    virtual Fields fieldsOf(const ParamState &state) const = 0;
    // `fields` as this optimizer's state for parameter `index`; a per-parameter step the checkpoint
    // lacks (one from the hand-written optimizers) is `steps`, the steps taken.
    virtual std::unique_ptr<ParamState> stateFrom(Fields fields, size_t index, int64_t steps) const = 0;
    // The state of a parameter the checkpoint has none for: none (made at its first step), or
    // Adagrad's initial one.
    virtual std::unique_ptr<ParamState> initialState(const torch::Tensor &) const { return nullptr; }

    // Removes `field` from `fields`, as a copy on the parameter's device; it must be there with the
    // parameter's shape.
    torch::Tensor take(Fields &fields, const std::string &field, size_t index) const
    {
        const auto it = fields.find(field);
        TORCH_CHECK(it != fields.end(), "optimizer state lacks ", field, ".", index);
        const torch::Tensor &p = m_params[index];
        TORCH_CHECK(it->second.sizes() == p.sizes(), "optimizer state ", field, ".", index, " has the wrong shape");
        torch::Tensor tensor = it->second.to(p.device(), p.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
        fields.erase(it);
        return tensor;
    }
    static int64_t takeStep(Fields &fields, int64_t otherwise)
    {
        const auto it = fields.find("step");
        if (it == fields.end())
            return otherwise;
        const int64_t step = it->second.item<int64_t>();
        fields.erase(it);
        return step;
    }
    static void checkAllTaken(const Fields &fields, size_t index, const char *kind)
    {
        TORCH_CHECK(fields.empty(), "optimizer state ", fields.empty() ? "" : fields.begin()->first, ".", index, " is not state torch::optim::", kind, " keeps");
    }
    static torch::Tensor stepTensor(int64_t step) { return torch::tensor(step, torch::kLong); }

    std::unique_ptr<torch::optim::Optimizer> m_optimizer;
    int64_t m_step = 0;  // steps taken through this object
};

// Dampening 0 and no Nesterov, PyTorch's defaults; weight decay is L2 (added to the gradient).
class SgdOptimizer final : public TorchOptimOptimizer {
public:
    SgdOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params) : TorchOptimOptimizer(std::move(params))
    {
        m_optimizer = std::make_unique<torch::optim::SGD>(m_params, torch::optim::SGDOptions(config.lr).momentum(config.momentum).weight_decay(config.weightDecay));
    }

protected:
    Fields fieldsOf(const ParamState &state) const override
    {
        return {{"momentum_buffer", static_cast<const torch::optim::SGDParamState &>(state).momentum_buffer()}};
    }
    std::unique_ptr<ParamState> stateFrom(Fields fields, size_t index, int64_t) const override
    {
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(take(fields, "momentum_buffer", index));
        checkAllTaken(fields, index, "SGD");
        return state;
    }
};

// No learning-rate decay, a zero initial accumulator (PyTorch's defaults); eps from the config
// (PyTorch's own default is 1e-10).
class AdagradOptimizer final : public TorchOptimOptimizer {
public:
    AdagradOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params) : TorchOptimOptimizer(std::move(params))
    {
        m_optimizer = std::make_unique<torch::optim::Adagrad>(m_params, torch::optim::AdagradOptions(config.lr).eps(config.eps).weight_decay(config.weightDecay));
    }

protected:
    Fields fieldsOf(const ParamState &state) const override
    {
        const auto &s = static_cast<const torch::optim::AdagradParamState &>(state);
        return {{"sum", s.sum()}, {"step", stepTensor(s.step())}};
    }
    std::unique_ptr<ParamState> stateFrom(Fields fields, size_t index, int64_t steps) const override
    {
        auto state = std::make_unique<torch::optim::AdagradParamState>();
        state->sum(take(fields, "sum", index));
        state->step(takeStep(fields, steps));
        checkAllTaken(fields, index, "Adagrad");
        return state;
    }
    std::unique_ptr<ParamState> initialState(const torch::Tensor &p) const override
    {
        // What torch::optim::Adagrad's constructor gives every parameter.
        auto state = std::make_unique<torch::optim::AdagradParamState>();
        state->step(0);
        state->sum(torch::full_like(p.detach(), 0.0, at::MemoryFormat::Preserve));
        return state;
    }
};

// alpha 0.99 (PyTorch's default smoothing constant), not centered; momentum and eps from the config.
class RmsPropOptimizer final : public TorchOptimOptimizer {
public:
    RmsPropOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params) : TorchOptimOptimizer(std::move(params)), m_momentum(config.momentum > 0)
    {
        m_optimizer = std::make_unique<torch::optim::RMSprop>(
            m_params, torch::optim::RMSpropOptions(config.lr).alpha(0.99).eps(config.eps).weight_decay(config.weightDecay).momentum(config.momentum));
    }

protected:
    Fields fieldsOf(const ParamState &state) const override
    {
        const auto &s = static_cast<const torch::optim::RMSpropParamState &>(state);
        return {{"step", stepTensor(s.step())}, {"square_avg", s.square_avg()}, {"momentum_buffer", s.momentum_buffer()}, {"grad_avg", s.grad_avg()}};
    }
    std::unique_ptr<ParamState> stateFrom(Fields fields, size_t index, int64_t steps) const override
    {
        auto state = std::make_unique<torch::optim::RMSpropParamState>();
        state->step(takeStep(fields, steps));
        state->square_avg(take(fields, "square_avg", index));
        if (m_momentum)
            state->momentum_buffer(take(fields, "momentum_buffer", index));
        checkAllTaken(fields, index, "RMSprop");
        return state;
    }

private:
    bool m_momentum;
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
