#pragma once
// The arithmetic of one scaling step (no torch, no processes): the baseline config at the same
// effective batch, the summary figures from the ranks' results, and the set-up checks made before
// any worker starts.
#include "config/RunConfig.h"

#include <QJsonObject>
#include <QProcessEnvironment>

#include <string>
#include <vector>

namespace pb {

// One rank's figures as its worker reported them (its result JSON).
struct RankFigures {
    int rank = 0;
    double tokensPerSecond = 0;      // this rank's own tokens
    double stepTimeMeanMs = 0;
    double commMsPerStep = 0;
    int64_t peakAllocatedBytes = 0;
    int64_t optimizerParameters = 0; // parameters whose optimizer state this rank holds
    std::string verdict;
    std::string parameterChecksum;
};

struct ScaleSummary {
    std::string strategy;            // "ddp", "zero2"
    int gpus = 0;
    double baselineTokensPerSecond = 0;
    double tokensPerSecond = 0;      // all ranks together
    double scalingEfficiency = 0;    // tokensPerSecond / (gpus * baselineTokensPerSecond)
    double speedup = 0;              // tokensPerSecond / baselineTokensPerSecond
    double commMsPerStep = 0;        // mean over ranks
    double baselineStepTimeMs = 0;
    double stepTimeMs = 0;           // slowest rank's mean step
    std::vector<int64_t> perRankPeakAllocatedBytes;
    std::vector<int64_t> perRankOptimizerParameters;
    bool parametersAgree = true;     // every rank ended with the same parameter checksum
};

// The single-process run with the ranks' effective batch: same micro-batch (so activation memory
// per device matches the workers'), gradient accumulation times `worldSize`. Throws
// InvalidInputError("--gpus") for worldSize < 1.
RunConfig baselineConfigFor(const RunConfig &workerConfig, int worldSize);

// Throws InvalidInputError naming `where` when a field is missing.
RankFigures rankFiguresFromJson(const QJsonObject &json, const std::string &where);

// Throws InvalidInputError("--gpus") for no ranks and PilotBenchError when the baseline has no
// throughput to compare against.
ScaleSummary summarizeScale(const std::string &strategy, double baselineTokensPerSecond, double baselineStepTimeMs, const std::vector<RankFigures> &ranks);
QJsonObject toJson(const ScaleSummary &summary);

// Obvious set-up mistakes, as sentences: two ranks on one device, NCCL's NVLink multicast not
// switched off on CUDA (our H200 hosts need NCCL_NVLS_ENABLE=0), more CPU threads than cores.
// `environment` is the one the workers get.
std::vector<std::string> scaleWarnings(const std::vector<std::string> &rankDevices, const QProcessEnvironment &environment, int threadsPerRank,
                                       int hostCpus);

} // namespace pb
