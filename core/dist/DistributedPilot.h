#pragma once
// One rank of a data-parallel pilot: the engine's pilot with this rank's data shard, parameters
// broadcast from rank 0 and gradients averaged over c10d (Gloo on CPU, NCCL on CUDA where the
// build has it) after the last micro-batch of every step; with zero2 each rank also keeps and
// steps the optimizer state of its own share of the parameters only. No torch in this header.
#include "dist/Rendezvous.h"
#include "engine/PilotEngine.h"

#include <QJsonObject>

#include <string>
#include <vector>

namespace pb {

struct DistributedPilotOptions {
    Rendezvous rendezvous;
    std::string strategy = "ddp";    // "ddp", or "zero2" (optimizer state and gradients divided among ranks)
    int timeoutSeconds = 600;        // store rendezvous and every collective
    int64_t bucketBytes = 25 << 20;  // gradients are flattened into buckets of about this size
    bool overlap = true;             // ddp: all-reduce each bucket during backward as it completes
    std::string parameterDumpPath;   // non-empty: all parameters as little-endian float32, model order
};

struct DistributedPilotResult {
    PilotRun run;
    std::string strategy;
    Rendezvous rendezvous;
    std::string collective;          // "gloo", "nccl", or "none" (single process)
    std::string collectiveVersion;
    double commMsPerStep = 0;        // mean exposed communication per measured step (not hidden behind backward)
    bool overlap = false;            // buckets were all-reduced during backward
    double broadcastMs = 0;
    int64_t gradientBytesPerStep = 0;
    int64_t optimizerParameters = 0; // parameters this rank's optimizer updates (and keeps state for)
    double parameterSum = 0;         // float checksums: compared within a tolerance across runs
    double parameterAbsSum = 0;
    int64_t parameterCount = 0;
    std::string cpuAffinity;         // this process's allowed CPUs, e.g. "0-3,8"
    int64_t pid = 0;
    std::vector<StepSample> samples; // every step, warm-up included
};

// Throws InvalidInputError for input it cannot run (bad device, rendezvous variables) and
// PilotBenchError(Failure) when the rendezvous fails; failures inside steps (a peer that died)
// come back as verdict "failed" with the message, like any pilot failure.
DistributedPilotResult runDistributedPilot(const RunConfig &config, PilotOptions options, const DistributedPilotOptions &distOptions,
                                           PilotObserver *observer = nullptr);

// The summary, the rank's figures and its "steps" (each as the pilot's step event).
QJsonObject toJson(const DistributedPilotResult &result);
// The "steps" of a worker result back as samples (for the history of the scaled run).
std::vector<StepSample> stepSamplesFromJson(const QJsonObject &result);

// The CPUs sched_getaffinity allows this process, as a list like "0-3,8".
std::string cpuAffinityList();
// Refuses a strategy other than ddp, zero2 or fsdp (InvalidInputError on --strategy), and a sharding
// strategy under fp16-mixed (on train.precision).
void checkStrategy(const std::string &strategy, const RunConfig &config);
// The NCCL library's version ("2.27.7") in a build with NCCL; empty otherwise.
std::string ncclLibraryVersion();

} // namespace pb
