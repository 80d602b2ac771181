#include "workflow/Decision.h"
#include "workflow/CatalogSource.h"
#include "workflow/CheckpointThroughput.h"
#include "workflow/WatchedEvidence.h"
#include "util/FixedText.h"

#include "catalog/CatalogJson.h"
#include "catalog/DeviceMatch.h"
#include "catalog/RentalWindow.h"
#include "config/RunConfigJson.h"
#include "estimate/CardCapacities.h"
#include "estimate/CheckpointBytes.h"
#include "estimate/MemoryEstimator.h"
#include "estimate/ModelStates.h"
#include "history/HistoryStore.h"
#include "util/Errors.h"
#include "util/Units.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pb {
namespace {


std::string firstToken(const std::string &id) { return id.substr(0, id.find('-')); }
std::string lastToken(const std::string &id) { return id.substr(id.rfind('-') + 1); }

// The estimator keeps its own card table whose ids may differ from the catalog's
// ("h200-141gb" vs "h200-sxm-141gb"): same model token and same memory token is the same card.
std::string estimatorCardId(const CardSpec &card)
{
    for (const auto &c : cardCapacities()) {
        if (c.id == card.id)
            return c.id;
    }
    for (const auto &c : cardCapacities()) {
        if (firstToken(c.id) == firstToken(card.id) && lastToken(c.id) == lastToken(card.id))
            return c.id;
    }
    return {};
}

double plannedTokensOf(const RunConfig &config)
{
    const auto &job = config.job;
    const double tokens = job.unit == JobUnit::Tokens ? job.amount : job.amount * job.datasetTokens;
    if (!std::isfinite(job.amount) || job.amount <= 0)
        throw InvalidInputError("job.amount", "must be a positive number of tokens or epochs");
    if (job.unit == JobUnit::Epochs && (!std::isfinite(job.datasetTokens) || job.datasetTokens <= 0))
        throw InvalidInputError("job.dataset_tokens", "must be positive when the job is counted in epochs");
    return tokens;
}

double mean(const std::vector<double> &values)
{
    double sum = 0;
    for (double v : values)
        sum += v;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

QJsonArray stringArray(const std::vector<std::string> &items)
{
    QJsonArray a;
    for (const auto &s : items)
        a.append(QString::fromStdString(s));
    return a;
}

void addUnique(std::vector<std::string> &list, const std::string &text)
{
    if (std::find(list.begin(), list.end(), text) == list.end())
        list.push_back(text);
}

struct StepFigures {
    double stepTimeMs = 0;
    double tokensPerSecond = 0;
    FigureBasis basis = FigureBasis::Modelled;
    std::vector<std::string> assumptions;
};

// No pilot: the estimator's hardware FLOPs and bytes at an assumed share of the card's roofline.
StepFigures modelledFromEstimate(const MemoryEstimate &single, const CardSpec &card, int gpus, double tokensPerStep,
                                 const ComparisonRequest &request)
{
    StepFigures f;
    const double computeS = single.hardwareFlopsPerStep / (card.bf16DenseTflops * 1e12 * request.assumedComputeEfficiency);
    const double bandwidthS = single.bytesMovedPerStep > 0 ? single.bytesMovedPerStep / (card.memoryBandwidthTbps * 1e12 * request.assumedBandwidthEfficiency) : 0.0;
    const double scaling = gpus > 1 ? ProjectionAssumptions {}.defaultScalingEfficiency : 1.0;
    f.stepTimeMs = std::max(computeS, bandwidthS) * 1000.0 / (gpus * scaling);
    f.tokensPerSecond = tokensPerStep / (f.stepTimeMs / 1000.0);
    f.assumptions.push_back("no pilot in the history for this config: step time modelled from the estimator's " + fixed(single.hardwareFlopsPerStep / 1e12, 3)
                            + " TFLOP per step at " + fixed(request.assumedComputeEfficiency * 100, 0) + " % of " + card.name + "'s " + fixed(card.bf16DenseTflops, 0)
                            + " dense BF16 TFLOP/s (and " + fixed(request.assumedBandwidthEfficiency * 100, 0) + " % of its " + fixed(card.memoryBandwidthTbps, 2)
                            + " TB/s when bandwidth binds)");
    if (gpus > 1)
        f.assumptions.push_back("scaling efficiency " + fixed(scaling, 2) + " at " + std::to_string(gpus) + " GPUs assumed (data parallel over " + card.interconnect + ")");
    return f;
}

// Auto: of DDP, ZeRO-1, ZeRO-2 and FSDP, the cheapest that fits with headroom (the earlier on a
// tie, so DDP wins where it fits); when none fits, the one that comes closest, to say how far.
template <typename Candidate>
ComparisonRow chooseStrategy(Candidate &&candidate, int gpus)
{
    const ParallelStrategy order[] {ParallelStrategy::Ddp, ParallelStrategy::Zero1, ParallelStrategy::Zero2, ParallelStrategy::Fsdp};
    std::vector<ComparisonRow> rows;
    for (ParallelStrategy s : order)
        rows.push_back(candidate(gpus, s));
    const ComparisonRow &ddp = rows.front();
    int best = -1;
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const auto &r = rows[static_cast<size_t>(i)];
        if (r.fits && (best < 0 || r.cost.totalCost < rows[static_cast<size_t>(best)].cost.totalCost - 1e-9))
            best = i;
    }
    auto sizeText = [](int64_t bytes) { return formatBytes(bytes, 1).toStdString(); };
    if (best < 0) {
        best = 0;
        for (int i = 1; i < static_cast<int>(rows.size()); ++i)
            if (rows[static_cast<size_t>(i)].headroomBytes > rows[static_cast<size_t>(best)].headroomBytes)
                best = i;
        ComparisonRow row = rows[static_cast<size_t>(best)];
        row.strategyReason = "no strategy fits: even " + std::string(toString(row.strategy)) + " needs " + sizeText(row.peakBytes) + " per GPU of " + sizeText(row.usableBytes) + " usable";
        return row;
    }
    ComparisonRow row = rows[static_cast<size_t>(best)];
    if (row.strategy == ParallelStrategy::Ddp)
        row.strategyReason = "ddp fits (" + sizeText(row.peakBytes) + " of " + sizeText(row.usableBytes) + " usable per GPU) and adds no communication";
    else if (!ddp.fits)
        row.strategyReason = std::string(toString(row.strategy)) + " because ddp needs " + sizeText(ddp.peakBytes) + " per GPU, more than the " + sizeText(ddp.usableBytes)
                             + " usable; " + toString(row.strategy) + " needs " + sizeText(row.peakBytes) + " and adds " + fixed(row.commMsPerStep, 1) + " ms of communication per step";
    else
        row.strategyReason = std::string(toString(row.strategy)) + " costs less than ddp here";
    return row;
}

// exposedCommMs with the config's parameter counts from `counts()`, asked only where there is
// communication (compare counts a large mixture of experts' parameters once, not per row).
template <typename Counts>
double exposedCommMsOf(ParallelStrategy strategy, int gpus, const RunConfig &config, const CardSpec &card, double efficiency, Counts &&counts)
{
    if (gpus <= 1 || card.interconnectGBps <= 0 || efficiency <= 0)
        return 0.0;
    const ParamCounts &params = counts();
    const double share = static_cast<double>(gpus - 1) / gpus;
    const double trainableBytes = static_cast<double>(params.trainable) * static_cast<double>(trainableParamBytes(config.train.precision));
    // FSDP with mixed precision gathers 16-bit copies; without autocast it gathers what it stores.
    const double gatherBytesPerParam = usesAutocast(config.train.precision) ? 2.0 : static_cast<double>(trainableParamBytes(config.train.precision));
    double bytes = 0;
    switch (strategy) {
    case ParallelStrategy::None:
    case ParallelStrategy::Ddp:
        return 0.0;
    case ParallelStrategy::Zero1:
    case ParallelStrategy::Zero2:
        bytes = share * trainableBytes;
        break;
    case ParallelStrategy::Fsdp:
    case ParallelStrategy::Zero3:
        bytes = 2.0 * share * static_cast<double>(params.total) * gatherBytesPerParam;
        break;
    }
    return bytes / (card.interconnectGBps * 1e9 * efficiency) * 1000.0;
}

} // namespace

double exposedCommMs(ParallelStrategy strategy, int gpus, const RunConfig &config, const CardSpec &card, double efficiency)
{
    return exposedCommMsOf(strategy, gpus, config, card, efficiency, [&] { return countParameters(config); });
}

std::optional<RunRecord> newestMatchingPilot(const HistoryStore &store, const std::string &configHash)
{
    // Our own pilot or the user's watched command: whichever measured this config last.
    std::optional<RunRecord> newest;
    for (const char *kind : {"pilot", "watch"}) {
        RunFilter filter;
        filter.kind = QLatin1String(kind);
        for (auto &run : store.listRuns(filter)) {
            // A watched job over several ranks is scaling evidence, not one card's step.
            const bool oneRank = run.summary.value(QStringLiteral("world_size")).toInt(1) <= 1;
            if (run.configHash == configHash && run.status == QLatin1String("done") && run.verdict == QLatin1String("fits") && oneRank
                && run.summary.value(QStringLiteral("step_time_mean_ms")).toDouble() > 0 && run.summary.value(QStringLiteral("flops_per_step")).toDouble() > 0) {
                if (!newest || run.startedAt > newest->startedAt || (run.startedAt == newest->startedAt && run.id > newest->id))
                    newest = std::move(run);
                break; // newest first
            }
        }
    }
    return newest;
}

PilotEvidence pilotEvidence(const HistoryStore &store, const RunRecord &run, const Catalog &catalog)
{
    const std::string where = "--run";
    if (run.kind != QLatin1String("pilot") && run.kind != QLatin1String("watch"))
        throw InvalidInputError(where, "run " + std::to_string(run.id) + " is a " + run.kind.toStdString() + " run, not a pilot or a watched command");
    if (run.kind == QLatin1String("watch") && run.summary.value(QStringLiteral("world_size")).toInt(1) > 1)
        throw InvalidInputError(where, "run " + std::to_string(run.id) + " watched " + std::to_string(run.summary.value(QStringLiteral("world_size")).toInt())
                                           + " ranks: it is scaling evidence, not one card's step (name a single-rank run)");
    const QJsonObject &s = run.summary;
    PilotEvidence e;
    e.runId = run.id;
    e.configHash = run.configHash;
    e.stepTimeMs = s.value(QStringLiteral("step_time_mean_ms")).toDouble();
    e.flopsPerStep = s.value(QStringLiteral("flops_per_step")).toDouble();
    if (e.stepTimeMs <= 0 || e.flopsPerStep <= 0)
        throw InvalidInputError(where, "run " + std::to_string(run.id) + " has no measured step time and FLOPs (verdict '" + run.verdict.toStdString() + "')");
    const double tokensPerSecond = s.value(QStringLiteral("tokens_per_s")).toDouble();
    e.tokensPerStep = tokensPerSecond * e.stepTimeMs / 1000.0;
    if (e.tokensPerStep <= 0) {
        const RunConfig config = runConfigFromJson(run.config);
        e.tokensPerStep = static_cast<double>(config.train.microBatch * config.train.gradAccum * config.train.seqLen);
    }
    e.setupMs = s.value(QStringLiteral("setup_ms")).toDouble();
    e.precision = runPrecision(run);

    std::vector<double> passes;
    for (const auto &v : store.validations(run.id))
        passes.push_back(v.durationMs);
    e.validationPassMs = mean(passes);
    const std::vector<CheckpointWrite> writes = store.checkpoints(run.id);
    for (const auto &c : writes)
        e.checkpointBytes = std::max(e.checkpointBytes, c.bytes);
    e.checkpointWriteBytesPerSecond = checkpointWriteBytesPerSecond(writes);
    if (e.checkpointWriteBytesPerSecond <= 0) {
        // A run without checkpoint rows (imported from an older history) may still carry its
        // summary's mean write and size.
        e.checkpointBytes = static_cast<int64_t>(s.value(QStringLiteral("checkpoint_bytes")).toDouble());
        e.checkpointWriteBytesPerSecond = bytesPerSecond(static_cast<double>(e.checkpointBytes), s.value(QStringLiteral("checkpoint_write_ms")).toDouble());
    }
    if (const auto restore = newestRestoreCheckThroughput(store, run.configHash)) {
        e.restoreCheckRunId = restore->runId;
        e.checkpointVerifyBytesPerSecond = restore->verifyBytesPerSecond;
        e.checkpointRestoreBytesPerSecond = restore->restoreBytesPerSecond;
    }

    const QJsonObject env = s.value(QStringLiteral("environment")).toObject(run.environment);
    const QString device = env.value(QStringLiteral("device")).toString(run.device);
    const bool accelerator = device.startsWith(QLatin1String("cuda")) || device.startsWith(QLatin1String("rocm"));
    e.deviceLabel = accelerator ? env.value(QStringLiteral("device_name")).toString().toStdString()
                    : env.contains(QStringLiteral("cpu"))     ? "cpu (" + env.value(QStringLiteral("cpu")).toString().toStdString() + ")"
                                                              : std::string("cpu");
    if (run.kind == QLatin1String("watch"))
        e.deviceLabel += " (watched command)";
    if (accelerator) {
        DetectedDevice detected;
        detected.backend = device.startsWith(QLatin1String("rocm")) ? SoftwareStack::Rocm : SoftwareStack::Cuda;
        detected.name = env.value(QStringLiteral("device_name")).toString().toStdString();
        detected.memoryBytes = static_cast<int64_t>(env.value(QStringLiteral("device_memory_bytes")).toDouble());
        detected.computeCapability = env.value(QStringLiteral("compute_capability")).toString().toStdString();
        detected.runtimeVersion = env.value(QStringLiteral("cuda_runtime")).toString().toStdString();
        detected.driverVersion = env.value(QStringLiteral("driver_version")).toString().toStdString();
        const DeviceMatch match = matchDevice(detected, catalog);
        if (match.clean())
            e.cardId = match.cardId;
        try {
            e.fp8Speedup = measuredFp8Speedup(store, runConfigFromJson(run.config), detected.name);
        } catch (const InvalidInputError &) {
            // a config this version cannot read has no sibling runs to compare with
        }
    }

    // Scaling steps record the card count and the efficiency they measured in their summary. Only
    // steps on GPUs count: ranks sharing a CPU say nothing about NVLink or Infinity Fabric.
    RunFilter scale;
    scale.kind = QStringLiteral("scale");
    for (const auto &r : store.listRuns(scale)) {
        const int gpus = r.summary.value(QStringLiteral("gpus")).toInt();
        const double eff = r.summary.value(QStringLiteral("scaling_efficiency")).toDouble();
        const bool related = (r.configHash == run.configHash || r.parentRunId == run.id) && r.device.startsWith(QLatin1String("cuda"));
        if (related && r.verdict == QLatin1String("fits") && gpus > 1 && eff > 0 && !e.scalingEfficiencyByGpus.count(gpus)) {
            e.scalingEfficiencyByGpus[gpus] = eff; // newest first: keep the newest
            e.scalingStrategyByGpus[gpus] = parseStrategy(r.summary.value(QStringLiteral("strategy")).toString().toStdString()).value_or(ParallelStrategy::Ddp);
            e.scaleRunIds.push_back(r.id);
        }
    }
    // Watched runs of the user's own job on one device and on N are a scaling step too.
    if (const auto w = watchedScaling(store, run.configHash); w && !e.scalingEfficiencyByGpus.count(w->gpus) && run.device.startsWith(QLatin1String("cuda"))) {
        e.scalingEfficiencyByGpus[w->gpus] = w->efficiency;
        e.scalingStrategyByGpus[w->gpus] = ParallelStrategy::Ddp;
        e.scaleRunIds.push_back(w->scaledRunId);
    }
    return e;
}

Comparison compareConfigurations(const RunConfig &config, const Catalog &catalog, const ComparisonRequest &request,
                                 const std::optional<PilotEvidence> &pilot)
{
    Comparison out;
    out.autoStrategy = !request.multiGpuStrategy;
    out.catalogDate = catalog.modelledOn;
    out.catalogNotice = catalog.notice;
    out.catalogSource = catalogSourceLabel(catalog);
    out.catalogRevision = catalogRevision(catalog);
    out.currency = catalog.currency;
    out.termId = request.termId;
    out.stack = request.stack;
    if (request.stack)
        out.assumptions.push_back(std::string("only cards validated with the ") + toString(*request.stack) + " stack are compared");
    out.deadlineHours = config.job.deadlineHours;
    out.plannedTokens = plannedTokensOf(config);
    out.configHash = configHash(config);
    out.precision = toString(config.train.precision);
    const bool fp8 = isFp8(config.train.precision);

    std::vector<int> counts = request.gpuCounts.empty() ? catalog.gpuCounts : request.gpuCounts;
    for (int gpus : counts) {
        if (!catalog.hasGpuCount(gpus)) {
            std::string known;
            for (int g : catalog.gpuCounts)
                known += (known.empty() ? "" : ", ") + std::to_string(g);
            throw InvalidInputError("--gpus", std::to_string(gpus) + " is not a card count the catalog prices (" + known + ")");
        }
    }
    if (!request.termId.empty() && request.termId != "on_demand") {
        std::string known = "on_demand";
        bool found = false;
        for (const auto &t : catalog.terms) {
            found = found || t.id == request.termId;
            known += ", " + t.id;
        }
        if (!found)
            throw InvalidInputError("--term", "'" + request.termId + "' is not a catalog term (" + known + ", or cheapest)");
    }

    const double configTokensPerStep = static_cast<double>(config.train.microBatch * config.train.gradAccum * config.train.seqLen);
    if (pilot) {
        out.pilotRunId = pilot->runId;
        out.scaleRunIds = pilot->scaleRunIds;
        out.pilotDevice = pilot->deviceLabel;
        out.pilotKernels = toString(config.train.kernels);
        out.fp8Speedup = pilot->fp8Speedup;
        out.assumptions.push_back("step times from pilot run " + std::to_string(pilot->runId) + " on " + pilot->deviceLabel + " (" + fixed(pilot->stepTimeMs, 2)
                                  + " ms per step, measured in " + pilot->precision + " with " + out.pilotKernels + " kernels); measured where the card is the one it ran on, modelled elsewhere");
        if (pilot->fp8Speedup && !fp8)
            out.assumptions.push_back(std::string(toString(pilot->fp8Speedup->fp8)) + " ran this job at " + fixed(pilot->fp8Speedup->ratio, 2)
                                      + "x the tokens/s of bf16-mixed (" + pilot->fp8Speedup->source() + "): compare that config to price it");
    }
    if (fp8 && !pilot)
        out.assumptions.push_back("no pilot of this fp8 config: its step time is modelled as bf16-mixed's (FP8's gain is not assumed from the datasheets' peak ratio; pilot it to measure it)");
    out.assumptions.push_back("the global batch stays as configured on every card count; fit and the largest micro-batch are per GPU at the configured micro-batch");
    out.assumptions.push_back("useful tokens are the planned tokens (" + fixed(out.plannedTokens, 0) + "): no failed or repeated steps are budgeted");
    if (request.options.storageTb <= 0 && request.options.egressTb <= 0 && !request.options.support)
        out.assumptions.push_back("no storage, egress or support options are added");
    if (!pilot)
        out.assumptions.push_back("no pilot: start-up, validation and checkpoint times are unknown and not in the rental window");
    // One size for every row: the whole job's checkpoint does not shrink with more cards.
    out.checkpointBytes = checkpointBytesFor(config);
    if (pilot) {
        out.checkpointWriteBytesPerSecond = pilot->checkpointWriteBytesPerSecond;
        out.checkpointVerifyBytesPerSecond = pilot->checkpointVerifyBytesPerSecond;
        out.checkpointRestoreBytesPerSecond = pilot->checkpointRestoreBytesPerSecond;
        out.restoreCheckRunId = pilot->restoreCheckRunId;
        if (pilot->restoreCheckRunId)
            out.assumptions.push_back("checkpoint verify and restore rates from restore-check run " + std::to_string(*pilot->restoreCheckRunId) + " of this config");
    }

    MeasuredStep measured;
    if (pilot) {
        measured.stepTimeMs = pilot->stepTimeMs;
        measured.flopsPerStep = pilot->flopsPerStep;
        measured.tokensPerStep = pilot->tokensPerStep;
        measured.cardId = pilot->cardId;
        measured.scalingEfficiencyByGpus = pilot->scalingEfficiencyByGpus;
        measured.format = fp8 ? NumericFormat::Fp8 : NumericFormat::Bf16;
        if (fp8 && pilot->fp8Speedup) {
            measured.fp8Speedup = pilot->fp8Speedup->ratio;
            measured.fp8SpeedupSource = pilot->fp8Speedup->source();
        }
    }
    const double tokensPerStep = pilot ? pilot->tokensPerStep : configTokensPerStep;

    // Every card, count and strategy below estimates this one config: its parameter table is read
    // once (by the estimator on its first estimate, and here for the communication's counts).
    const ConfigEstimator estimator(config);
    std::optional<ParamCounts> paramCounts;
    const auto countedParams = [&]() -> const ParamCounts & {
        if (!paramCounts)
            paramCounts = countParameters(config);
        return *paramCounts;
    };

    std::vector<ConfigurationCost> costs;
    for (const auto &card : catalog.cards) {
        if (request.stack && card.stack != *request.stack)
            continue;
        const std::string estimatorId = estimatorCardId(card);
        EstimateOptions base;
        base.device = DeviceKind::Cuda;
        base.card = estimatorId;
        base.localCapacityBytes = estimatorId.empty() ? card.memoryBytes : 0;
        base.headroomFraction = request.headroomFraction;
        base.ddpBucketBytes = request.bucketBytes;
        const MemoryEstimate single = estimator.estimate(base);
        if (pilot && measured.bytesPerStep <= 0)
            measured.bytesPerStep = single.bytesMovedPerStep;

        // One candidate row: fit, step time with the strategy's communication, window and cost.
        auto candidate = [&](int gpus, ParallelStrategy strategy) {
            ComparisonRow row;
            row.cardId = card.id;
            row.cardName = card.name;
            row.gpus = gpus;
            row.strategy = strategy;
            EstimateOptions o = base;
            o.gpus = gpus;
            o.strategy = strategy;
            const MemoryEstimate est = gpus == 1 ? single : estimator.estimate(o);
            row.fits = est.fits;
            row.peakBytes = est.calibratedTotalBytes.value_or(est.totalBytes);
            row.usableBytes = est.usableBytes;
            row.headroomBytes = est.usableBytes - row.peakBytes;
            row.maxMicroBatch = est.maxMicroBatch;
            if (estimatorId.empty())
                row.assumptions.push_back("the estimator has no entry for " + card.id + ": its memory uses the catalog capacity with CUDA framework overhead");

            StepFigures f;
            if (pilot) {
                const StepProjection p = projectStep(measured, catalog, card, gpus);
                f.stepTimeMs = p.stepTimeMs;
                f.tokensPerSecond = p.tokensPerSecond;
                f.basis = p.basis;
                f.assumptions = p.assumptions;
            } else {
                f = modelledFromEstimate(single, card, gpus, tokensPerStep, request);
            }
            if (gpus > 1) {
                // A measured scaling step already holds its own strategy's communication.
                ParallelStrategy measuredWith = ParallelStrategy::Ddp;
                if (pilot) {
                    const auto it = pilot->scalingStrategyByGpus.find(gpus);
                    if (it != pilot->scalingStrategyByGpus.end() && pilot->scalingEfficiencyByGpus.count(gpus))
                        measuredWith = it->second;
                }
                const double eff = request.interconnectEfficiency;
                row.commMsPerStep = exposedCommMsOf(strategy, gpus, config, card, eff, countedParams);
                const double extra = row.commMsPerStep - exposedCommMsOf(measuredWith, gpus, config, card, eff, countedParams);
                if (std::abs(extra) > 1e-9) {
                    const double before = f.stepTimeMs;
                    f.stepTimeMs = std::max(f.stepTimeMs + extra, f.stepTimeMs * 0.5);
                    f.tokensPerSecond *= before / f.stepTimeMs;
                    f.basis = FigureBasis::Modelled;
                    f.assumptions.push_back(std::string(toString(strategy)) + " adds " + fixed(extra, 1) + " ms of exposed communication per step over "
                                            + toString(measuredWith) + " (" + card.interconnect + " at " + fixed(eff * 100, 0) + " % of "
                                            + fixed(card.interconnectGBps, 0) + " GB/s)");
                }
            }
            row.stepTimeMs = f.stepTimeMs;
            row.tokensPerSecond = f.tokensPerSecond;
            row.stepTimeBasis = f.basis;
            for (const auto &a : f.assumptions)
                row.assumptions.push_back(a);

            PilotPhaseTimes phases;
            JobSchedule schedule;
            schedule.jobSteps = out.plannedTokens / tokensPerStep;
            schedule.validationEverySteps = config.validation.everySteps;
            schedule.checkpointEverySteps = config.checkpoint.everySteps;
            schedule.uploadGBps = request.uploadGBps;
            schedule.checkpointBytes = out.checkpointBytes;
            if (pilot) {
                phases.setupMs = pilot->setupMs;
                phases.validationPassMs = pilot->validationPassMs;
                phases.checkpointWriteBytesPerSecond = pilot->checkpointWriteBytesPerSecond;
                phases.checkpointVerifyBytesPerSecond = pilot->checkpointVerifyBytesPerSecond;
                phases.checkpointRestoreBytesPerSecond = pilot->checkpointRestoreBytesPerSecond;
                schedule.validationTimeScale = f.stepTimeMs / pilot->stepTimeMs;
            }
            const WindowEstimate window = rentalWindow(phases, schedule);
            for (const auto &a : window.assumptions)
                addUnique(out.assumptions, a);

            CostInputs in;
            in.plannedTokens = out.plannedTokens;
            in.tokensPerSecond = f.tokensPerSecond;
            in.window = window.window;
            in.options = request.options;
            in.termId = request.termId;
            row.cost = estimateCost(catalog, card, gpus, in);
            return row;
        };

        for (int gpus : counts) {
            ComparisonRow row;
            if (gpus == 1) {
                row = candidate(1, ParallelStrategy::None);
            } else if (request.multiGpuStrategy) {
                row = candidate(gpus, *request.multiGpuStrategy);
            } else {
                row = chooseStrategy(candidate, gpus);
            }
            ConfigurationCost c;
            c.cardId = card.id;
            c.gpus = gpus;
            c.fits = row.fits;
            c.stepTimeBasis = row.stepTimeBasis;
            c.cost = row.cost;
            costs.push_back(c);
            out.rows.push_back(std::move(row));
        }
    }
    const Recommendation r = recommend(costs, catalog, config.job.deadlineHours);
    out.recommendedIndex = r.index;
    out.recommendation = r.text;
    if (r.index >= 0) {
        const ComparisonRow &best = out.rows[static_cast<size_t>(r.index)];
        if (best.gpus > 1 && !best.strategyReason.empty())
            out.recommendation += " Strategy: " + best.strategyReason + ".";
    }
    for (size_t i = 0; i < costs.size(); ++i) {
        out.rows[i].recommended = costs[i].recommended;
        out.rows[i].meetsDeadline = costs[i].meetsDeadline;
    }
    if (std::any_of(out.rows.begin(), out.rows.end(), [](const ComparisonRow &row) {
            return row.strategy == ParallelStrategy::Zero1 || row.strategy == ParallelStrategy::Zero2;
        }))
        out.assumptions.push_back("ZeRO-1/2 reduce gradients through a pair of " + std::to_string(request.bucketBytes >> 20) +
                                  " MiB buckets per GPU (DDP's bucket_cap_mb is 25; DeepSpeed's stage 2 defaults to 954 MiB of bf16)");
    return out;
}

std::string numericFormatText(const Comparison &c)
{
    const bool fp8 = c.precision.rfind("fp8", 0) == 0;
    std::string text = "Numerical format: " + c.precision;
    if (c.fp8Speedup)
        text += std::string(fp8 ? ", " : "; ") + toString(c.fp8Speedup->fp8) + " measured at " + fixed(c.fp8Speedup->ratio, 2) + "x the tokens/s of bf16-mixed ("
                + c.fp8Speedup->source() + ")" + (fp8 ? ", assumed the same on every card with FP8 tensor cores" : "");
    else if (fp8)
        text += ", its gain over bf16-mixed not measured (pilot the bf16-mixed config on the same card): projected with no gain, not the datasheets' FP8/BF16 peak ratio";
    return text + ".";
}

QJsonObject toJson(const Comparison &c)
{
    QJsonArray rows;
    for (const auto &r : c.rows) {
        rows.append(QJsonObject {
            {QStringLiteral("card"), QString::fromStdString(r.cardId)},
            {QStringLiteral("card_name"), QString::fromStdString(r.cardName)},
            {QStringLiteral("gpus"), r.gpus},
            {QStringLiteral("strategy"), QString::fromLatin1(toString(r.strategy))},
            {QStringLiteral("strategy_reason"), QString::fromStdString(r.strategyReason)},
            {QStringLiteral("comm_ms_per_step"), r.commMsPerStep},
            {QStringLiteral("fits"), r.fits},
            {QStringLiteral("peak_bytes"), static_cast<double>(r.peakBytes)},
            {QStringLiteral("usable_bytes"), static_cast<double>(r.usableBytes)},
            {QStringLiteral("headroom_bytes"), static_cast<double>(r.headroomBytes)},
            {QStringLiteral("max_micro_batch"), static_cast<double>(r.maxMicroBatch)},
            {QStringLiteral("step_time_ms"), r.stepTimeMs},
            {QStringLiteral("step_time_basis"), QString::fromLatin1(toString(r.stepTimeBasis))},
            {QStringLiteral("tokens_per_s"), r.tokensPerSecond},
            {QStringLiteral("job_hours"), r.cost.jobHours},
            {QStringLiteral("window_hours"), r.cost.windowHours},
            {QStringLiteral("billing"), QString::fromStdString(r.cost.plan.description)},
            {QStringLiteral("term"), QString::fromStdString(r.cost.plan.termId)},
            {QStringLiteral("billed_hours"), r.cost.plan.billedHours},
            {QStringLiteral("gpu_cost"), r.cost.plan.gpuCost},
            {QStringLiteral("options_cost"), r.cost.optionsCost},
            {QStringLiteral("total_cost"), r.cost.totalCost},
            {QStringLiteral("cost_per_million_tokens"), r.cost.costPerMillionTokens},
            {QStringLiteral("meets_deadline"), r.meetsDeadline},
            {QStringLiteral("recommended"), r.recommended},
            {QStringLiteral("assumptions"), stringArray(r.assumptions)},
        });
    }
    return QJsonObject {
        {QStringLiteral("rows"), rows},
        {QStringLiteral("recommendation"), QString::fromStdString(c.recommendation)},
        {QStringLiteral("recommended_index"), c.recommendedIndex},
        {QStringLiteral("catalog_date"), QString::fromStdString(c.catalogDate)},
        {QStringLiteral("catalog_notice"), QString::fromStdString(c.catalogNotice)},
        {QStringLiteral("catalog_source"), QString::fromStdString(c.catalogSource)},
        {QStringLiteral("catalog_revision"), QString::fromStdString(c.catalogRevision)},
        {QStringLiteral("strategy"), c.autoStrategy ? QStringLiteral("auto") : QStringLiteral("fixed")},
        {QStringLiteral("stack"), c.stack ? QString::fromLatin1(toString(*c.stack)) : QStringLiteral("any")},
        {QStringLiteral("currency"), QString::fromStdString(c.currency)},
        {QStringLiteral("term"), c.termId.empty() ? QStringLiteral("cheapest") : QString::fromStdString(c.termId)},
        {QStringLiteral("deadline_hours"), c.deadlineHours ? QJsonValue(*c.deadlineHours) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("planned_tokens"), c.plannedTokens},
        {QStringLiteral("config_hash"), QString::fromStdString(c.configHash)},
        {QStringLiteral("pilot_run_id"), c.pilotRunId ? QJsonValue(static_cast<double>(*c.pilotRunId)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("pilot_device"), QString::fromStdString(c.pilotDevice)},
        {QStringLiteral("pilot_kernels"), QString::fromStdString(c.pilotKernels)},
        {QStringLiteral("precision"), QString::fromStdString(c.precision)},
        {QStringLiteral("fp8_speedup"), c.fp8Speedup ? QJsonValue(c.fp8Speedup->toJson()) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("restore_check_run_id"), c.restoreCheckRunId ? QJsonValue(static_cast<double>(*c.restoreCheckRunId)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("checkpoint_bytes"), static_cast<double>(c.checkpointBytes)},
        {QStringLiteral("checkpoint_write_bytes_per_s"), c.checkpointWriteBytesPerSecond},
        {QStringLiteral("checkpoint_verify_bytes_per_s"), c.checkpointVerifyBytesPerSecond},
        {QStringLiteral("checkpoint_restore_bytes_per_s"), c.checkpointRestoreBytesPerSecond},
        {QStringLiteral("assumptions"), stringArray(c.assumptions)},
    };
}

} // namespace pb
