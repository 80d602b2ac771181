#include "workflow/Checklist.h"

#include "history/HistoryStore.h"
#include "workflow/DecisionRun.h"
#include "workflow/FormatEvidence.h"
#include "workflow/WatchedEvidence.h"
#include "util/Units.h"

#include <QCoreApplication>

#include <algorithm>
#include <optional>

namespace pb {
namespace {

QString tr(const char *text) { return QCoreApplication::translate("Checklist", text); }

} // namespace

const char *toString(StageState state)
{
    switch (state) {
    case StageState::Missing: return "missing";
    case StageState::Failed: return "failed";
    case StageState::Passed: return "passed";
    case StageState::Stale: return "stale";
    }
    return "?";
}

const std::vector<StageSpec> &checklistStages()
{
    static const std::vector<StageSpec> specs {
        {QT_TRANSLATE_NOOP("Checklist", "1. Memory budget"),
         QT_TRANSLATE_NOOP("Checklist", "A measured pilot of the config, ours or your own watched command, ran its steps without running out of memory (verdict fits)."),
         {QStringLiteral("pilot"), QStringLiteral("watch")}},
        {QT_TRANSLATE_NOOP("Checklist", "2. One scaling step"),
         QT_TRANSLATE_NOOP("Checklist", "The same job on the next device count measured, with its scaling efficiency (run kind scale, or two watched runs on 1 and N devices)."),
         {QStringLiteral("scale")}},
        {QT_TRANSLATE_NOOP("Checklist", "3. Restoration proof"),
         QT_TRANSLATE_NOOP("Checklist", "A checkpoint restored in a fresh process, every piece of state bit for bit, continued like the uninterrupted run: bit for bit, or inside the kernels' own run-to-run variation where they are not deterministic (run kind restore-check: ours, or your resumed job against its uninterrupted run)."),
         {QStringLiteral("restore-check")}},
        {QT_TRANSLATE_NOOP("Checklist", "4. Term decision"),
         QT_TRANSLATE_NOOP("Checklist", "Cards compared on cost per useful output and a configuration and term chosen and recorded (run kind decision, verdict fits)."),
         {QStringLiteral("decision")}},
    };
    return specs;
}

namespace {

// Why a run of the stage's kind does not pass it; "" when it does.
QString shortfall(int index, const RunRecord &run)
{
    if (run.verdict != QLatin1String("fits"))
        return tr("verdict %1").arg(run.verdict);
    // A scaling step proves something only over several ranks with an efficiency measured against
    // a baseline; a pilot needs steps it was seen to take.
    if (index == 1 && (run.summary.value(QStringLiteral("gpus")).toInt() < 2 || run.summary.value(QStringLiteral("scaling_efficiency")).toDouble() <= 0))
        return tr("measured no scaling efficiency against a one-process baseline (name --baseline-run under torchrun or srun)");
    if (index == 0 && run.summary.value(QStringLiteral("measured_steps")).toDouble() < 1)
        return tr("measured no step");
    return {};
}

QString describe(const RunRecord &run)
{
    const QJsonObject &s = run.summary;
    QString detail;
    if (run.kind == QLatin1String("decision")) {
        const int gpus = s.value(QStringLiteral("gpus")).toInt();
        detail = tr(", %1 x%2%3, %4, %5 %6 per M tokens")
                     .arg(s.value(QStringLiteral("card_name")).toString())
                     .arg(gpus)
                     .arg(gpus > 1 ? QStringLiteral(" ") + s.value(QStringLiteral("strategy")).toString() : QString(), s.value(QStringLiteral("billing")).toString())
                     .arg(s.value(QStringLiteral("cost_per_million_tokens")).toDouble(), 0, 'f', 2)
                     .arg(s.value(QStringLiteral("currency")).toString());
    } else if (s.value(QStringLiteral("scaling_efficiency")).isDouble()) {
        detail = tr(", %1 %2 ranks at scaling efficiency %3")
                     .arg(s.value(QStringLiteral("gpus")).toInt())
                     .arg(s.value(QStringLiteral("strategy")).toString())
                     .arg(s.value(QStringLiteral("scaling_efficiency")).toDouble(), 0, 'f', 3);
    } else if (s.value(QStringLiteral("step_time_p50_ms")).isDouble()) {
        detail = tr(", p50 %1 ms, peak %2")
                     .arg(s.value(QStringLiteral("step_time_p50_ms")).toDouble(), 0, 'f', 1)
                     .arg(formatBytes(static_cast<int64_t>(s.value(QStringLiteral("peak_allocated_bytes")).toDouble()), 1));
    }
    const QString message = s.value(QStringLiteral("message")).toString();
    // The numerical format is part of the evidence: an fp8 pilot says nothing of bf16's memory or speed.
    return tr("Run %1 (%2, %3) on %4, %5: %6%7%8")
        .arg(run.id)
        .arg(run.kind, QString::fromStdString(runPrecision(run)), run.device, run.startedAt.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")), run.verdict, detail,
             message.isEmpty() ? QString() : QStringLiteral(" — ") + message);
}

} // namespace

StageStatus evaluateStage(const HistoryStore &store, int index, const QString &model, const std::string &configHash, const Catalog *catalog)
{
    StageStatus status;
    const StageSpec &spec = checklistStages().at(static_cast<size_t>(index));
    const bool exactConfig = !configHash.empty();
    std::vector<RunRecord> runs; // of the config, newest first
    std::optional<RunRecord> otherConfig;
    for (const QString &kind : spec.kinds) {
        RunFilter filter;
        filter.kind = kind;
        filter.model = model;
        filter.status = QStringLiteral("done");
        for (RunRecord &run : store.listRuns(filter)) {
            // A replaced decision is history, not the stage's evidence.
            if (run.kind == QLatin1String("decision") && run.tags.contains(QStringLiteral("superseded")))
                continue;
            if (!exactConfig || run.configHash == configHash)
                runs.push_back(std::move(run));
            else if (!otherConfig || run.startedAt > otherConfig->startedAt)
                otherConfig = std::move(run);
        }
    }
    // Started-at ties go to the higher id.
    std::sort(runs.begin(), runs.end(), [](const RunRecord &a, const RunRecord &b) { return a.startedAt != b.startedAt ? a.startedAt > b.startedAt : a.id > b.id; });
    // The best evidence: the newest run that passes. Newer runs that did not pass are listed, and a
    // decision passes only while the catalog and the evidence it was made on still hold.
    const auto passing = std::find_if(runs.begin(), runs.end(), [index](const RunRecord &r) { return shortfall(index, r).isEmpty(); });
    QString later;
    for (auto it = runs.begin(); it != passing && it != runs.end(); ++it)
        later += (later.isEmpty() ? QString() : QStringLiteral(", ")) + tr("run %1 (%2)").arg(it->id).arg(shortfall(index, *it));
    if (passing != runs.end()) {
        status.state = StageState::Passed;
        status.runId = passing->id;
        status.evidence = describe(*passing);
        if (!later.isEmpty())
            status.evidence += tr(" Later, not passing and not replacing it: %1.").arg(later);
        if (index == 3 && catalog) {
            const std::string why = decisionStaleness(store, *passing, *catalog);
            if (!why.empty()) {
                status.state = StageState::Stale;
                status.evidence = tr("Out of date: %1; compare again and record the decision. ").arg(QString::fromStdString(why)) + status.evidence;
            }
        }
        return status;
    }
    // Two watched runs of the config, on one device and over N ranks, are a scaling step too.
    if (index == 1) {
        if (const auto w = watchedScaling(store, configHash)) {
            status.state = StageState::Passed;
            status.runId = w->scaledRunId;
            status.evidence = tr("Watched runs %1 (one device, %2 tokens/s) and %3 (%4 ranks, %5 tokens/s): scaling efficiency %6")
                                  .arg(w->singleRunId)
                                  .arg(w->tokensPerSecondOne, 0, 'f', 0)
                                  .arg(w->scaledRunId)
                                  .arg(w->gpus)
                                  .arg(w->tokensPerSecondN, 0, 'f', 0)
                                  .arg(w->efficiency, 0, 'f', 3);
            return status;
        }
    }
    if (runs.empty()) {
        const QString kinds = spec.kinds.join(QStringLiteral(" or "));
        status.evidence = exactConfig ? tr("No %1 run of this exact config recorded yet.").arg(kinds)
                                      : tr("No %1 run recorded for %2 yet.").arg(kinds, model.isEmpty() ? tr("any model") : model);
        if (otherConfig)
            status.evidence += tr(" (Run %1 is of another config of %2: it does not count.)").arg(otherConfig->id).arg(model);
        return status;
    }
    const RunRecord &newest = runs.front();
    status.runId = newest.id;
    status.state = StageState::Failed;
    const QString why = shortfall(index, newest);
    status.evidence = newest.verdict == QLatin1String("fits") ? tr("Run %1 (%2) %3.").arg(newest.id).arg(newest.kind, why) : describe(newest);
    if (runs.size() > 1)
        status.evidence += tr(" No run of this config passed (%1 tried).").arg(runs.size());
    return status;
}

std::vector<StageStatus> evaluateChecklist(const HistoryStore &store, const QString &model, const std::string &configHash, const Catalog *catalog)
{
    std::vector<StageStatus> out;
    for (int i = 0; i < kChecklistStages; ++i)
        out.push_back(evaluateStage(store, i, model, configHash, catalog));
    return out;
}

} // namespace pb
