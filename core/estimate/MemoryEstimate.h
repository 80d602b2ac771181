#pragma once
// What the estimator answers: the per-device peak of the whole run (construction, the training
// step, validation, checkpoint writes) with a named breakdown,
// the phase that sets it, whether it fits a card with headroom, and the largest micro-batch that
// does. Plain data; estimateMemory() in MemoryEstimator.h fills it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class DeviceKind { Cpu, Cuda };
enum class ParallelStrategy { None, Ddp, Fsdp, Zero1, Zero2, Zero3 };

const char *toString(ParallelStrategy strategy);
std::optional<ParallelStrategy> parseStrategy(const std::string &name);

// One measured pilot against its estimate; the history stores these, the estimator applies them.
struct CalibrationResidual {
    std::string backend;             // "cpu", "cuda", "rocm"
    std::string torchVersion;        // e.g. "1.13.0", "2.5.1"
    std::string device;              // device name as captured (e.g. "NVIDIA H200", "cpu")
    int64_t predictedBytes = 0;      // raw estimate of the peak allocated tensor bytes
    int64_t measuredBytes = 0;       // the pilot's measured peak allocated
    std::string configHash;
    // Device used beyond the allocator's reserve at the peak (context, library handles); unset
    // where the pilot could not tell (no device-used reading).
    std::optional<int64_t> frameworkBytes;
};

struct EstimateOptions {
    DeviceKind device = DeviceKind::Cuda;
    std::string card;                // catalog id; empty with DeviceKind::Cpu or a local device
    int64_t localCapacityBytes = 0;  // a local device's capacity when `card` is empty (0: unknown)
    std::string deviceName;          // matches CalibrationResidual::device ("" : any)
    std::string torchVersion;        // matches CalibrationResidual::torchVersion ("" : any)
    int gpus = 1;
    ParallelStrategy strategy = ParallelStrategy::None;
    double headroomFraction = 0.10;
    // Whether scaled_dot_product_attention exists (LibTorch >= 2.0). Unset: true on CUDA, false
    // on CPU (the Debian LibTorch 1.13 build).
    std::optional<bool> fusedAttentionAvailable;
    int64_t ddpBucketBytes = 25LL * 1024 * 1024;
    // DDP all-reduces each bucket as the backward fills it (the engine's default): its flat buckets
    // over every trainable gradient are made once and held from the first step on. False
    // (scale --no-overlap): they are made for the reduce after the backward and dropped after it.
    bool ddpOverlap = true;
    std::vector<CalibrationResidual> calibration;
};

// Bytes by what holds them, at the peak.
struct MemoryBreakdown {
    int64_t frozenWeights = 0;
    int64_t trainableWeights = 0;    // includes autocast's cached low-precision copies
    int64_t gradients = 0;           // includes DDP buckets
    int64_t optimizer = 0;           // states and the step's temporaries
    int64_t activations = 0;         // saved for backward, transients, gathered FSDP parameters
    int64_t logits = 0;              // logits, their fp32 copy, log-softmax and its gradient
    int64_t blasWorkspaces = 0;      // cuBLAS/cuBLASLt workspaces held by the caching allocator
    int64_t workspace = 0;           // GEMM workspace, allocator rounding and fragmentation
    int64_t framework = 0;           // device context and library handles

    int64_t weights() const { return frozenWeights + trainableWeights; }
    // What the allocator's peak statistic counts.
    int64_t tensors() const { return weights() + gradients + optimizer + activations + logits + blasWorkspaces; }
    int64_t total() const { return tensors() + workspace + framework; }
};

struct PhasePeak {
    std::string phase;               // "construction", "forward", "backward", "optimizer", "validation", "checkpoint"
    MemoryBreakdown breakdown;
};

struct MemoryEstimate {
    std::string card;                // catalog id, or "cpu" / "cuda:N" for a local device
    int gpus = 1;
    ParallelStrategy strategy = ParallelStrategy::None;
    int64_t peakAllocatedBytes = 0;  // tensor peak: what the allocator's peak statistic measures
    int64_t totalBytes = 0;          // device peak: tensors + workspace + framework
    std::optional<int64_t> calibratedPeakAllocatedBytes;
    std::optional<int64_t> calibratedTotalBytes;
    double calibrationRatio = 1.0;   // median measured/predicted of the matching residuals
    int calibrationSamples = 0;
    MemoryBreakdown breakdown;       // at the peak phase
    std::string peakPhase;
    std::vector<PhasePeak> phases;   // the whole run: construction, the step's forward, backward, optimizer, validation, checkpoint
    int64_t capacityBytes = 0;       // 0: unknown (CPU)
    int64_t usableBytes = 0;         // capacity less headroom
    bool fits = true;
    std::string refusal;             // why the run cannot run on this card at any size (fp8 on an A100); "" otherwise
    int64_t maxMicroBatch = 0;       // 0: not even micro-batch 1 fits; -1: capacity unknown
    double flopsPerStep = 0;         // model FLOPs of one optimizer step (all micro-batches, this device)
    double hardwareFlopsPerStep = 0; // plus recomputation's extra forward
    double bytesMovedPerStep = 0;
    std::vector<std::string> assumptions;
    // What each decoder block keeps for its backward (without recompute; one micro-batch, this
    // device's kernels): the peak recorder's per-layer figures check it (--memory-snapshot).
    std::vector<int64_t> savedPerBlock;
};

} // namespace pb
