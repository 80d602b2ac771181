#pragma once
// The restoration proof: run A trains K+M steps uninterrupted; run B trains K steps and writes a
// checkpoint; a fresh process (pilotbench-cli) restores it and trains M more. Every piece of
// restored state must come back bit for bit. The continuation (its M losses and final parameters)
// is set beside A's: where reference runs (more uninterrupted runs from the same start) reproduce A
// bit for bit, so must the continuation; where they do not (non-deterministic kernels: SDPA's and
// atomics-based backward passes on a GPU), the continuation passes inside the variation the
// references show, widened by envelopeMargin. With gpus > 1 each run is N ranks of a strategy (DDP,
// ZeRO-2, FSDP), the checkpoint is sharded, and N fresh processes restore it, every rank compared.
// No torch in this header.
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
    // At most this many uninterrupted runs beside A, the kernels' run-to-run variation; the first
    // that reproduces A bit for bit ends them (deterministic kernels). Two give three pairs: on the
    // H200 one pair's loss spread alone was a third of the resumed run's in two of four proofs.
    int referenceRuns = 2;
    // A resumed run and a pair of uninterrupted runs are draws of the same variation; one pair's
    // spread can be a few times another's, a restore that lost state moves a run by orders of magnitude more.
    double envelopeMargin = 4;
    int testJitterUlps = 0;             // proof tests: every run moves by up to N ulps per step (PilotOptions)
    int testResumeJitterUlps = -1;      // proof tests: the fresh process's own (-1: testJitterUlps)
    int processTimeoutMs = 30 * 60 * 1000;
    const std::atomic<bool> *cancel = nullptr;
};

struct RestoreCheckResult {
    bool pass = false;
    bool bitwise = false;                       // the continuation came back bit for bit
    // "bitwise": the reference runs reproduced A bit for bit, so the continuation had to;
    // "envelope": they did not, and the continuation is judged inside their variation.
    std::string kind = "bitwise";
    int referenceRuns = 0;                      // the references that ran
    double referenceMaxAbsLossDiff = 0;         // the largest |loss difference| of any pair of A and the references
    double referenceParameterDistance = 0;      // the largest relative distance ||x - y|| / ||x|| of such a pair (trainable parameters)
    double parameterDistance = -1;              // the continuation's ||resumed - A|| / ||A|| (-1: not measured)
    double envelopeMargin = 4;
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
