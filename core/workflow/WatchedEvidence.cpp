#include "workflow/WatchedEvidence.h"

#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
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
            {QStringLiteral("checked"), QJsonArray {QStringLiteral("continuation_losses")}},
            {QStringLiteral("source"), QStringLiteral("watched runs")},
            {QStringLiteral("message"), QString::fromStdString(message)}};
}

WatchedRestore compareWatchedRestore(const HistoryStore &store, int64_t uninterruptedRunId, int64_t resumedRunId, double tolerance)
{
    if (!(tolerance >= 0))
        throw InvalidInputError("--loss-tolerance", "must be a number >= 0");
    const RunRecord a = watchedRun(store, uninterruptedRunId, "--uninterrupted-run");
    const RunRecord b = watchedRun(store, resumedRunId, "--resumed-run");
    if (!a.configHash.empty() && !b.configHash.empty() && a.configHash != b.configHash)
        throw InvalidInputError("--resumed-run", "runs " + std::to_string(a.id) + " and " + std::to_string(b.id) + " were watched with different configs");
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
    w.firstResumedStep = resumed.front().step;
    if (w.firstResumedStep <= 1)
        throw InvalidInputError("--resumed-run", "run " + std::to_string(b.id) + " starts at step 1: it did not resume from a checkpoint");
    bool finite = true;
    for (const StepSample &s : resumed) {
        const auto it = lossA.find(s.step);
        if (it == lossA.end() || std::isnan(s.loss) || std::isnan(it->second))
            continue; // a step either run did not report a loss for
        ++w.comparedSteps;
        finite = finite && std::isfinite(s.loss) && std::isfinite(it->second);
        w.maxAbsLossDiff = std::max(w.maxAbsLossDiff, std::abs(s.loss - it->second));
    }
    if (w.comparedSteps == 0) {
        w.message = "the runs share no step with a reported loss after the resume (run the uninterrupted job past step " + std::to_string(w.firstResumedStep)
                    + ", and log the loss every step)";
    } else if (!finite) {
        w.message = "a compared loss is not finite";
    } else {
        w.pass = w.maxAbsLossDiff <= tolerance;
        w.message = (w.pass ? "the resumed job continued like the uninterrupted one: " : "the resumed job diverged: ") + std::to_string(w.comparedSteps)
                    + " steps from step " + std::to_string(w.firstResumedStep) + ", max |loss difference| " + std::to_string(w.maxAbsLossDiff)
                    + " (tolerance " + std::to_string(tolerance) + ")";
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
