#include "workflow/DecisionRun.h"

#include "catalog/CatalogJson.h"
#include "workflow/CatalogSource.h"
#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"
#include "workflow/RunRecording.h"
#include "util/Errors.h"

#include <QFileInfo>
#include <QJsonArray>

namespace pb {
namespace {

QJsonArray ids(const std::vector<int64_t> &list)
{
    QJsonArray a;
    for (int64_t id : list)
        a.append(static_cast<double>(id));
    return a;
}

// Passed restoration proofs of exactly this config, newest first.
std::vector<int64_t> restoreChecksOf(const HistoryStore &store, const std::string &hash)
{
    RunFilter filter;
    filter.kind = QStringLiteral("restore-check");
    filter.verdict = QStringLiteral("fits");
    std::vector<int64_t> out;
    for (const auto &r : store.listRuns(filter))
        if (r.configHash == hash)
            out.push_back(r.id);
    return out;
}

} // namespace

std::optional<PilotEvidence> findPilotEvidence(const HistoryStore &store, const RunConfig &config, const Catalog &catalog,
                                               std::optional<int64_t> pilotRunId)
{
    if (pilotRunId) {
        const auto run = store.findRun(*pilotRunId);
        if (!run)
            throw InvalidInputError("--run", "no run " + std::to_string(*pilotRunId) + " in " + store.path().toStdString());
        return pilotEvidence(store, *run, catalog);
    }
    if (const auto run = newestMatchingPilot(store, configHash(config)))
        return pilotEvidence(store, *run, catalog);
    return std::nullopt;
}

std::optional<PilotEvidence> findPilotEvidence(const QString &historyPath, const RunConfig &config, const Catalog &catalog,
                                               std::optional<int64_t> pilotRunId)
{
    if (historyPath.isEmpty() || !QFileInfo::exists(historyPath)) {
        if (pilotRunId)
            throw InvalidInputError("--run", "no history database at '" + historyPath.toStdString() + "' to take run " + std::to_string(*pilotRunId) + " from");
        return std::nullopt;
    }
    const HistoryStore store(historyPath, HistoryStore::Access::ReadOnlyWhereNeeded);
    return findPilotEvidence(store, config, catalog, pilotRunId);
}

Comparison decide(const RunConfig &config, const Catalog &catalog, const ComparisonRequest &request, const QString &historyPath,
                  std::optional<int64_t> pilotRunId)
{
    return compareConfigurations(config, catalog, request, findPilotEvidence(historyPath, config, catalog, pilotRunId));
}

QJsonObject decisionJson(const Comparison &c, int rowIndex, const QJsonObject &evidence)
{
    const ComparisonRow &r = c.rows.at(static_cast<size_t>(rowIndex));
    return QJsonObject {
        {QStringLiteral("card"), QString::fromStdString(r.cardId)},
        {QStringLiteral("card_name"), QString::fromStdString(r.cardName)},
        {QStringLiteral("gpus"), r.gpus},
        {QStringLiteral("strategy"), QString::fromLatin1(toString(r.strategy))},
        {QStringLiteral("strategy_reason"), QString::fromStdString(r.strategyReason)},
        {QStringLiteral("term"), QString::fromStdString(r.cost.plan.termId)},
        {QStringLiteral("billing"), QString::fromStdString(r.cost.plan.description)},
        {QStringLiteral("options_cost"), r.cost.optionsCost},
        {QStringLiteral("total_cost"), r.cost.totalCost},
        {QStringLiteral("cost_per_million_tokens"), r.cost.costPerMillionTokens},
        {QStringLiteral("currency"), QString::fromStdString(c.currency)},
        {QStringLiteral("job_hours"), r.cost.jobHours},
        {QStringLiteral("window_hours"), r.cost.windowHours},
        {QStringLiteral("step_time_ms"), r.stepTimeMs},
        {QStringLiteral("step_time_basis"), QString::fromLatin1(toString(r.stepTimeBasis))},
        {QStringLiteral("meets_deadline"), r.meetsDeadline},
        {QStringLiteral("recommended"), r.recommended},
        {QStringLiteral("planned_tokens"), c.plannedTokens},
        // What the window's checkpoint hours rest on, so a recorded decision can be checked later.
        {QStringLiteral("checkpoint_bytes"), static_cast<double>(c.checkpointBytes)},
        {QStringLiteral("checkpoint_write_bytes_per_s"), c.checkpointWriteBytesPerSecond},
        {QStringLiteral("checkpoint_verify_bytes_per_s"), c.checkpointVerifyBytesPerSecond},
        {QStringLiteral("checkpoint_restore_bytes_per_s"), c.checkpointRestoreBytesPerSecond},
        {QStringLiteral("catalog_date"), QString::fromStdString(c.catalogDate)},
        {QStringLiteral("catalog_source"), QString::fromStdString(c.catalogSource)},
        {QStringLiteral("catalog_revision"), QString::fromStdString(c.catalogRevision)},
        {QStringLiteral("recommendation"), QString::fromStdString(c.recommendation)},
        {QStringLiteral("evidence"), evidence},
    };
}

int64_t recordDecision(const QString &historyPath, const RunConfig &config, const Comparison &comparison, int rowIndex)
{
    const int index = rowIndex < 0 ? comparison.recommendedIndex : rowIndex;
    if (index < 0 || index >= static_cast<int>(comparison.rows.size()))
        throw InvalidInputError("decision", rowIndex < 0 ? "there is no recommended configuration to record (nothing fits and meets the deadline)"
                                                         : "row " + std::to_string(rowIndex) + " is not in the comparison");
    const ComparisonRow &row = comparison.rows[static_cast<size_t>(index)];
    if (!row.fits)
        throw InvalidInputError("decision", row.cardId + " x" + std::to_string(row.gpus) + " does not fit: a decision must fit");

    QJsonObject evidence {{QStringLiteral("pilot_run_id"), comparison.pilotRunId ? QJsonValue(static_cast<double>(*comparison.pilotRunId)) : QJsonValue()}};
    std::vector<int64_t> earlier;
    {
        const HistoryStore store(historyPath);
        evidence.insert(QStringLiteral("scale_run_ids"), ids(comparison.scaleRunIds));
        evidence.insert(QStringLiteral("restore_check_run_ids"), ids(restoreChecksOf(store, configHash(config))));
        RunFilter filter;
        filter.kind = QStringLiteral("decision");
        for (const auto &r : store.listRuns(filter))
            if (r.configHash == configHash(config) && !r.tags.contains(QStringLiteral("superseded")))
                earlier.push_back(r.id);
    }
    QJsonObject summary = decisionJson(comparison, index, evidence);
    summary.insert(QStringLiteral("supersedes"), ids(earlier));
    HistoryWriter writer(historyPath);
    RunStart start = runStartFor(config, QStringLiteral("decision"), "catalog");
    start.card = QString::fromStdString(row.cardId);
    start.device = QStringLiteral("%1 x%2").arg(QString::fromStdString(row.cardId)).arg(row.gpus);
    if (comparison.pilotRunId)
        start.parentRunId = *comparison.pilotRunId;
    const int64_t runId = writer.beginRun(start);
    PilotSummary verdict;
    verdict.verdict = row.meetsDeadline ? Verdict::Fits : Verdict::DoesNotFit;
    verdict.message = row.meetsDeadline ? std::string() : "misses the deadline";
    QJsonObject json = summary;
    json.insert(QStringLiteral("verdict"), QString::fromLatin1(toString(verdict.verdict)));
    json.insert(QStringLiteral("message"), QString::fromStdString(verdict.message));
    if (!writer.finishRun(runId, verdict, json) || !writer.flush())
        throw PilotBenchError(ExitCode::Failure, "the decision could not be recorded: " + writer.lastError());
    // Recording again replaces the decision; the old ones stay in the history, marked.
    HistoryStore store(historyPath);
    for (int64_t id : earlier) {
        store.addTag(id, QStringLiteral("superseded"));
        store.setNotes(id, QStringLiteral("superseded by decision run %1").arg(runId));
    }
    return runId;
}

std::optional<RunRecord> currentDecision(const HistoryStore &store, const std::string &hash)
{
    RunFilter filter;
    filter.kind = QStringLiteral("decision");
    filter.status = QStringLiteral("done");
    for (auto &r : store.listRuns(filter)) // newest first
        if (r.configHash == hash && !r.tags.contains(QStringLiteral("superseded")))
            return std::move(r);
    return std::nullopt;
}

std::string decisionStaleness(const HistoryStore &store, const RunRecord &decision, const Catalog &catalog)
{
    std::string why;
    auto add = [&why](const std::string &reason) { why += (why.empty() ? "" : "; ") + reason; };
    const QJsonObject &s = decision.summary;
    const std::string revision = s.value(QStringLiteral("catalog_revision")).toString().toStdString();
    const std::string current = catalogRevision(catalog);
    if (revision.empty()) {
        // Decisions from before the revision was recorded: the catalog's date and source must agree.
        if (s.value(QStringLiteral("catalog_date")).toString().toStdString() != catalog.modelledOn
            || s.value(QStringLiteral("catalog_source")).toString().toStdString() != catalogSourceLabel(catalog))
            add("it was made on the catalog of " + s.value(QStringLiteral("catalog_date")).toString().toStdString() + " (" + s.value(QStringLiteral("catalog_source")).toString().toStdString()
                          + "); the one in force is of " + catalog.modelledOn + " (" + catalogSourceLabel(catalog) + ")");
    } else if (revision != current) {
        add("the catalog changed since it was made (revision " + revision + ", now " + current + ")");
    }
    const QJsonValue pilot = s.value(QStringLiteral("evidence")).toObject().value(QStringLiteral("pilot_run_id"));
    if (const auto newest = newestMatchingPilot(store, decision.configHash); newest && newest->id > decision.id)
        add("pilot run " + std::to_string(newest->id) + " measured the config since" + (pilot.isDouble() ? " (it rests on run " + std::to_string(pilot.toInt()) + ")" : std::string(" (it rests on no pilot)")));
    return why;
}

} // namespace pb
