#include "workflow/ScaleRun.h"

#include "config/RunConfigJson.h"
#include "dist/CpuBinding.h"
#include "dist/DistributedPilot.h"
#include "dist/Rendezvous.h"
#include "dist/Topology.h"
#include "dist/WorkerLauncher.h"
#include "catalog/StepProjection.h"
#include "estimate/MemoryEstimator.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"
#include "workflow/PilotRecorder.h"
#include "workflow/RunRecording.h"
#include "workflow/ScaleWorkers.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace pb {
namespace {

QJsonObject readJsonFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": the worker left no result: " + file.errorString().toStdString());
    QJsonParseError error;
    const auto doc = QJsonDocument::fromJson(file.readAll(), &error);
    if (!doc.isObject())
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": the worker's result is not a JSON object: " + error.errorString().toStdString());
    return doc.object();
}

// The estimator's per-rank tensor peak for the same run (null when it cannot estimate this config),
// printed beside the measured one.
QJsonValue predictedPeak(const RunConfig &config, const std::string &device, int gpus, const std::string &strategy, bool overlap, int bucketMb)
{
    EstimateOptions options;
    options.ddpBucketBytes = static_cast<int64_t>(bucketMb) << 20;
    options.device = device == "cpu" ? DeviceKind::Cpu : DeviceKind::Cuda;
    options.gpus = gpus;
    options.ddpOverlap = overlap;
    options.strategy = parseStrategy(strategy).value_or(ParallelStrategy::None);
    try {
        return static_cast<double>(estimateMemory(config, options).peakAllocatedBytes);
    } catch (const PilotBenchError &e) {
        spdlog::warn("no memory estimate for this step: {}", e.what());
        return QJsonValue::Null;
    }
}

class ScaleRun {
public:
    ScaleRun(ScaleRunSetup setup, ScaleRunObserver &observer) : m_s(std::move(setup)), m_observer(observer) {}
    ScaleRunResult run();

private:
    void note(const QString &name, const QJsonObject &fields, const QString &text) { m_observer.note(name, fields, text); }
    std::vector<WorkerSpec> workerSpecs(const QString &workDir) const;
    std::vector<std::string> rankCpus(const Topology &topology) const;
    struct Baseline {
        int64_t runId = 0;
        PilotSummary summary;
        double parameterSum = 0;
    };
    Baseline runBaseline(const RunConfig &baselineConfig);
    Baseline reuseBaseline(const RunConfig &baselineConfig) const;
    ScaleRunResult fail(int64_t runId, Verdict verdict, const std::string &message, const QJsonObject &details);
    ScaleRunResult measure(const RunConfig &baselineConfig, const Baseline &baseline, int64_t runId, const QJsonObject &details,
                           const std::vector<WorkerSpec> &specs);

    ScaleRunSetup m_s;
    ScaleRunObserver &m_observer;
    std::unique_ptr<HistoryWriter> m_writer;
    std::vector<std::string> m_rankCpus;  // per rank; "" or none: not bound
    ScaleRunResult m_result;
    QTemporaryDir *m_workDir = nullptr;
    Topology m_topology;
    QJsonObject m_topologyJson;
    QJsonArray m_warnings;
    std::vector<std::string> m_rankDevices;
};

// CPU ranks: consecutive slices of the CPUs this process may use, threadsPerRank each. CUDA
// ranks: the CPUs sysfs names as local to the GPU each rank's cuda:N is (after the inherited
// CUDA_VISIBLE_DEVICES) that this process may use. Nothing where neither is known.
std::vector<std::string> ScaleRun::rankCpus(const Topology &topology) const
{
    std::vector<std::string> cpus;
    if (!m_s.bind)
        return cpus;
    if (m_s.device == "cpu") {
        for (const auto &slice : splitCpus(allowedCpus(), m_s.gpus, m_s.threadsPerRank))
            cpus.push_back(formatCpuList(slice));
        if (cpus.empty())
            spdlog::warn("{} ranks x {} threads do not fit the {} CPUs this process may use: the ranks are not bound", m_s.gpus, m_s.threadsPerRank,
                         allowedCpus().size());
        return cpus;
    }
    const auto &gpus = topology.gpus.gpus;
    for (int rank = 0; rank < m_s.gpus; ++rank) {
        const auto r = static_cast<size_t>(rank);
        cpus.push_back(r < gpus.size() ? gpus[r].bindCpus : std::string());
        if (cpus.back().empty())
            spdlog::info("rank {} is not bound to CPUs: {}", rank, r < gpus.size() ? gpus[r].note : "no GPU listed for cuda:" + std::to_string(rank) + " (" + topology.gpus.note + ")");
    }
    return cpus;
}

std::vector<WorkerSpec> ScaleRun::workerSpecs(const QString &workDir) const
{
    ScaleWorkerPlan plan;
    plan.program = m_s.workerProgram;
    plan.configPath = QDir(workDir).filePath(QStringLiteral("config.json"));
    plan.device = m_s.device;
    plan.strategy = m_s.strategy;
    plan.worldSize = m_s.gpus;
    plan.steps = m_s.options.steps;
    plan.warmupSteps = m_s.options.warmupSteps;
    plan.timeoutSeconds = m_s.timeoutSeconds;
    plan.threadsPerRank = m_s.threadsPerRank;
    plan.workDir = workDir;
    if (!m_s.overlap)
        plan.extraArguments << QStringLiteral("--no-overlap");
    plan.extraArguments << QStringLiteral("--bucket-mb") << QString::number(m_s.bucketMb);
    if (m_s.options.memoryLimitBytes > 0)
        plan.extraArguments << QStringLiteral("--memory-limit") << QString::number(m_s.options.memoryLimitBytes);
    return scaleWorkerSpecs(plan, [this](int rank) {
        QStringList arguments;
        if (static_cast<size_t>(rank) < m_rankCpus.size() && !m_rankCpus[static_cast<size_t>(rank)].empty())
            arguments << QStringLiteral("--cpus") << QString::fromStdString(m_rankCpus[static_cast<size_t>(rank)]);
        if (!m_s.dumpDir.isEmpty())
            arguments << QStringLiteral("--dump-parameters") << QDir(m_s.dumpDir).filePath(QStringLiteral("rank%1.f32").arg(rank));
        return arguments;
    });
}

ScaleRunResult ScaleRun::fail(int64_t runId, Verdict verdict, const std::string &message, const QJsonObject &details)
{
    PilotSummary summary;
    summary.verdict = verdict;
    summary.message = message;
    QJsonObject json = details;
    json.insert(QStringLiteral("verdict"), QString::fromLatin1(toString(verdict)));
    json.insert(QStringLiteral("message"), QString::fromStdString(message));
    if (!m_writer->finishRun(runId, summary, json) || !m_writer->flush())
        throw PilotBenchError(ExitCode::Failure, "the scaling step ended (" + message + ") but could not be recorded: " + m_writer->lastError());
    json.insert(QStringLiteral("run_id"), static_cast<double>(runId));
    note(QStringLiteral("error"), json, QStringLiteral("scale %1: %2").arg(QString::fromLatin1(toString(verdict)), QString::fromStdString(message)));
    m_result.verdict = verdict;
    m_result.message = message;
    m_result.runId = runId;
    m_result.json = json;
    return m_result;
}

ScaleRun::Baseline ScaleRun::runBaseline(const RunConfig &baselineConfig)
{
    PilotRecorder recorder(*m_writer, m_observer.baselineObserver(), m_s.stop);
    Baseline b;
    b.runId = recorder.begin(baselineConfig, m_s.options);
    m_observer.runBegun(b.runId);
    DistributedPilotOptions local;
    if (!m_s.dumpDir.isEmpty())
        local.parameterDumpPath = QDir(m_s.dumpDir).filePath(QStringLiteral("baseline.f32")).toStdString();
    spdlog::info("scale: baseline on {} (grad_accum {})", m_s.options.device, baselineConfig.train.gradAccum);
    // The baseline runs where rank 0 will: on its CPUs (this thread, and the threads it starts).
    const std::vector<int> allowed = allowedCpus();
    if (!m_rankCpus.empty() && !m_rankCpus.front().empty())
        bindToCpus(parseCpuList(m_rankCpus.front(), "--cpus"));
    const DistributedPilotResult result = guardRun(*m_writer, b.runId, [&] { return runDistributedPilot(baselineConfig, m_s.options, local, &recorder); });
    if (!m_rankCpus.empty() && !m_rankCpus.front().empty() && !allowed.empty())
        bindToCpus(allowed);
    PilotRun run = result.run;
    if (!recorder.historyError().empty()) { // the history stopped the baseline: a failure, not a cancel
        run.summary.verdict = Verdict::Failed;
        run.summary.message = recorder.historyError();
    }
    recorder.finish(run);
    b.summary = run.summary;
    b.parameterSum = result.parameterSum;
    return b;
}

ScaleRun::Baseline ScaleRun::reuseBaseline(const RunConfig &baselineConfig) const
{
    const int64_t id = *m_s.baselineRun;
    HistoryStore store(m_s.database);
    const auto record = store.findRun(id);
    if (!record)
        throw InvalidInputError("--baseline-run", "no run " + std::to_string(id) + " in " + m_s.database.toStdString());
    if (record->verdict != QLatin1String("fits"))
        throw InvalidInputError("--baseline-run", "run " + std::to_string(id) + " did not complete (verdict '" + record->verdict.toStdString() + "')");
    if (record->configHash != configHash(baselineConfig))
        throw InvalidInputError("--baseline-run", "run " + std::to_string(id) + " used another config; the baseline must be this config with train.grad_accum="
                                                      + std::to_string(baselineConfig.train.gradAccum) + " (the ranks' effective batch)");
    if (record->device.toStdString() != m_s.options.device)
        throw InvalidInputError("--baseline-run", "run " + std::to_string(id) + " ran on " + record->device.toStdString() + ", not " + m_s.options.device);
    Baseline b;
    b.runId = id;
    b.summary.verdict = Verdict::Fits;
    b.summary.tokensPerSecond = record->summary.value(QStringLiteral("tokens_per_s")).toDouble();
    b.summary.stepTimeMeanMs = record->summary.value(QStringLiteral("step_time_mean_ms")).toDouble();
    b.summary.peakAllocatedBytes = static_cast<int64_t>(record->summary.value(QStringLiteral("peak_allocated_bytes")).toDouble());
    b.summary.measuredSteps = static_cast<int64_t>(record->summary.value(QStringLiteral("measured_steps")).toDouble());
    return b;
}

ScaleRunResult ScaleRun::run()
{
    for (int rank = 0; rank < m_s.gpus; ++rank)
        m_rankDevices.push_back(m_s.device == "cuda" ? "cuda:" + std::to_string(rank) : "cpu");
    QTemporaryDir workDir(QDir::temp().filePath(QStringLiteral("pilotbench-scale-XXXXXX")));
    if (!workDir.isValid())
        throw PilotBenchError(ExitCode::Failure, "cannot create a folder for the workers' results: " + workDir.errorString().toStdString());
    m_workDir = &workDir;
    if (!m_s.dumpDir.isEmpty() && !QDir().mkpath(m_s.dumpDir))
        throw InvalidInputError("--dump-dir", "cannot create '" + m_s.dumpDir.toStdString() + "'");
    m_topology = captureTopology(m_s.device);
    m_rankCpus = rankCpus(m_topology);
    const auto specs = workerSpecs(workDir.path());

    const auto warnings = scaleWarnings(m_rankDevices, specs.front().environment, m_s.threadsPerRank, m_topology.hostCpus);
    for (const auto &w : warnings) {
        spdlog::warn("{}", w);
        m_warnings.append(QString::fromStdString(w));
    }
    m_topologyJson = toJson(m_topology);
    QJsonArray boundCpus;
    for (const auto &c : m_rankCpus)
        boundCpus.append(QString::fromStdString(c));
    m_topologyJson.insert(QStringLiteral("rank_cpus"), boundCpus);
    note(QStringLiteral("topology"), m_topologyJson,
         QStringLiteral("collective: %1 (%2); launcher CPUs %3").arg(QString::fromStdString(m_topology.collective), QString::fromStdString(m_topology.collectiveVersion),
                                                                   QString::fromStdString(m_topology.launcherCpuAffinity)));
    for (const auto &w : warnings)
        note(QStringLiteral("warning"), {{QStringLiteral("message"), QString::fromStdString(w)}}, {});

    m_writer = std::make_unique<HistoryWriter>(m_s.database);
    m_result.collective = m_topology.collective;

    // The baseline: one process, gradient accumulation times N, same micro-batch.
    const RunConfig baselineConfig = baselineConfigFor(m_s.config, m_s.gpus);
    m_result.gradAccumOfBaseline = static_cast<int>(baselineConfig.train.gradAccum);
    const Baseline baseline = m_s.baselineRun ? reuseBaseline(baselineConfig) : runBaseline(baselineConfig);
    m_result.baselineRunId = baseline.runId;
    const auto &bs = baseline.summary;
    note(QStringLiteral("baseline"),
         {{QStringLiteral("run_id"), static_cast<double>(baseline.runId)}, {QStringLiteral("verdict"), QString::fromLatin1(toString(bs.verdict))},
          {QStringLiteral("reused"), m_s.baselineRun.has_value()}, {QStringLiteral("tokens_per_s"), bs.tokensPerSecond},
          {QStringLiteral("step_time_mean_ms"), bs.stepTimeMeanMs}, {QStringLiteral("grad_accum"), static_cast<double>(baselineConfig.train.gradAccum)},
          {QStringLiteral("parameter_sum"), baseline.parameterSum}},
         QStringLiteral("baseline (run %1): %2 tokens/s, %3 ms/step").arg(baseline.runId).arg(bs.tokensPerSecond, 0, 'f', 0).arg(bs.stepTimeMeanMs, 0, 'f', 2));

    PilotOptions scaleOptions = m_s.options;
    scaleOptions.device = m_s.device;
    PilotRecorder scaleRecorder(*m_writer, nullptr, nullptr);
    const int64_t runId = scaleRecorder.begin(m_s.config, scaleOptions, QStringLiteral("scale"), baseline.runId);
    m_observer.runBegun(runId);
    QJsonObject details {{QStringLiteral("strategy"), QString::fromStdString(m_s.strategy)}, {QStringLiteral("gpus"), m_s.gpus},
                         {QStringLiteral("baseline_run_id"), static_cast<double>(baseline.runId)}, {QStringLiteral("topology"), m_topologyJson},
                         {QStringLiteral("warnings"), m_warnings}};
    if (bs.verdict != Verdict::Fits)
        return fail(runId, bs.verdict, "the baseline did not complete: " + bs.message, details);
    return guardRun(*m_writer, runId, [&] { return measure(baselineConfig, baseline, runId, details, specs); });
}

ScaleRunResult ScaleRun::measure(const RunConfig &baselineConfig, const Baseline &baseline, int64_t runId, const QJsonObject &details,
                                 const std::vector<WorkerSpec> &specs)
{
    const auto &bs = baseline.summary;
    saveRunConfig(m_s.config, QDir(m_workDir->path()).filePath(QStringLiteral("config.json")));
    WorkerLauncher launcher(specs);
    launcher.start();
    const auto pids = launcher.pids();
    for (size_t rank = 0; rank < pids.size(); ++rank)
        note(QStringLiteral("worker_started"), {{QStringLiteral("rank"), static_cast<int>(rank)}, {QStringLiteral("pid"), static_cast<double>(pids[rank])}},
             QStringLiteral("rank %1: pid %2 on %3").arg(rank).arg(pids[rank]).arg(QString::fromStdString(m_rankDevices[rank])));
    const WorkerOutcome outcome = launcher.wait(std::chrono::seconds(m_s.timeoutSeconds), m_s.options.cancel);
    if (outcome.kind != WorkerOutcome::Kind::Finished) {
        std::string message = outcome.message;
        const int rank = std::max(outcome.failedRank, 0);
        const std::string tail = tailOfFile(specs[static_cast<size_t>(rank)].logPath, 6);
        if (!tail.empty())
            message += "\nlast lines of rank " + std::to_string(rank) + "'s log:\n" + tail;
        m_workDir->setAutoRemove(false); // every rank's log stays for the post-mortem
        message += "\nworker logs: " + m_workDir->path().toStdString();
        const Verdict verdict = outcome.kind == WorkerOutcome::Kind::Cancelled                                  ? Verdict::Cancelled
                                : !outcome.crashed && outcome.exitCode == static_cast<int>(ExitCode::DoesNotFit) ? Verdict::DoesNotFit
                                                                                                                 : Verdict::Failed;
        return fail(runId, verdict, message, details);
    }

    std::vector<RankFigures> figures;
    QJsonArray ranks;
    for (int rank = 0; rank < m_s.gpus; ++rank) {
        const QString path = QDir(m_workDir->path()).filePath(QStringLiteral("rank%1.json").arg(rank));
        const QJsonObject json = readJsonFile(path);
        figures.push_back(rankFiguresFromJson(json, path.toStdString()));
        // The scaled run's curve in the history: rank 0's steps (every rank waits for the slowest).
        if (rank == 0) {
            for (const auto &sample : stepSamplesFromJson(json))
                m_writer->appendSample(runId, sample);
        }
        QJsonObject compact = json; // the curve is in the samples table; keep the run row small
        compact.remove(QStringLiteral("steps"));
        ranks.append(compact);
    }
    const ScaleSummary summary = summarizeScale(m_s.strategy, bs.tokensPerSecond, bs.stepTimeMeanMs, figures);
    if (!summary.parametersAgree)
        spdlog::warn("the ranks ended with different parameters: gradient synchronisation is broken");
    PilotSummary record; // what the history lists for the scaled run: all ranks together
    record.verdict = summary.parametersAgree ? Verdict::Fits : Verdict::Failed;
    if (!summary.parametersAgree)
        record.message = "the ranks ended with different parameters: gradient synchronisation is broken";
    record.measuredSteps = m_s.options.steps;
    record.tokensPerSecond = summary.tokensPerSecond;
    record.stepTimeMeanMs = summary.stepTimeMs;
    record.peakAllocatedBytes = *std::max_element(summary.perRankPeakAllocatedBytes.begin(), summary.perRankPeakAllocatedBytes.end());
    record.finalLoss = ranks.first().toObject().value(QStringLiteral("final_loss")).toDouble();
    QJsonObject json = toJson(summary);
    for (auto it = details.begin(); it != details.end(); ++it)
        json.insert(it.key(), it.value());
    json.insert(QStringLiteral("ranks"), ranks);
    json.insert(QStringLiteral("verdict"), QString::fromLatin1(toString(record.verdict)));
    json.insert(QStringLiteral("message"), QString::fromStdString(record.message));
    json.insert(QStringLiteral("predicted_per_rank_peak_allocated_bytes"), predictedPeak(m_s.config, m_s.device, m_s.gpus, m_s.strategy, m_s.overlap, m_s.bucketMb));
    json.insert(QStringLiteral("predicted_baseline_peak_allocated_bytes"), predictedPeak(baselineConfig, m_s.device, 1, "none", m_s.overlap, m_s.bucketMb));
    json.insert(QStringLiteral("baseline_peak_allocated_bytes"), static_cast<double>(bs.peakAllocatedBytes));
    if (!m_writer->finishRun(runId, record, json) || !m_writer->flush())
        throw PilotBenchError(ExitCode::Failure, "the scaling step ran but could not be recorded: " + m_writer->lastError());

    json.remove(QStringLiteral("ranks"));
    json.remove(QStringLiteral("topology"));
    json.insert(QStringLiteral("run_id"), static_cast<double>(runId));
    json.insert(QStringLiteral("database"), m_s.database);
    m_result.verdict = record.verdict;
    m_result.message = record.message;
    m_result.runId = runId;
    m_result.summary = summary;
    m_result.parametersAgree = summary.parametersAgree;
    m_result.json = json;
    return m_result;
}

} // namespace

ScaleRunResult runScaleStep(ScaleRunSetup setup, ScaleRunObserver &observer)
{
    ScaleRun run(std::move(setup), observer);
    return run.run();
}

DistributedPilotResult runLaunchedRank(const RunConfig &config, const PilotOptions &options, const DistributedPilotOptions &dist,
                                       const QString &database, std::optional<int64_t> baselineRun)
{
    if (dist.rendezvous.rank != 0)
        return runDistributedPilot(config, options, dist);
    double baselineTokensPerSecond = 0;
    if (baselineRun) {
        const HistoryStore store(database);
        const auto record = store.findRun(*baselineRun);
        if (!record || record->verdict != QLatin1String("fits"))
            throw InvalidInputError("--baseline-run", "run " + std::to_string(*baselineRun) + " is not a finished pilot in " + database.toStdString());
        if (record->configHash != configHash(baselineConfigFor(config, dist.rendezvous.worldSize)))
            throw InvalidInputError("--baseline-run", "run " + std::to_string(*baselineRun) + " used another config; the baseline is this config at train.grad_accum x "
                                                          + std::to_string(dist.rendezvous.worldSize));
        baselineTokensPerSecond = record->summary.value(QStringLiteral("tokens_per_s")).toDouble();
    }
    HistoryWriter writer(database);
    std::atomic<bool> stop {false};
    PilotRecorder recorder(writer, nullptr, &stop);
    PilotOptions scaleOptions = options;
    const int64_t runId = recorder.begin(config, scaleOptions, QStringLiteral("scale"), baselineRun);
    const DistributedPilotResult result = guardRun(writer, runId, [&] { return runDistributedPilot(config, options, dist, &recorder); });
    // Every rank runs in step with the slowest, so rank 0's rate times the ranks is the job's.
    const PilotSummary &s = result.run.summary;
    const int world = dist.rendezvous.worldSize;
    QJsonObject json = toJson(result);
    json.remove(QStringLiteral("steps"));
    json.insert(QStringLiteral("gpus"), world);
    json.insert(QStringLiteral("launcher"), QStringLiteral("external (torchrun, srun or another launcher)"));
    json.insert(QStringLiteral("tokens_per_s"), s.tokensPerSecond * world);
    if (baselineTokensPerSecond > 0 && s.verdict == Verdict::Fits) {
        json.insert(QStringLiteral("baseline_tokens_per_s"), baselineTokensPerSecond);
        json.insert(QStringLiteral("scaling_efficiency"), scalingEfficiency(baselineTokensPerSecond, s.tokensPerSecond * world, world));
    }
    PilotSummary record = s;
    record.tokensPerSecond = s.tokensPerSecond * world;
    if (!writer.finishRun(runId, record, json) || !writer.flush())
        spdlog::error("rank 0 could not record the scaling step: {}", writer.lastError());
    return result;
}

} // namespace pb
