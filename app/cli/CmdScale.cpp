// pilotbench-cli scale: one scaling step. The single-process baseline at the ranks' effective batch,
// then N worker processes of this same binary (`scale-worker`, one per GPU or CPU share) running the
// pilot with DDP over c10d, compared into useful throughput, scaling efficiency, communication time
// and per-rank peak memory; both runs go to the history, linked. The worker is CmdScaleWorker.cpp.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "app/cli/ScaleCommon.h"
#include "config/RunConfigJson.h"
#include "dist/CpuBinding.h"
#include "dist/DistributedPilot.h"
#include "dist/ScaleStep.h"
#include "dist/Topology.h"
#include "dist/WorkerLauncher.h"
#include "engine/DevicePeak.h"
#include "workflow/PilotRecorder.h"
#include "engine/Environment.h"
#include "estimate/MemoryEstimator.h"
#include "history/HistoryStore.h"
#include "util/Errors.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QThread>

#include <spdlog/spdlog.h>

#include <cstring>

namespace pb::cli {
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
QJsonValue predictedPeak(const RunConfig &config, const std::string &device, int gpus, const std::string &strategy)
{
    EstimateOptions options;
    options.device = device == "cpu" ? DeviceKind::Cpu : DeviceKind::Cuda;
    options.gpus = gpus;
    options.strategy = parseStrategy(strategy).value_or(ParallelStrategy::None);
    try {
        return static_cast<double>(estimateMemory(config, options).peakAllocatedBytes);
    } catch (const PilotBenchError &e) {
        spdlog::warn("no memory estimate for this step: {}", e.what());
        return QJsonValue::Null;
    }
}

struct ScaleSetup {
    RunConfig config;
    PilotOptions options;            // the baseline's (device cpu or cuda:0)
    std::string device;              // "cpu" or "cuda"
    std::string strategy;            // "ddp", "zero2" or "fsdp"
    int gpus = 0;
    int threadsPerRank = 0;          // CPU only
    bool bind = true;                // each rank (and the baseline) on its own CPUs where known
    bool overlap = true;             // ddp: all-reduce during backward
    int timeoutSeconds = 0;
    QString dumpDir;
    std::optional<int64_t> baselineRun; // reuse this recorded baseline instead of running one
    QString database;
    bool jsonl = false;
};

ScaleSetup scaleSetupFrom(const QCommandLineParser &parser)
{
    ScaleSetup s;
    s.config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    if (!parser.isSet(QStringLiteral("gpus")))
        throw InvalidInputError("--gpus", "is required: the number of ranks (GPUs, or CPU shares with --device cpu)");
    s.gpus = scaleIntOption(parser, QStringLiteral("gpus"), 1);
    const QString strategy = parser.value(QStringLiteral("strategy"));
    if (strategy == QLatin1String("zero3"))
        throw InvalidInputError("--strategy", "zero3 is fsdp here (parameters, gradients and optimizer state sharded, gathered per block): use --strategy fsdp");
    s.strategy = strategy.toStdString();
    checkStrategy(s.strategy, s.config);
    s.options = pilotOptionsFrom(parser);
    s.device = s.options.device;
    if (s.device != "cpu" && s.device != "cuda")
        throw InvalidInputError("--device", "'" + s.device + "': scale places rank r on cuda:r itself; use --device cuda or --device cpu");
    if (s.device == "cuda") {
        const int available = cudaDeviceCount();
        if (s.gpus > available)
            throw InvalidInputError("--gpus", std::to_string(s.gpus) + " ranks asked for, but this host has " + std::to_string(available) + " CUDA device(s)");
        s.options.device = "cuda:0";
        s.options.devicePeakFlops = catalogPeakFlops(s.options.device);
    } else {
        s.threadsPerRank = s.options.cpuThreads > 0 ? s.options.cpuThreads : std::max(1, QThread::idealThreadCount() / s.gpus);
        s.options.cpuThreads = s.threadsPerRank; // the baseline is one rank's share of the host
    }
    s.timeoutSeconds = scaleIntOption(parser, QStringLiteral("timeout"), 1);
    s.bind = !parser.isSet(QStringLiteral("no-bind"));
    s.overlap = !parser.isSet(QStringLiteral("no-overlap"));
    s.dumpDir = parser.value(QStringLiteral("dump-dir"));
    if (parser.isSet(QStringLiteral("baseline-run")))
        s.baselineRun = scaleIntOption(parser, QStringLiteral("baseline-run"), 1);
    s.database = databaseFrom(parser);
    s.jsonl = parser.isSet(QStringLiteral("jsonl"));
    return s;
}

class ScaleStep {
public:
    ScaleStep(CliContext &ctx, ScaleSetup setup) : m_ctx(ctx), m_s(std::move(setup)), m_printer(ctx.out, ctx.err, m_s.jsonl, 0) {}
    int run();

private:
    void note(const QString &name, const QJsonObject &fields, const QString &text)
    {
        if (m_s.jsonl)
            m_printer.event(name, fields);
        else if (!text.isEmpty())
            m_ctx.err << text << '\n';
    }
    std::vector<WorkerSpec> workerSpecs(const QString &workDir, int port) const;
    std::vector<std::string> rankCpus(const Topology &topology) const;
    struct Baseline {
        int64_t runId = 0;
        PilotSummary summary;
        double parameterSum = 0;
    };
    Baseline runBaseline(const RunConfig &baselineConfig);
    Baseline reuseBaseline(const RunConfig &baselineConfig) const;
    int fail(PilotRecorder &recorder, Verdict verdict, const std::string &message, const QJsonObject &details);

    CliContext &m_ctx;
    ScaleSetup m_s;
    PilotPrinter m_printer;
    std::unique_ptr<HistoryWriter> m_writer;
    std::vector<std::string> m_rankCpus;  // per rank; "" or none: not bound
};

// CPU ranks: consecutive slices of the CPUs this process may use, threadsPerRank each. CUDA
// ranks: the CPUs nvidia-smi names as local to each rank's GPU. Nothing where neither is known.
std::vector<std::string> ScaleStep::rankCpus(const Topology &topology) const
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
    const auto local = gpuCpuAffinity(topology.gpuMatrix);
    for (int rank = 0; rank < m_s.gpus; ++rank) {
        const auto it = local.find(rank);
        cpus.push_back(it == local.end() ? std::string() : it->second);
    }
    if (local.empty())
        spdlog::info("no CPU affinity per GPU from nvidia-smi topo -m: the ranks are not bound");
    return cpus;
}

std::vector<WorkerSpec> ScaleStep::workerSpecs(const QString &workDir, int port) const
{
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QLatin1String(kScaleLauncherPidVariable), QString::number(QCoreApplication::applicationPid()));
    // NVLink multicast off unless the user says otherwise: on shared H200 hosts a program using it
    // can take the GPUs out of service (NCCL, PyTorch's symmetric memory and NVSHMEM each have a switch).
    if (m_s.device == "cuda") {
        for (const char *variable : {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"})
            if (!environment.contains(QLatin1String(variable)))
                environment.insert(QLatin1String(variable), QLatin1String(std::strcmp(variable, "NCCL_NVLS_ENABLE") == 0 ? "0" : "1"));
    }
    if (m_s.device == "cpu")
        environment.insert(QStringLiteral("OMP_NUM_THREADS"), QString::number(m_s.threadsPerRank));
    std::vector<WorkerSpec> specs;
    for (int rank = 0; rank < m_s.gpus; ++rank) {
        WorkerSpec spec;
        spec.program = QCoreApplication::applicationFilePath();
        spec.arguments = {QStringLiteral("scale-worker"), QStringLiteral("--config"), QDir(workDir).filePath(QStringLiteral("config.json")),
                          QStringLiteral("--device"), QString::fromStdString(m_s.device), QStringLiteral("--strategy"), QString::fromStdString(m_s.strategy), QStringLiteral("--steps"), QString::number(m_s.options.steps),
                          QStringLiteral("--warmup"), QString::number(m_s.options.warmupSteps), QStringLiteral("--timeout"), QString::number(m_s.timeoutSeconds),
                          QStringLiteral("--result"), QDir(workDir).filePath(QStringLiteral("rank%1.json").arg(rank))};
        if (m_s.threadsPerRank > 0)
            spec.arguments << QStringLiteral("--threads") << QString::number(m_s.threadsPerRank);
        if (!m_s.overlap)
            spec.arguments << QStringLiteral("--no-overlap");
        if (static_cast<size_t>(rank) < m_rankCpus.size() && !m_rankCpus[static_cast<size_t>(rank)].empty())
            spec.arguments << QStringLiteral("--cpus") << QString::fromStdString(m_rankCpus[static_cast<size_t>(rank)]);
        if (m_s.options.memoryLimitBytes > 0)
            spec.arguments << QStringLiteral("--memory-limit") << QString::number(m_s.options.memoryLimitBytes);
        if (!m_s.dumpDir.isEmpty())
            spec.arguments << QStringLiteral("--dump-parameters") << QDir(m_s.dumpDir).filePath(QStringLiteral("rank%1.f32").arg(rank));
        Rendezvous r;
        r.masterPort = port;
        r.rank = rank;
        r.worldSize = m_s.gpus;
        r.localRank = rank;
        spec.environment = environment;
        applyRendezvous(r, spec.environment);
        spec.logPath = QDir(workDir).filePath(QStringLiteral("rank%1.log").arg(rank));
        specs.push_back(std::move(spec));
    }
    return specs;
}

int ScaleStep::fail(PilotRecorder &recorder, Verdict verdict, const std::string &message, const QJsonObject &details)
{
    PilotSummary summary;
    summary.verdict = verdict;
    summary.message = message;
    QJsonObject json = details;
    json.insert(QStringLiteral("verdict"), QString::fromLatin1(toString(verdict)));
    json.insert(QStringLiteral("message"), QString::fromStdString(message));
    m_writer->finishRun(recorder.runId(), summary, json);
    m_writer->flush();
    json.insert(QStringLiteral("run_id"), static_cast<double>(recorder.runId()));
    if (m_s.jsonl)
        m_printer.event(QStringLiteral("error"), json);
    m_ctx.err << "scale " << toString(verdict) << ": " << QString::fromStdString(message) << '\n';
    return exitCodeFor(verdict);
}

ScaleStep::Baseline ScaleStep::runBaseline(const RunConfig &baselineConfig)
{
    PilotRecorder recorder(*m_writer, nullptr, &interruptFlag());
    Baseline b;
    b.runId = recorder.begin(baselineConfig, m_s.options);
    DistributedPilotOptions local;
    if (!m_s.dumpDir.isEmpty())
        local.parameterDumpPath = QDir(m_s.dumpDir).filePath(QStringLiteral("baseline.f32")).toStdString();
    spdlog::info("scale: baseline on {} (grad_accum {})", m_s.options.device, baselineConfig.train.gradAccum);
    // The baseline runs where rank 0 will: on its CPUs (this thread, and the threads it starts).
    const std::vector<int> allowed = allowedCpus();
    if (!m_rankCpus.empty() && !m_rankCpus.front().empty())
        bindToCpus(parseCpuList(m_rankCpus.front(), "--cpus"));
    const DistributedPilotResult result = runDistributedPilot(baselineConfig, m_s.options, local, &recorder);
    if (!m_rankCpus.empty() && !m_rankCpus.front().empty() && !allowed.empty())
        bindToCpus(allowed);
    recorder.finish(result.run);
    b.summary = result.run.summary;
    b.parameterSum = result.parameterSum;
    return b;
}

ScaleStep::Baseline ScaleStep::reuseBaseline(const RunConfig &baselineConfig) const
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

int ScaleStep::run()
{
    std::vector<std::string> rankDevices;
    for (int rank = 0; rank < m_s.gpus; ++rank)
        rankDevices.push_back(m_s.device == "cuda" ? "cuda:" + std::to_string(rank) : "cpu");
    QTemporaryDir workDir(QDir::temp().filePath(QStringLiteral("pilotbench-scale-XXXXXX")));
    if (!workDir.isValid())
        throw PilotBenchError(ExitCode::Failure, "cannot create a folder for the workers' results: " + workDir.errorString().toStdString());
    if (!m_s.dumpDir.isEmpty() && !QDir().mkpath(m_s.dumpDir))
        throw InvalidInputError("--dump-dir", "cannot create '" + m_s.dumpDir.toStdString() + "'");
    const Topology topology = captureTopology(m_s.device);
    m_rankCpus = rankCpus(topology);
    const auto specs = workerSpecs(workDir.path(), freeLocalPort());

    const auto warnings = scaleWarnings(rankDevices, specs.front().environment, m_s.threadsPerRank, topology.hostCpus);
    QJsonArray warningList;
    for (const auto &w : warnings) {
        spdlog::warn("{}", w);
        warningList.append(QString::fromStdString(w));
    }
    QJsonObject topologyJson = toJson(topology);
    QJsonArray boundCpus;
    for (const auto &c : m_rankCpus)
        boundCpus.append(QString::fromStdString(c));
    topologyJson.insert(QStringLiteral("rank_cpus"), boundCpus);
    note(QStringLiteral("topology"), topologyJson,
         QStringLiteral("collective: %1 (%2); launcher CPUs %3").arg(QString::fromStdString(topology.collective), QString::fromStdString(topology.collectiveVersion),
                                                                   QString::fromStdString(topology.launcherCpuAffinity)));
    for (const auto &w : warnings)
        note(QStringLiteral("warning"), {{QStringLiteral("message"), QString::fromStdString(w)}}, {});

    installInterruptHandler();
    m_s.options.cancel = &interruptFlag();
    m_writer = std::make_unique<HistoryWriter>(m_s.database);

    // The baseline: one process, gradient accumulation times N, same micro-batch.
    const RunConfig baselineConfig = baselineConfigFor(m_s.config, m_s.gpus);
    const Baseline baseline = m_s.baselineRun ? reuseBaseline(baselineConfig) : runBaseline(baselineConfig);
    const int64_t baselineId = baseline.runId;
    const auto &bs = baseline.summary;
    note(QStringLiteral("baseline"),
         {{QStringLiteral("run_id"), static_cast<double>(baselineId)}, {QStringLiteral("verdict"), QString::fromLatin1(toString(bs.verdict))},
          {QStringLiteral("reused"), m_s.baselineRun.has_value()}, {QStringLiteral("tokens_per_s"), bs.tokensPerSecond},
          {QStringLiteral("step_time_mean_ms"), bs.stepTimeMeanMs}, {QStringLiteral("grad_accum"), static_cast<double>(baselineConfig.train.gradAccum)},
          {QStringLiteral("parameter_sum"), baseline.parameterSum}},
         QStringLiteral("baseline (run %1): %2 tokens/s, %3 ms/step").arg(baselineId).arg(bs.tokensPerSecond, 0, 'f', 0).arg(bs.stepTimeMeanMs, 0, 'f', 2));

    PilotOptions scaleOptions = m_s.options;
    scaleOptions.device = m_s.device;
    PilotRecorder scaleRecorder(*m_writer, nullptr, nullptr);
    scaleRecorder.begin(m_s.config, scaleOptions, QStringLiteral("scale"), baselineId);
    QJsonObject details {{QStringLiteral("strategy"), QString::fromStdString(m_s.strategy)}, {QStringLiteral("gpus"), m_s.gpus},
                         {QStringLiteral("baseline_run_id"), static_cast<double>(baselineId)}, {QStringLiteral("topology"), topologyJson},
                         {QStringLiteral("warnings"), warningList}};
    if (bs.verdict != Verdict::Fits)
        return fail(scaleRecorder, bs.verdict, "the baseline did not complete: " + bs.message, details);

    saveRunConfig(m_s.config, QDir(workDir.path()).filePath(QStringLiteral("config.json")));
    WorkerLauncher launcher(specs);
    launcher.start();
    const auto pids = launcher.pids();
    for (size_t rank = 0; rank < pids.size(); ++rank)
        note(QStringLiteral("worker_started"), {{QStringLiteral("rank"), static_cast<int>(rank)}, {QStringLiteral("pid"), static_cast<double>(pids[rank])}},
             QStringLiteral("rank %1: pid %2 on %3").arg(rank).arg(pids[rank]).arg(QString::fromStdString(rankDevices[rank])));
    const WorkerOutcome outcome = launcher.wait(std::chrono::seconds(m_s.timeoutSeconds), &interruptFlag());
    if (outcome.kind != WorkerOutcome::Kind::Finished) {
        std::string message = outcome.message;
        const int rank = std::max(outcome.failedRank, 0);
        const std::string tail = tailOfFile(specs[static_cast<size_t>(rank)].logPath, 6);
        if (!tail.empty())
            message += "\nlast lines of rank " + std::to_string(rank) + "'s log:\n" + tail;
        workDir.setAutoRemove(false); // every rank's log stays for the post-mortem
        message += "\nworker logs: " + workDir.path().toStdString();
        const Verdict verdict = outcome.kind == WorkerOutcome::Kind::Cancelled                                  ? Verdict::Cancelled
                                : !outcome.crashed && outcome.exitCode == static_cast<int>(ExitCode::DoesNotFit) ? Verdict::DoesNotFit
                                                                                                                 : Verdict::Failed;
        return fail(scaleRecorder, verdict, message, details);
    }

    std::vector<RankFigures> figures;
    QJsonArray ranks;
    for (int rank = 0; rank < m_s.gpus; ++rank) {
        const QString path = QDir(workDir.path()).filePath(QStringLiteral("rank%1.json").arg(rank));
        const QJsonObject json = readJsonFile(path);
        figures.push_back(rankFiguresFromJson(json, path.toStdString()));
        // The scaled run's curve in the history: rank 0's steps (every rank waits for the slowest).
        if (rank == 0) {
            for (const auto &sample : stepSamplesFromJson(json))
                m_writer->appendSample(scaleRecorder.runId(), sample);
        }
        QJsonObject compact = json; // the curve is in the samples table; keep the run row small
        compact.remove(QStringLiteral("steps"));
        ranks.append(compact);
    }
    const ScaleSummary summary = summarizeScale(m_s.strategy, bs.tokensPerSecond, bs.stepTimeMeanMs, figures);
    if (!summary.parametersAgree)
        spdlog::warn("the ranks ended with different parameters: gradient synchronisation is broken");
    PilotSummary record; // what the history lists for the scaled run: all ranks together
    record.verdict = Verdict::Fits;
    record.measuredSteps = m_s.options.steps;
    record.tokensPerSecond = summary.tokensPerSecond;
    record.stepTimeMeanMs = summary.stepTimeMs;
    record.peakAllocatedBytes = *std::max_element(summary.perRankPeakAllocatedBytes.begin(), summary.perRankPeakAllocatedBytes.end());
    record.finalLoss = ranks.first().toObject().value(QStringLiteral("final_loss")).toDouble();
    QJsonObject json = toJson(summary);
    for (auto it = details.begin(); it != details.end(); ++it)
        json.insert(it.key(), it.value());
    json.insert(QStringLiteral("ranks"), ranks);
    json.insert(QStringLiteral("verdict"), QStringLiteral("fits"));
    json.insert(QStringLiteral("predicted_per_rank_peak_allocated_bytes"), predictedPeak(m_s.config, m_s.device, m_s.gpus, m_s.strategy));
    json.insert(QStringLiteral("predicted_baseline_peak_allocated_bytes"), predictedPeak(baselineConfig, m_s.device, 1, "none"));
    json.insert(QStringLiteral("baseline_peak_allocated_bytes"), static_cast<double>(bs.peakAllocatedBytes));
    m_writer->finishRun(scaleRecorder.runId(), record, json);
    m_writer->flush();

    json.remove(QStringLiteral("ranks"));
    json.remove(QStringLiteral("topology"));
    json.insert(QStringLiteral("run_id"), static_cast<double>(scaleRecorder.runId()));
    json.insert(QStringLiteral("database"), m_s.database);
    if (m_s.jsonl) {
        m_printer.event(QStringLiteral("summary"), json);
    } else {
        QString peaks;
        for (int64_t p : summary.perRankPeakAllocatedBytes)
            peaks += (peaks.isEmpty() ? QString() : QStringLiteral(", ")) + formatBytes(static_cast<double>(p));
        m_ctx.out << "strategy: " << QString::fromStdString(m_s.strategy) << " over " << QString::fromStdString(topology.collective) << ", " << summary.gpus << " ranks on " << QString::fromStdString(m_s.device)
                  << "\nbaseline: " << QString::number(summary.baselineTokensPerSecond, 'f', 0) << " tokens/s (run " << baselineId << ", grad_accum "
                  << baselineConfig.train.gradAccum << ")\nscaled: " << QString::number(summary.tokensPerSecond, 'f', 0) << " tokens/s, speed-up "
                  << QString::number(summary.speedup, 'f', 2) << "x, scaling efficiency " << QString::number(summary.scalingEfficiency * 100, 'f', 1)
                  << "%\ncommunication: " << QString::number(summary.commMsPerStep, 'f', 2) << " ms/step of " << QString::number(summary.stepTimeMs, 'f', 2)
                  << " ms\npeak allocated per rank: " << peaks << "\nrecorded as run " << scaleRecorder.runId() << " in " << m_s.database << '\n';
        m_ctx.out.flush();
    }
    return summary.parametersAgree ? 0 : static_cast<int>(ExitCode::Failure);
}

int runScale(CliContext &ctx)
{
    QCommandLineParser parser;
    addPilotOptions(parser);
    parser.addOptions({
        {QStringLiteral("gpus"), QStringLiteral("Ranks to run: GPUs with --device cuda, CPU shares with --device cpu."), QStringLiteral("n")},
        {QStringLiteral("strategy"), QStringLiteral("ddp (default), zero2 (optimizer state and gradients divided among the ranks) or fsdp (parameters too, gathered per block)."), QStringLiteral("name"),
         QStringLiteral("ddp")},
        {QStringLiteral("timeout"), QStringLiteral("End the step when the workers take longer, in seconds (default 900)."), QStringLiteral("s"), QStringLiteral("900")},
        {QStringLiteral("baseline-run"), QStringLiteral("Reuse this recorded baseline run (same config at the ranks' effective batch) instead of running one."),
         QStringLiteral("id")},
        {QStringLiteral("no-overlap"), QStringLiteral("ddp: all-reduce the gradients after the backward pass instead of bucket by bucket during it.")},
        {QStringLiteral("no-bind"), QStringLiteral("Leave the ranks on every CPU (default: CPU ranks on their own cores, CUDA ranks on their GPU's NUMA-local cores).")},
        {QStringLiteral("dump-dir"), QStringLiteral("Write the final parameters of the baseline and of every rank here (float32)."), QStringLiteral("dir")},
    });
    if (!parseArgs(parser, ctx, QStringLiteral("One scaling step: the single-process baseline against N data-parallel ranks at the same effective batch.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    ScaleStep step(ctx, scaleSetupFrom(parser));
    return step.run();
}

const CliRegistration scaleRegistration({QStringLiteral("scale"), QStringLiteral("One scaling step: 1 against N ranks with DDP over c10d"), &runScale});

} // namespace
} // namespace pb::cli
