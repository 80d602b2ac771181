#pragma once
// The `pilotbench-cli scale-worker` processes of one multi-process run on this host: their
// arguments, environment (rendezvous through a file in the private work folder, NCCL kept on
// loopback, NVLink multicast off) and log files. `scale` and the sharded restore proof start them
// alike. No torch in this header.
#include "dist/WorkerLauncher.h"

#include <QString>
#include <QStringList>

#include <functional>
#include <string>
#include <vector>

namespace pb {

struct ScaleWorkerPlan {
    QString program;                 // the pilotbench-cli to run
    QString configPath;
    std::string device;              // "cpu" or "cuda" (rank r on cuda:r)
    std::string strategy;            // "ddp", "zero2", "fsdp"
    int worldSize = 2;
    int64_t steps = 0, warmupSteps = 0;
    int timeoutSeconds = 900;
    int threadsPerRank = 0;          // CPU only; 0: LibTorch's default
    QString workDir;                 // results rank<R><suffix>.json, logs rank<R><suffix>.log
    QString suffix;                  // tells the launches of one work folder apart
    QStringList extraArguments;      // for every rank
};

// One spec per rank; `perRank(rank)` adds arguments of that rank only.
std::vector<WorkerSpec> scaleWorkerSpecs(const ScaleWorkerPlan &plan, const std::function<QStringList(int rank)> &perRank = {});
QString scaleWorkerResultPath(const ScaleWorkerPlan &plan, int rank);

} // namespace pb
