#pragma once
// Internal to the engine (includes torch). A training step captured once as a CUDA graph and then
// replayed: its few thousand kernel launches become one, where the step's shapes stay the same.
// The step must read nothing back to the host while captured (the fused loss's count, clipping's
// divisor and the optimizer's rate stay on the device: GradClip.h, TrainingOptimizer::stepOnDevice).
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <stdexcept>

namespace pb {

class StepGraph {
public:
    // What capture() throws when the capture itself failed (the warm-ups' own errors pass as they are).
    struct CaptureFailed : std::runtime_error {
        using std::runtime_error::runtime_error;
    };

    explicit StepGraph(const torch::Device &device);
    ~StepGraph();
    StepGraph(const StepGraph &) = delete;
    StepGraph &operator=(const StepGraph &) = delete;

    // Whether this build can capture on `device`: a CUDA build and a CUDA device.
    static bool supported(const torch::Device &device);

    // Runs `step` `warmups` times on a side stream (as PyTorch's capture recipe does, so lazily made
    // state and library workspaces exist before the capture), then captures one more call of it.
    // What the captured call allocates lives in the graph's own memory pool from then on (the
    // allocator's cached blocks are released first, so the step's memory is not held twice).
    // Throws CaptureFailed where the step did something a capture cannot hold (a host read, a
    // pageable copy), with no graph kept and the device left usable, so the caller can go on
    // without one.
    void capture(const std::function<void()> &step, int warmups);
    // The captured step again, on the current stream (tensors the step read are read again: copy
    // new inputs into them first).
    void replay();

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

} // namespace pb
