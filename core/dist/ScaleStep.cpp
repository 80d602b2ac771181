#include "dist/ScaleStep.h"

#include "util/Errors.h"

#include <QJsonArray>

#include <algorithm>
#include <map>

namespace pb {

RunConfig baselineConfigFor(const RunConfig &workerConfig, int worldSize)
{
    if (worldSize < 1)
        throw InvalidInputError("--gpus", "must be at least 1 (got " + std::to_string(worldSize) + ")");
    RunConfig baseline = workerConfig;
    baseline.train.gradAccum = workerConfig.train.gradAccum * worldSize;
    return baseline;
}

RankFigures rankFiguresFromJson(const QJsonObject &json, const std::string &where)
{
    for (const char *key : {"rank", "tokens_per_s", "step_time_mean_ms", "comm_ms_per_step", "peak_allocated_bytes", "verdict"})
        if (!json.contains(QLatin1String(key)))
            throw InvalidInputError(where, std::string("the worker's result has no '") + key + "'");
    RankFigures f;
    f.rank = json.value(QStringLiteral("rank")).toInt();
    f.tokensPerSecond = json.value(QStringLiteral("tokens_per_s")).toDouble();
    f.stepTimeMeanMs = json.value(QStringLiteral("step_time_mean_ms")).toDouble();
    f.commMsPerStep = json.value(QStringLiteral("comm_ms_per_step")).toDouble();
    f.peakAllocatedBytes = static_cast<int64_t>(json.value(QStringLiteral("peak_allocated_bytes")).toDouble());
    f.optimizerParameters = static_cast<int64_t>(json.value(QStringLiteral("optimizer_parameters")).toDouble());
    f.verdict = json.value(QStringLiteral("verdict")).toString().toStdString();
    f.parameterChecksum = json.value(QStringLiteral("parameter_checksum")).toString().toStdString();
    return f;
}

ScaleSummary summarizeScale(const std::string &strategy, double baselineTokensPerSecond, double baselineStepTimeMs, const std::vector<RankFigures> &ranks)
{
    if (ranks.empty())
        throw InvalidInputError("--gpus", "a scaling step needs at least one rank");
    if (!(baselineTokensPerSecond > 0))
        throw PilotBenchError(ExitCode::Failure, "the single-process baseline measured no throughput; nothing to compare the scaled run against");
    ScaleSummary s;
    s.strategy = strategy;
    s.gpus = static_cast<int>(ranks.size());
    s.baselineTokensPerSecond = baselineTokensPerSecond;
    s.baselineStepTimeMs = baselineStepTimeMs;
    double comm = 0;
    for (const auto &r : ranks) {
        s.tokensPerSecond += r.tokensPerSecond;
        comm += r.commMsPerStep;
        s.stepTimeMs = std::max(s.stepTimeMs, r.stepTimeMeanMs);
        s.perRankPeakAllocatedBytes.push_back(r.peakAllocatedBytes);
        s.perRankOptimizerParameters.push_back(r.optimizerParameters);
        if (r.parameterChecksum != ranks.front().parameterChecksum)
            s.parametersAgree = false;
    }
    s.commMsPerStep = comm / static_cast<double>(ranks.size());
    s.speedup = s.tokensPerSecond / baselineTokensPerSecond;
    s.scalingEfficiency = s.speedup / static_cast<double>(s.gpus);
    return s;
}

QJsonObject toJson(const ScaleSummary &s)
{
    QJsonArray peaks, owned;
    for (int64_t p : s.perRankPeakAllocatedBytes)
        peaks.append(static_cast<double>(p));
    for (int64_t p : s.perRankOptimizerParameters)
        owned.append(static_cast<double>(p));
    return QJsonObject {
        {QStringLiteral("strategy"), QString::fromStdString(s.strategy)},
        {QStringLiteral("gpus"), s.gpus},
        {QStringLiteral("baseline_tokens_per_s"), s.baselineTokensPerSecond},
        {QStringLiteral("tokens_per_s"), s.tokensPerSecond},
        {QStringLiteral("scaling_efficiency"), s.scalingEfficiency},
        {QStringLiteral("speedup"), s.speedup},
        {QStringLiteral("comm_ms_per_step"), s.commMsPerStep},
        {QStringLiteral("baseline_step_time_ms"), s.baselineStepTimeMs},
        {QStringLiteral("step_time_ms"), s.stepTimeMs},
        {QStringLiteral("per_rank_peak_allocated_bytes"), peaks},
        {QStringLiteral("per_rank_optimizer_parameters"), owned},
        {QStringLiteral("parameters_agree"), s.parametersAgree},
    };
}

std::vector<std::string> scaleWarnings(const std::vector<std::string> &rankDevices, const QProcessEnvironment &environment, int threadsPerRank, int hostCpus)
{
    std::vector<std::string> warnings;
    std::map<std::string, size_t> firstRank;
    bool cuda = false;
    for (size_t rank = 0; rank < rankDevices.size(); ++rank) {
        const auto &device = rankDevices[rank];
        if (device.rfind("cuda", 0) != 0)
            continue;
        cuda = true;
        const auto [it, fresh] = firstRank.emplace(device, rank);
        if (!fresh)
            warnings.push_back("ranks " + std::to_string(it->second) + " and " + std::to_string(rank) + " share " + device
                               + ": they compete for one GPU and its memory, so the step measures contention, not scaling");
    }
    if (cuda) {
        const QString nvls = environment.value(QStringLiteral("NCCL_NVLS_ENABLE"));
        if (!environment.contains(QStringLiteral("NCCL_NVLS_ENABLE")))
            warnings.emplace_back("NCCL_NVLS_ENABLE is not set: NCCL may use NVLink multicast (NVLS), which these H200 hosts need off (set NCCL_NVLS_ENABLE=0)");
        else if (nvls.trimmed() != QLatin1String("0"))
            warnings.push_back("NCCL_NVLS_ENABLE=" + nvls.toStdString() + ": NVLink multicast is on; these H200 hosts need NCCL_NVLS_ENABLE=0");
    } else if (threadsPerRank > 0 && hostCpus > 0 && threadsPerRank * static_cast<int>(rankDevices.size()) > hostCpus) {
        warnings.push_back(std::to_string(rankDevices.size()) + " CPU ranks x " + std::to_string(threadsPerRank) + " threads exceed this host's "
                           + std::to_string(hostCpus) + " CPUs: the ranks slow each other down");
    }
    return warnings;
}

} // namespace pb
