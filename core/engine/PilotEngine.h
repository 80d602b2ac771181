#pragma once
// The staged single-device pilot: build the model -> load data -> warm-up steps (not counted) ->
// measured steps on the longest batches -> validation and checkpoints on their schedules. Runs
// synchronously in the calling thread (the GUI hosts it in a worker QThread, the CLI calls it
// directly) and reports through PilotObserver. No torch in this header.
#include "config/RunConfig.h"
#include "engine/Environment.h"
#include "result/PilotObserver.h"
#include "result/StepStatistics.h"

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class DistributedHooks; // engine/DistributedHooks.h (torch); set by core/dist for multi-process runs

struct PilotOptions {
    std::string device = "cpu";          // "cpu" or "cuda:N"
    int64_t steps = 20;                  // measured optimizer steps
    int64_t warmupSteps = 3;             // not counted in the statistics
    int64_t memoryLimitBytes = 0;        // CPU tensor budget (0: none); beyond it: does-not-fit
    std::string checkpointDir;           // write checkpoints here on the config's schedule
    bool checkpointAtEnd = false;        // also write one after the last step
    std::string resumeFrom;              // restore this checkpoint folder before training
    bool resumeVerified = false;         // resumeFrom's content hashes were just checked (verifyResumePoint)
    std::optional<double> devicePeakFlops; // dense peak FLOP/s of the device, for MFU
    bool parameterChecksum = false;      // SHA-256 of every parameter at the end (restore proof)
    std::string parameterDumpPath;       // non-empty: the trainable parameters at the end as float32 (restore proof)
    // Proof tests only: after each optimizer step every trainable value moves by -N, 0 or +N units in
    // the last place, drawn from an unseeded source: a run that is not reproducible, as with
    // non-deterministic kernels, without touching the run's own random state.
    int testJitterUlps = 0;
    int cpuThreads = 0;                  // 0: LibTorch's default
    bool attributePeak = true;           // attribute one step's peak memory to its parts (engine/PeakRecorder)
    std::string dropStateOnResume;       // proof tests only: leave this piece of state unrestored
    const std::atomic<bool> *cancel = nullptr; // checked between micro-batches
    DistributedHooks *distributed = nullptr;   // null: single process; else this rank's data shard and gradient sync
};

// Checks what can be checked before a model is built: step counts, thread count, the piece named by
// dropStateOnResume, and that checkpointDir is (or can be made) a folder. Throws InvalidInputError
// naming the option, so a bad value never costs a training run.
void checkPilotOptions(const PilotOptions &options);

struct PilotRun {
    PilotSummary summary;
    Environment environment;
    std::string configHash;
    std::string modelRevision;
    std::string dataRevision;
    std::string dataDescription;
    std::string optimizerPath;           // "fused", "per-tensor"
    std::string attentionPath;           // "sdpa", "math", with what the model's traits add ("sdpa; window mask on 40 of 48 layers")
    std::string kernelsPath;             // train.kernels and how it ran: "eager", "fused (CUDA kernels)", "fused (LibTorch ops)"
    std::string numericalFormat;         // train.precision: "bf16-mixed", ...
    std::string stepGraph;               // train.cuda_graph: "captured at step 4, replayed 9 times", or why not (empty without it)
    std::vector<double> losses;          // every step's loss, warm-up included
    std::string parameterChecksum;       // when asked for
    int64_t firstStep = 1;               // > 1 when resumed from a checkpoint
    std::vector<PhaseMark> phases;
    // Digest of each piece of training state (model, optimizer, schedule, rng, data_position,
    // loss_scale) right after a restore, and at the last checkpoint written.
    std::map<std::string, std::string> resumeDigest;
    std::map<std::string, std::string> checkpointDigest;
    double restoreMs = 0;
};

class PilotEngine final {
public:
    PilotEngine();
    ~PilotEngine();
    PilotEngine(const PilotEngine &) = delete;
    PilotEngine &operator=(const PilotEngine &) = delete;

    // Never throws for out-of-memory (verdict does-not-fit) or cancellation; throws
    // InvalidInputError for input it cannot run (bad device, missing data file, ...).
    PilotRun run(const RunConfig &config, const PilotOptions &options, PilotObserver *observer = nullptr);
};

// Model FLOPs of one optimizer step (PaLM convention: 6·N·tokens for full training plus
// 12·layers·hidden·seq per token for attention; frozen weights cost 4·N instead of 6·N).
double modelFlopsPerStep(const RunConfig &config, int64_t tokensPerStep, int64_t seqLen);


} // namespace pb
