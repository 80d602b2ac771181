#include "workflow/WatchedEvidence.h"

#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "result/StepStatistics.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <cmath>
#include <map>

namespace pb {
namespace {

int worldSizeOf(const RunRecord &r) { return std::max(1, r.summary.value(QStringLiteral("world_size")).toInt(1)); }

RunRecord watchedRun(const HistoryStore &store, int64_t id, const std::string &option)
{
    const auto run = store.findRun(id);
    if (!run)
        throw InvalidInputError(option, "no run " + std::to_string(id) + " in " + store.path().toStdString());
    if (run->kind != QLatin1String("watch"))
        throw InvalidInputError(option, "run " + std::to_string(id) + " is a " + run->kind.toStdString() + " run, not a watched command");
    if (run->status != QLatin1String("done") || (run->verdict != QLatin1String("fits")))
        throw InvalidInputError(option, "run " + std::to_string(id) + " did not finish (verdict '" + run->verdict.toStdString() + "')");
    return *run;
}

} // namespace

std::optional<WatchedScaling> watchedScaling(const HistoryStore &store, const std::string &configHash)
{
    if (configHash.empty())
        return std::nullopt;
    RunFilter filter;
    filter.kind = QStringLiteral("watch");
    filter.verdict = QStringLiteral("fits");
    std::optional<RunRecord> one, many;
    for (auto &r : store.listRuns(filter)) { // newest first
        if (r.configHash != configHash || r.summary.value(QStringLiteral("tokens_per_s")).toDouble() <= 0)
            continue;
        std::optional<RunRecord> &slot = worldSizeOf(r) == 1 ? one : many;
        if (!slot)
            slot = std::move(r);
    }
    if (!one || !many)
        return std::nullopt;
    WatchedScaling w;
    w.singleRunId = one->id;
    w.scaledRunId = many->id;
    w.gpus = worldSizeOf(*many);
    w.tokensPerSecondOne = one->summary.value(QStringLiteral("tokens_per_s")).toDouble();
    w.tokensPerSecondN = many->summary.value(QStringLiteral("tokens_per_s")).toDouble();
    w.efficiency = w.tokensPerSecondN / (w.gpus * w.tokensPerSecondOne);
    return w;
}

QJsonObject WatchedRestore::toJson() const
{
    return {{QStringLiteral("pass"), pass},
            {QStringLiteral("uninterrupted_run_id"), static_cast<double>(uninterruptedRunId)},
            {QStringLiteral("resumed_run_id"), static_cast<double>(resumedRunId)},
            {QStringLiteral("first_resumed_step"), static_cast<double>(firstResumedStep)},
            {QStringLiteral("compared_steps"), static_cast<double>(comparedSteps)},
            {QStringLiteral("max_abs_loss_diff"), maxAbsLossDiff},
            {QStringLiteral("loss_tolerance"), tolerance},
            {QStringLiteral("kind"), QString::fromStdString(kind)},
            {QStringLiteral("reference_run_ids"), [this] {
                 QJsonArray ids;
                 for (int64_t id : referenceRunIds)
                     ids.append(static_cast<double>(id));
                 return ids;
             }()},
            {QStringLiteral("reference_max_abs_loss_diff"), referenceMaxAbsLossDiff},
            {QStringLiteral("envelope_margin"), envelopeMargin},
            {QStringLiteral("checked"), QJsonArray {QStringLiteral("continuation_losses")}},
            {QStringLiteral("source"), QStringLiteral("watched runs")},
            {QStringLiteral("message"), QString::fromStdString(message)}};
}

WatchedRestore compareWatchedRestore(const HistoryStore &store, int64_t uninterruptedRunId, int64_t resumedRunId, double tolerance,
                                     const std::vector<int64_t> &referenceRunIds, double envelopeMargin)
{
    if (!(tolerance >= 0))
        throw InvalidInputError("--loss-tolerance", "must be a number >= 0");
    if (!(envelopeMargin >= 1) || !std::isfinite(envelopeMargin))
        throw InvalidInputError("--envelope-margin", "must be a number of at least 1");
    const RunRecord a = watchedRun(store, uninterruptedRunId, "--uninterrupted-run");
    const RunRecord b = watchedRun(store, resumedRunId, "--resumed-run");
    auto sameConfig = [&a](const RunRecord &r, const std::string &option) {
        if (!a.configHash.empty() && !r.configHash.empty() && a.configHash != r.configHash)
            throw InvalidInputError(option, "runs " + std::to_string(a.id) + " and " + std::to_string(r.id) + " were watched with different configs");
    };
    sameConfig(b, "--resumed-run");
    std::map<int64_t, double> lossA;
    for (const StepSample &s : store.sampleList(a.id))
        lossA[s.step] = s.loss;
    const std::vector<StepSample> resumed = store.sampleList(b.id);
    if (lossA.empty() || resumed.empty())
        throw InvalidInputError(lossA.empty() ? "--uninterrupted-run" : "--resumed-run", "the run reported no steps with losses (is the probe enabled?)");
    WatchedRestore w;
    w.uninterruptedRunId = a.id;
    w.resumedRunId = b.id;
    w.tolerance = tolerance;
    w.envelopeMargin = envelopeMargin;
    w.referenceRunIds = referenceRunIds;
    w.firstResumedStep = resumed.front().step;
    if (w.firstResumedStep <= 1)
        throw InvalidInputError("--resumed-run", "run " + std::to_string(b.id) + " starts at step 1: it did not resume from a checkpoint");
    bool finite = true;
    std::vector<int64_t> compared;
    for (const StepSample &s : resumed) {
        const auto it = lossA.find(s.step);
        if (it == lossA.end() || std::isnan(s.loss) || std::isnan(it->second))
            continue; // a step either run did not report a loss for
        ++w.comparedSteps;
        compared.push_back(s.step);
        finite = finite && std::isfinite(s.loss) && std::isfinite(it->second);
        w.maxAbsLossDiff = std::max(w.maxAbsLossDiff, std::abs(s.loss - it->second));
    }
    // Each reference over the same steps: how far two uninterrupted runs of the job drift apart,
    // every pair of them (A and the references), as the restore proof's envelope.
    std::vector<std::map<int64_t, double>> referenceLosses;
    for (int64_t id : referenceRunIds) {
        const RunRecord r = watchedRun(store, id, "--reference-run");
        sameConfig(r, "--reference-run");
        std::map<int64_t, double> lossR;
        for (const StepSample &s : store.sampleList(r.id))
            lossR[s.step] = s.loss;
        for (int64_t step : compared) {
            const auto it = lossR.find(step);
            if (it == lossR.end() || !std::isfinite(it->second))
                throw InvalidInputError("--reference-run", "run " + std::to_string(id) + " reported no finite loss for step " + std::to_string(step)
                                                               + ", which the resumed run is compared on");
            w.referenceMaxAbsLossDiff = std::max(w.referenceMaxAbsLossDiff, std::abs(it->second - lossA.at(step)));
            for (const auto &other : referenceLosses)
                w.referenceMaxAbsLossDiff = std::max(w.referenceMaxAbsLossDiff, std::abs(it->second - other.at(step)));
        }
        referenceLosses.push_back(std::move(lossR));
    }
    // With references the job says its kernels may vary: a reported loss is a float32 that moves in
    // whole units of its last place, so that unit is the least variation the references can show.
    std::vector<double> comparedLosses;
    for (int64_t step : compared)
        comparedLosses.push_back(lossA.at(step));
    const double envelope = referenceRunIds.empty() ? 0.0 : envelopeMargin * std::max(w.referenceMaxAbsLossDiff, float32Resolution(comparedLosses));
    w.kind = !referenceRunIds.empty() && envelope > tolerance ? "envelope" : tolerance > 0 ? "tolerance" : "bitwise";
    const double allowed = std::max(tolerance, envelope);
    if (w.comparedSteps == 0) {
        w.message = "the runs share no step with a reported loss after the resume (run the uninterrupted job past step " + std::to_string(w.firstResumedStep)
                    + ", and log the loss every step)";
    } else if (!finite) {
        w.message = "a compared loss is not finite";
    } else {
        w.pass = w.maxAbsLossDiff <= allowed;
        auto figure = [](double v) { return QString::number(v, 'g', 3).toStdString(); };
        w.message = (w.pass ? "the resumed job continued like the uninterrupted one: " : "the resumed job diverged: ") + std::to_string(w.comparedSteps)
                    + " steps from step " + std::to_string(w.firstResumedStep) + ", max |loss difference| " + figure(w.maxAbsLossDiff);
        if (w.kind == "envelope")
            w.message += std::string(w.pass ? " (within" : " (outside") + " the kernels' run-to-run variation: " + std::to_string(referenceRunIds.size())
                         + " reference run(s) and the uninterrupted one differ by up to " + figure(w.referenceMaxAbsLossDiff) + ", allowed "
                         + figure(envelope) + ")";
        else
            w.message += " (tolerance " + figure(tolerance) + ")";
    }
    return w;
}

int64_t recordWatchedRestore(const QString &database, const WatchedRestore &restore)
{
    const HistoryStore store(database);
    const RunRecord b = store.run(restore.resumedRunId);
    HistoryWriter writer(database);
    RunStart start;
    start.kind = QStringLiteral("restore-check");
    start.name = b.name;
    start.model = b.model;
    start.device = b.device;
    start.card = b.card;
    start.notes = QLatin1String("");
    start.configJson = b.config;
    start.configHash = b.configHash;
    start.environmentJson = b.environment;
    start.parentRunId = restore.resumedRunId;
    const int64_t id = writer.beginRun(start);
    PilotSummary summary;
    summary.verdict = restore.pass ? Verdict::Fits : Verdict::Failed;
    summary.message = restore.message;
    QJsonObject json = restore.toJson();
    json.insert(QStringLiteral("verdict"), restore.pass ? QStringLiteral("pass") : QStringLiteral("fail"));
    if (!writer.finishRun(id, summary, json) || !writer.flush())
        throw PilotBenchError(ExitCode::Failure, "the comparison could not be recorded: " + writer.lastError());
    return id;
}

} // namespace pb
