#pragma once
// The restoration proof: run A trains K+M steps uninterrupted; run B trains K steps and writes a
// checkpoint; a fresh process (pilotbench-cli) restores it and trains M more. The M losses, the
// final parameters and every piece of restored state are compared. With gpus > 1 each run is N
// ranks of a strategy (DDP, ZeRO-2, FSDP), the checkpoint is sharded, and N fresh processes
// restore it, every rank compared. No torch in this header.
#include "config/RunConfig.h"
#include "engine/PilotEngine.h"

#include <QJsonObject>
#include <QString>

#include <map>
#include <string>
#include <vector>

namespace pb {

struct RestoreCheckOptions {
    std::string device = "cpu";         // with gpus > 1: "cpu" or "cuda" (rank r on cuda:r)
    int gpus = 1;                       // above 1: N scale-worker ranks write and restore a sharded checkpoint
    std::string strategy = "ddp";       // with gpus > 1: ddp, zero2 or fsdp
    int threadsPerRank = 0;             // CPU ranks: threads each (0: LibTorch's default)
    int timeoutSeconds = 1800;          // each launch of the ranks
    int64_t stepsBefore = 4;            // K
    int64_t stepsAfter = 4;             // M
    QString checkpointDir;              // where run B writes (a fresh folder is made inside)
    QString cliPath;                    // the pilotbench-cli that restores in a fresh process
    std::string dropState;              // proof tests: the fresh process leaves this piece unrestored
    int processTimeoutMs = 30 * 60 * 1000;
    const std::atomic<bool> *cancel = nullptr;
};

struct RestoreCheckResult {
    bool pass = false;
    bool bitwise = false;
    std::vector<std::string> checked;           // pieces of state compared
    std::vector<std::string> differing;         // pieces that did not come back identical
    double maxAbsLossDiff = 0;
    std::vector<double> uninterruptedLosses, resumedLosses;
    std::string uninterruptedChecksum, resumedChecksum;
    double checkpointWriteMs = 0, verifyMs = 0, restoreMs = 0, freshProcessMs = 0;
    int64_t checkpointBytes = 0;
    QString checkpointPath;
    int gpus = 1;
    std::string strategy = "none";
    std::string message;
};

// Throws InvalidInputError naming the option for what needs no run to be found wrong.
void checkRestoreCheckOptions(const RestoreCheckOptions &options);
// Throws InvalidInputError for bad input; the verdict is in the result otherwise.
RestoreCheckResult runRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options);
QJsonObject toJson(const RestoreCheckResult &result);

} // namespace pb
