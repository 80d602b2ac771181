#include "report/ReportData.h"

#include "config/RunConfigJson.h"
#include "estimate/MemoryEstimator.h"
#include "history/HistoryStore.h"
#include "workflow/DecisionRun.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace pb {
namespace {

// Runs of `kind` for the same config, or that name `parentId` as their baseline (a scaling step's
// baseline is a pilot at N x the gradient accumulation, so its hash differs).
std::vector<RunRecord> relatedRuns(const HistoryStore &store, const QString &kind, const std::string &hash, int64_t parentId)
{
    RunFilter filter;
    filter.kind = kind;
    std::vector<RunRecord> out;
    for (auto &r : store.listRuns(filter)) {
        if (r.configHash == hash || r.parentRunId == parentId)
            out.push_back(std::move(r));
    }
    return out;
}

} // namespace

MemoryEstimate estimateForRun(const RunConfig &config, const RunRecord &run)
{
    const QJsonObject env = run.summary.value(QStringLiteral("environment")).toObject(run.environment);
    const QString device = env.value(QStringLiteral("device")).toString(run.device);
    const std::string torch = env.value(QStringLiteral("torch_version")).toString().toStdString();
    EstimateOptions o;
    o.device = device.startsWith(QLatin1String("cuda")) ? DeviceKind::Cuda : DeviceKind::Cpu;
    o.localCapacityBytes = o.device == DeviceKind::Cuda ? static_cast<int64_t>(env.value(QStringLiteral("device_memory_bytes")).toDouble()) : 0;
    o.deviceName = env.value(QStringLiteral("device_name")).toString().toStdString();
    o.torchVersion = torch;
    if (!torch.empty())
        o.fusedAttentionAvailable = std::atoi(torch.c_str()) >= 2;
    return estimateMemory(config, o);
}

ReportData loadReportData(const HistoryStore &store, int64_t runId, const Catalog &catalog)
{
    ReportData d;
    const auto run = store.findRun(runId);
    if (!run)
        throw InvalidInputError("--run", "no run " + std::to_string(runId) + " in " + store.path().toStdString());
    d.run = *run;
    d.catalog = catalog;
    d.samples = store.samples(runId);
    d.phases = store.phases(runId);
    d.validations = store.validations(runId);
    d.checkpoints = store.checkpoints(runId);
    d.restoreChecks = relatedRuns(store, QStringLiteral("restore-check"), d.run.configHash, d.run.id);
    d.scaleRuns = relatedRuns(store, QStringLiteral("scale"), d.run.configHash, d.run.id);
    for (auto &r : relatedRuns(store, QStringLiteral("decision"), d.run.configHash, d.run.id)) {
        if (r.status == QLatin1String("done") && !r.tags.contains(QStringLiteral("superseded"))) {
            d.decision = std::move(r); // newest first
            break;
        }
    }
    if (d.decision)
        d.decisionStale = decisionStaleness(store, *d.decision, catalog);

    try {
        d.config = runConfigFromJson(d.run.config);
        d.params = countParameters(*d.config);
    } catch (const std::exception &e) {
        d.configError = e.what();
        return d;
    }
    try {
        d.estimate = estimateForRun(*d.config, d.run);
    } catch (const std::exception &e) {
        d.estimateError = e.what();
    }
    try {
        // This run when it is a finished pilot; otherwise (a restore check, a scaling step, a pilot
        // that did not fit) the newest pilot of the same config that did.
        const bool fittingPilot = (d.run.kind == QLatin1String("pilot") || d.run.kind == QLatin1String("watch")) && d.run.verdict == QLatin1String("fits");
        const auto pilot = findPilotEvidence(store, *d.config, catalog, fittingPilot ? std::optional<int64_t>(d.run.id) : std::nullopt);
        d.comparison = compareConfigurations(*d.config, catalog, ComparisonRequest {}, pilot);
        if (d.comparison->recommendedIndex >= 0) {
            const auto &row = d.comparison->rows[static_cast<size_t>(d.comparison->recommendedIndex)];
            d.recommendedPlans = billingPlans(catalog, catalog.card(row.cardId), row.gpus, row.cost.windowHours);
        }
    } catch (const std::exception &e) {
        d.comparisonError = e.what();
        spdlog::warn("report: no comparison for run {}: {}", runId, e.what());
    }
    return d;
}

} // namespace pb
