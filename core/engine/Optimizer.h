#pragma once
// Internal to the engine (includes torch). The optimizer step on the fastest path the build has:
// the fused AdamW kernel of LibTorch 2.x on CUDA, a per-tensor in-place AdamW elsewhere (bounded
// temporaries), torch::optim for SGD, Adagrad and RMSprop. State is exposed by name so a
// checkpoint can save and restore it exactly.
#include "config/RunConfig.h"

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pb {

class TrainingOptimizer {
public:
    virtual ~TrainingOptimizer() = default;
    // One step at learning rate `lr` with every gradient multiplied by `gradScale` first (gradient
    // clipping's factor); the fused AdamW kernel applies it inside, the others scale the gradients.
    void step(double lr, double gradScale = 1.0) { doStep(lr, gradScale); }
    void zeroGrad();
    // Named state tensors ("exp_avg.3", "momentum_buffer.3", "step", ...) for checkpoints; the
    // tensors are the live ones, not copies. restoreState() refuses a name this optimizer does not
    // keep, a missing one it needs, and a shape that differs (c10::Error).
    virtual std::map<std::string, torch::Tensor> state() = 0;
    virtual void restoreState(const std::map<std::string, torch::Tensor> &state) = 0;
    // Where a checkpoint reader should put the state tensor `name` before restoreState() takes it:
    // a view laid out as its parameter's storage (pooled experts' states share one allocation, as
    // in a fresh run), or undefined for a tensor of its own.
    virtual torch::Tensor restoreTarget(const std::string &name, c10::IntArrayRef shape, at::ScalarType type)
    {
        (void)name;
        (void)shape;
        (void)type;
        return {};
    }
    virtual std::string path() const = 0;     // "fused", "per-tensor", "torch::optim" (reported)
    // Whether stepOnDevice() runs here: fused AdamW on CUDA whose kernel takes a tensor rate.
    virtual bool stepsOnDevice() const { return false; }
    // One step in which nothing the host holds changes between steps: the rate `lr`, clipping's
    // divisor (1 / clipScale) and `skip` (1 where the gradients are not finite: no update, the
    // counters kept) are fp32 device scalars; what a CUDA graph of the step captures. Needs the
    // state made by one step() first. The host's count follows with countStep().
    virtual void stepOnDevice(const torch::Tensor &lr, const torch::Tensor &divisor, const torch::Tensor &skip);
    // The host's step count after a stepOnDevice (or its graph's replay) that was taken.
    virtual void countStep() {}
    std::vector<torch::Tensor> &parameters() { return m_params; }

protected:
    virtual void doStep(double lr, double gradScale) = 0;
    std::vector<torch::Tensor> m_params;
};

// Throws InvalidInputError for optimizers the estimator knows but the engine cannot run.
std::unique_ptr<TrainingOptimizer> makeOptimizer(const OptimizerConfig &config, std::vector<torch::Tensor> params);

} // namespace pb
