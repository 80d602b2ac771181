#pragma once
// Plain results of a pilot, shared by the engine, the history, the CLI and the UI (no torch here).
#include "result/MemoryAttribution.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class Phase { Setup, Warmup, Train, Validation, Checkpoint, Done };
enum class Verdict { Fits, DoesNotFit, Failed, Cancelled };

inline const char *toString(Phase phase)
{
    switch (phase) {
    case Phase::Setup: return "setup";
    case Phase::Warmup: return "warmup";
    case Phase::Train: return "train";
    case Phase::Validation: return "validation";
    case Phase::Checkpoint: return "checkpoint";
    case Phase::Done: return "done";
    }
    return "?";
}

inline const char *toString(Verdict verdict)
{
    switch (verdict) {
    case Verdict::Fits: return "fits";
    case Verdict::DoesNotFit: return "does-not-fit";
    case Verdict::Failed: return "failed";
    case Verdict::Cancelled: return "cancelled";
    }
    return "?";
}

// One optimizer step (all micro-batches of it) as measured.
struct StepSample {
    int64_t step = 0;                  // 1-based across warm-up and measured steps
    Phase phase = Phase::Train;
    double stepTimeMs = 0;             // synchronised wall time of the whole step
    double forwardMs = 0;
    double backwardMs = 0;
    double optimizerMs = 0;
    double dataWaitMs = 0;             // time blocked on the loader's prefetch queue
    int64_t allocatedBytes = 0;        // tensor bytes live at the end of the step
    int64_t reservedBytes = 0;         // caching allocator's reserve (CPU: same as allocated)
    int64_t peakAllocatedBytes = 0;    // peak within this step
    int64_t deviceUsedBytes = 0;       // CUDA: total device use (cudaMemGetInfo); CPU: process RSS
    int64_t tokens = 0;                // tokens that counted towards the loss
    double loss = 0;
    double learningRate = 0;
    double gradNorm = 0;
};

struct PhaseMark {
    Phase phase = Phase::Setup;
    int64_t step = 0;                  // first step of the phase
    double startMs = 0;                // since the run began
    double durationMs = 0;
    int64_t peakAllocatedBytes = 0;    // peak within the phase
    int64_t peakDeviceUsedBytes = 0;
};

struct ValidationResult {
    int64_t step = 0;
    double loss = 0;
    int64_t batches = 0;
    double durationMs = 0;
};

struct CheckpointWrite {
    int64_t step = 0;
    std::string path;
    int64_t bytes = 0;
    double writeMs = 0;
};

struct PilotSummary {
    Verdict verdict = Verdict::Failed;
    std::string message;               // why it did not fit / failed / was cancelled
    std::string failedPhase;           // where it stopped, when it did
    int64_t failedStep = 0;
    int64_t measuredSteps = 0;
    double stepTimeMeanMs = 0, stepTimeP50Ms = 0, stepTimeP90Ms = 0, stepTimeP99Ms = 0;
    double stepTimeCv = 0;             // coefficient of variation (stddev / mean)
    double tokensPerSecond = 0;
    std::optional<double> mfu;         // model FLOPs utilisation; null where the peak is unknown (CPU)
    double flopsPerStep = 0;
    int64_t peakAllocatedBytes = 0;
    int64_t peakReservedBytes = 0;
    int64_t peakDeviceUsedBytes = 0;
    std::map<std::string, int64_t> peakAllocatedByPhase;
    std::map<std::string, int64_t> peakDeviceUsedByPhase;
    double dataStallFraction = 0;      // data wait / step time over measured steps
    double validationMs = 0;
    double checkpointWriteMs = 0;
    int64_t checkpointBytes = 0;
    double setupMs = 0;                // model build and data loading
    double totalMs = 0;
    double finalLoss = 0;
    std::optional<MemoryAttribution> memoryAttribution; // one step's peak, by part and site
};

} // namespace pb
