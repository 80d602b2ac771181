#pragma once
// Internal to the engine (includes torch): attributes one training step's peak of allocated memory
// to what allocated it. While alive it receives every allocation and free on the device through
// c10's memory-reporting hook (the CUDA caching allocator and the CPU tracking allocator both call
// it, with the allocator's own running total), and keeps a stack of what is running per thread
// through RecordFunction: the model's scopes (pb.attention, pb.mlp, pb.head, ...), the operator,
// and for backward nodes the scope of the forward operator that made them. The same code thus
// measures the CPU build in CI and a CUDA card. Costs host time only: used on a warm-up step.
#include "result/MemoryAttribution.h"

#include <ATen/record_function.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

namespace pb {

class PeakRecorder {
public:
    enum class StepPhase { Forward, Backward, Optimizer };

    // `resident` are the tensors alive before the step with their part (weights, gradients, optimizer
    // state); `allocatedAtStart` is the allocator's count of live bytes now.
    PeakRecorder(const torch::Device &device, int64_t allocatedAtStart, const std::vector<std::pair<torch::Tensor, MemoryPart>> &resident);
    ~PeakRecorder();
    PeakRecorder(const PeakRecorder &) = delete;
    PeakRecorder &operator=(const PeakRecorder &) = delete;

    void setPhase(StepPhase phase);
    // After a backward pass: the live allocations that hold these parameters' .grad are gradients.
    void noteGradients(const std::vector<torch::Tensor> &parameters);
    // Stops recording and attributes the live set at the highest running total seen.
    // `allocatorPeak` is the allocator's own peak statistic for the step: a thread the hook does not
    // see (the CPU loader's batches) can set it between two events; "other" then takes the gap.
    MemoryAttribution finish(int64_t step, int64_t allocatorPeak);

    struct State;

private:
    void uninstall();

    std::shared_ptr<State> m_state;
    at::CallbackHandle m_callback = 0;
    std::unique_ptr<c10::DebugInfoGuard> m_reporter; // set while recording
};

} // namespace pb
