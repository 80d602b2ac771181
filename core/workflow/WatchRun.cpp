#include "workflow/WatchRun.h"

#include "catalog/DeviceMatch.h"
#include "config/RunConfigJson.h"
#include "engine/PilotEngine.h"
#include "estimate/MemoryEstimator.h"
#include "history/HistoryWriter.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "workflow/CatalogSource.h"
#include "workflow/RunRecording.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QSysInfo>

#include <spdlog/spdlog.h>

namespace pb {
namespace {

// Records rank 0's steps as they come and passes every event on.
class RecordingObserver final : public watch::WatchObserver {
public:
    RecordingObserver(HistoryWriter &writer, int64_t runId, watch::WatchObserver &next) : m_writer(writer), m_runId(runId), m_next(next) {}
    void started(qint64 pid, const QString &source) override { m_next.started(pid, source); }
    void output(bool isStderr, const QByteArray &bytes) override { m_next.output(isStderr, bytes); }
    void devices(const watch::SamplerReading &r) override { m_next.devices(r); }
    void notice(const QString &text) override { m_next.notice(text); }
    void stepSource(const std::string &source) override { m_next.stepSource(source); }
    void trainerLoss(const watch::LoggedLoss &l) override { m_next.trainerLoss(l); }
    void stepFinished(const StepSample &s) override
    {
        m_writer.appendSample(m_runId, s);
        m_next.stepFinished(s);
    }
    void validationFinished(const ValidationResult &v) override
    {
        m_writer.appendValidation(m_runId, v);
        m_next.validationFinished(v);
    }
    void checkpointWritten(const CheckpointWrite &c) override
    {
        m_writer.appendCheckpoint(m_runId, c);
        m_next.checkpointWritten(c);
    }

private:
    HistoryWriter &m_writer;
    int64_t m_runId;
    watch::WatchObserver &m_next;
};

QJsonObject catalogMatch(const watch::WatchResult &r)
{
    if (r.devices.empty())
        return {};
    const watch::DeviceReading *used = &r.devices.front();
    for (const auto &d : r.devices)
        if (d.processTreeBytes > 0) {
            used = &d;
            break;
        }
    const watch::DeviceReading &d = *used;
    DetectedDevice detected;
    detected.name = d.name;
    detected.memoryBytes = d.memoryTotalBytes > 0 ? d.memoryTotalBytes : 0;
    detected.backend = d.source == "rocm-smi" ? SoftwareStack::Rocm : SoftwareStack::Cuda;
    const char *runtime = detected.backend == SoftwareStack::Rocm ? "hip_version" : "cuda_version";
    if (r.hello.value(QLatin1String(runtime)).isString())
        detected.runtimeVersion = r.hello.value(QLatin1String(runtime)).toString().toStdString();
    if (r.hello.value(QStringLiteral("driver")).isString())
        detected.driverVersion = r.hello.value(QStringLiteral("driver")).toString().toStdString();
    try {
        const Catalog catalog = activeCatalogOrBuiltIn(nullptr);
        const DeviceMatch m = matchDevice(detected, catalog);
        QJsonArray mismatches;
        for (const auto &mm : m.mismatches)
            mismatches.append(QString::fromStdString(mm.message));
        return {{QStringLiteral("matched"), m.matched}, {QStringLiteral("card"), QString::fromStdString(m.cardId)},
                {QStringLiteral("clean"), m.clean()}, {QStringLiteral("message"), QString::fromStdString(m.message)},
                {QStringLiteral("mismatches"), mismatches}};
    } catch (const std::exception &e) {
        return {{QStringLiteral("matched"), false}, {QStringLiteral("message"), QString::fromUtf8(e.what())}};
    }
}

} // namespace

QString probeModuleDir()
{
    const QString installed = QCoreApplication::applicationDirPath() + QStringLiteral("/../share/pilotbench/python");
    if (QFileInfo::exists(installed + QStringLiteral("/pilotbench_probe.py")))
        return QDir(installed).canonicalPath();
    const QString source = QStringLiteral(PB_SOURCE_TREE "/resources/python");
    if (QFileInfo::exists(source + QStringLiteral("/pilotbench_probe.py")))
        return source;
    return {};
}

RecordedWatch runRecordedWatch(WatchRunRequest request, watch::WatchObserver &observer)
{
    watch::WatchOptions &o = request.options;
    // Refused before anything is recorded.
    const QString program = watch::resolveProgram(o.command.value(0), o.environment, o.workingDir);
    watch::checkEnvironmentAdditions(o.environment);
    if (o.runDir.isEmpty())
        o.runDir = appDataDir() + QStringLiteral("/watch/") + QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
    if (o.probeModuleDir.isEmpty())
        o.probeModuleDir = probeModuleDir();

    HistoryWriter writer(request.database);
    RunStart start;
    if (request.config) {
        start = runStartFor(*request.config, QStringLiteral("watch"), "");
    } else {
        start.kind = QStringLiteral("watch");
        start.name = QFileInfo(program).fileName();
        start.model = QStringLiteral("command");
        start.configJson = QJsonObject {};
        start.card = QLatin1String("");
        start.notes = QLatin1String("");
    }
    std::string why;
    auto backend = watch::openWatchBackend(o, &why);
    // What the host has; the summary says what the job used (the devices its processes were on).
    start.device = !backend ? QStringLiteral("cpu") : backend->source() == "rocm-smi" ? QStringLiteral("rocm") : QStringLiteral("cuda");
    start.environmentJson = QJsonObject {
        {QStringLiteral("command"), QJsonArray::fromStringList(o.command)},
        {QStringLiteral("program"), program},
        {QStringLiteral("working_dir"), o.workingDir.isEmpty() ? QDir::currentPath() : o.workingDir},
        {QStringLiteral("environment_additions"), QJsonArray::fromStringList(o.environment)},
        {QStringLiteral("run_dir"), o.runDir},
        {QStringLiteral("host"), QSysInfo::machineHostName()},
        {QStringLiteral("device"), start.device},
    };
    RecordedWatch out;
    out.runId = writer.beginRun(start);
    if (request.runBegun)
        request.runBegun(out.runId);
    RecordingObserver recording(writer, out.runId, observer);
    out.result = guardRun(writer, out.runId, [&] { return watch::watchCommand(o, recording, std::move(backend)); });

    PilotSummary &s = out.result.summary;
    if (request.config) {
        const RunConfig &c = *request.config;
        const int64_t tokensPerStep = c.train.microBatch * c.train.gradAccum * c.train.seqLen;
        s.flopsPerStep = modelFlopsPerStep(c, tokensPerStep, c.train.seqLen);
        // Without the probe's token counts the config says what one step holds.
        if (s.tokensPerSecond <= 0 && s.stepTimeMeanMs > 0)
            s.tokensPerSecond = static_cast<double>(tokensPerStep) * out.result.worldSize / (s.stepTimeMeanMs / 1000.0);
    }
    out.json = out.result.toJson();
    out.json.insert(QStringLiteral("flops_per_step"), s.flopsPerStep);
    out.json.insert(QStringLiteral("tokens_per_s"), s.tokensPerSecond);
    out.json.insert(QStringLiteral("command"), QJsonArray::fromStringList(o.command));
    out.json.insert(QStringLiteral("run_dir"), o.runDir);
    out.json.insert(QStringLiteral("catalog_match"), catalogMatch(out.result));
    // The device the job ran on: one its processes used (the library lists them), else the CPU.
    // The keys are the pilot's environment's (engine/Environment.cpp), so the catalog match and
    // the comparison read a watched run like a pilot.
    const watch::DeviceReading *used = nullptr;
    for (const auto &d : out.result.devices)
        if (d.processTreeBytes > 0 && !used)
            used = &d;
    if (!used && !out.result.devices.empty() && out.result.devices.front().processTreeBytes < 0)
        used = &out.result.devices.front(); // the library cannot list processes: take the first device
    const QString device = !used ? QStringLiteral("cpu") : used->source == "rocm-smi" ? QStringLiteral("rocm") : QStringLiteral("cuda");
    QJsonObject environment {{QStringLiteral("device"), device}, {QStringLiteral("cpu"), QSysInfo::currentCpuArchitecture()}};
    if (used) {
        environment.insert(QStringLiteral("device_name"), QString::fromStdString(used->name));
        environment.insert(QStringLiteral("device_memory_bytes"), static_cast<double>(used->memoryTotalBytes));
    }
    const QJsonObject &hello = out.result.hello;
    auto copy = [&](const char *from, const char *to) {
        if (hello.value(QLatin1String(from)).isString())
            environment.insert(QLatin1String(to), hello.value(QLatin1String(from)));
    };
    copy("torch_version", "torch_version");
    copy("cuda_version", "cuda_runtime");
    copy("hip_version", "hip_runtime");
    copy("nccl_version", "nccl_version");
    copy("driver", "driver_version");
    out.json.insert(QStringLiteral("environment"), environment);
    if (request.config && s.verdict == Verdict::Fits) {
        try {
            EstimateOptions e;
            e.device = start.device == QLatin1String("cpu") ? DeviceKind::Cpu : DeviceKind::Cuda;
            e.localCapacityBytes = out.result.devices.empty() ? 0 : out.result.devices.front().memoryTotalBytes;
            const MemoryEstimate est = estimateMemory(*request.config, e);
            out.json.insert(QStringLiteral("predicted_peak_allocated_bytes"), static_cast<double>(est.peakAllocatedBytes));
            out.json.insert(QStringLiteral("predicted_total_bytes"), static_cast<double>(est.totalBytes));
        } catch (const std::exception &e) {
            spdlog::warn("watch: no estimate for the config: {}", e.what());
        }
    }
    if (!writer.finishRun(out.runId, s, out.json) || !writer.flush())
        throw PilotBenchError(ExitCode::Failure, "the watched run ended but could not be recorded: " + writer.lastError());
    out.json.insert(QStringLiteral("run_id"), static_cast<double>(out.runId));
    return out;
}

} // namespace pb
