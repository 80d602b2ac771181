#pragma once
// One scaling step, the way both front ends take it: the single-process baseline at the ranks'
// effective batch (or a recorded one reused), then N worker processes of `pilotbench-cli
// scale-worker` (one per GPU, or per CPU share) running the pilot with DDP, ZeRO-2 or FSDP over
// c10d, compared into useful throughput, scaling efficiency, communication time and per-rank peak
// memory. Both runs go to the history, linked; a run that was begun always ends with a verdict.
#include "config/RunConfig.h"
#include "dist/DistributedPilot.h"
#include "dist/ScaleStep.h"
#include "engine/PilotEngine.h"

#include <QJsonObject>
#include <QString>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace pb {

// Set by `scale` in its workers' environment: a worker with it dies with its launcher.
inline constexpr const char *kScaleLauncherPidVariable = "PB_SCALE_LAUNCHER_PID";

struct ScaleRunSetup {
    RunConfig config;
    PilotOptions options;            // the baseline's (device cpu or cuda:0); options.cancel stops everything
    std::string device;              // "cpu" or "cuda"
    std::string strategy;            // "ddp", "zero2" or "fsdp"
    int gpus = 0;
    int threadsPerRank = 0;          // CPU only
    bool bind = true;                // each rank (and the baseline) on its own CPUs where known
    bool overlap = true;             // ddp: all-reduce during backward
    int bucketMb = 25;               // gradient buckets of about this many MiB (ddp, zero2)
    int timeoutSeconds = 900;
    QString dumpDir;
    std::optional<int64_t> baselineRun; // reuse this recorded baseline instead of running one
    QString database;
    QString workerProgram;           // the pilotbench-cli that runs `scale-worker`
    std::atomic<bool> *stop = nullptr; // set on a history write failure (and read as cancel)
};

// What a front end shows while the step runs.
class ScaleRunObserver {
public:
    virtual ~ScaleRunObserver() = default;
    // Milestones: "topology", "warning", "baseline", "worker_started", "error"; `text` is a line for people.
    virtual void note(const QString &name, const QJsonObject &fields, const QString &text) = 0;
    // The baseline's own pilot events (steps, phases); nullptr: not shown.
    virtual PilotObserver *baselineObserver() { return nullptr; }
    // A run entered the history: what follows belongs to it (the baseline's run while the baseline
    // runs, then the scale run), so a front end can name it in its events.
    virtual void runBegun(int64_t /*runId*/) {}
};

struct ScaleRunResult {
    Verdict verdict = Verdict::Failed;
    std::string message;
    int64_t runId = 0;               // the scale run
    int64_t baselineRunId = 0;
    int gradAccumOfBaseline = 0;
    ScaleSummary summary;
    std::string collective;
    QJsonObject json;                // the summary event: toJson(summary) + details + run_id + database
    bool parametersAgree = true;
};

// Throws InvalidInputError for bad input before anything is recorded; afterwards every outcome is
// a verdict in the result (and in the history).
ScaleRunResult runScaleStep(ScaleRunSetup setup, ScaleRunObserver &observer);

// One rank of a data-parallel pilot started by torchrun, srun or any launcher other than `scale`:
// rank 0 records the step in `database` as a run of kind "scale" (its samples live, the world size
// and strategy, and the scaling efficiency against `baselineRun` when one is named: a recorded
// pilot of this config at the ranks' effective batch); the other ranks record nothing.
DistributedPilotResult runLaunchedRank(const RunConfig &config, const PilotOptions &options, const DistributedPilotOptions &dist,
                                       const QString &database, std::optional<int64_t> baselineRun);

} // namespace pb
