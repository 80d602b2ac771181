#include "watch/WatchedCommand.h"

#include "result/ResultJson.h"
#include "result/StepStatistics.h"
#include "util/Errors.h"
#include "util/JobTree.h"
#include "watch/ProbeChannel.h"
#include "watch/ProbeEvents.h"
#include "watch/StepCollector.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QProcess>
#include <QStandardPaths>
#include <QThread>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <csignal>
#include <map>
#include <unistd.h>

namespace pb::watch {
namespace {

// The kernel's count of OOM kills in our cgroup (cgroup v2); -1 where it cannot be read. A rise
// while the command ran, with the command killed by SIGKILL, is the OOM killer's work.
int64_t cgroupOomKills()
{
    QFile cgroup(QStringLiteral("/proc/self/cgroup"));
    if (!cgroup.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : cgroup.readAll().split('\n')) {
        if (!line.startsWith("0::"))
            continue;
        QFile events(QStringLiteral("/sys/fs/cgroup") + QString::fromUtf8(line.mid(3)) + QStringLiteral("/memory.events"));
        if (!events.open(QIODevice::ReadOnly))
            return -1;
        for (const QByteArray &e : events.readAll().split('\n'))
            if (e.startsWith("oom_kill "))
                return e.mid(9).trimmed().toLongLong();
    }
    return -1;
}

double mean(const std::vector<double> &v)
{
    double sum = 0;
    for (double x : v)
        sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

} // namespace

QString resolveProgram(const QString &program, const QStringList &environment, const QString &workingDir)
{
    if (program.isEmpty())
        throw InvalidInputError("COMMAND", "no command given: put it after --, e.g. watch -- python3 train.py");
    if (program.contains(QLatin1Char('/'))) {
        const QFileInfo info(workingDir.isEmpty() ? QDir::current() : QDir(workingDir), program); // ./train.sh is the command's folder's
        if (QFileInfo(program).isRelative() && !workingDir.isEmpty() && !info.exists())
            throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' does not exist in " + workingDir.toStdString());
        if (!info.exists())
            throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' does not exist");
        if (!info.isFile() || !info.isExecutable())
            throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' is not an executable file");
        return info.absoluteFilePath();
    }
    QStringList paths;
    for (const QString &e : environment)
        if (e.startsWith(QLatin1String("PATH=")))
            paths = e.mid(5).split(QLatin1Char(':'), Qt::SkipEmptyParts);
    const QString found = QStandardPaths::findExecutable(program, paths);
    if (found.isEmpty())
        throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' is not a program on PATH");
    return found;
}

int64_t watchedMemoryBytes(const SamplerReading &r)
{
    int64_t ours = -1, all = -1;
    bool listed = false;
    for (const auto &d : r.devices) {
        all = std::max(all, d.memoryUsedBytes);
        listed = listed || d.processTreeBytes >= 0;
        if (d.processTreeBytes > 0)
            ours = std::max(ours, d.memoryUsedBytes);
    }
    if (ours >= 0)
        return ours;
    if (!r.devices.empty() && !listed)
        return all;
    return r.treeRssBytes; // no accelerator, or none of ours on any: the job's memory is host memory
}

void checkEnvironmentAdditions(const QStringList &environment)
{
    for (const QString &e : environment)
        if (e.indexOf(QLatin1Char('=')) <= 0)
            throw InvalidInputError("--env", "'" + e.toStdString() + "' must be NAME=VALUE");
}

QJsonObject WatchResult::toJson() const
{
    QJsonObject o = pb::toJson(summary);
    o.insert(QStringLiteral("step_source"), QString::fromStdString(stepSource));
    o.insert(QStringLiteral("device_source"), QString::fromStdString(deviceSource));
    o.insert(QStringLiteral("command_exit_code"), commandExitCode);
    o.insert(QStringLiteral("command_signal"), commandSignal);
    o.insert(QStringLiteral("stopped_on_purpose"), stoppedOnPurpose);
    o.insert(QStringLiteral("world_size"), worldSize);
    o.insert(QStringLiteral("probe_hello"), hello);
    o.insert(QStringLiteral("peak_process_tree_device_bytes"), static_cast<double>(peakProcessTreeDeviceBytes));
    o.insert(QStringLiteral("peak_tree_rss_bytes"), static_cast<double>(peakTreeRssBytes));
    o.insert(QStringLiteral("device_samples"), static_cast<double>(samplesTaken));
    o.insert(QStringLiteral("log_path"), logPath);
    o.insert(QStringLiteral("probe_path"), probePath);
    o.insert(QStringLiteral("probe_events_rejected"), static_cast<double>(probeEventsRejected));
    if (!probeFirstRejection.empty())
        o.insert(QStringLiteral("probe_first_rejection"), QString::fromStdString(probeFirstRejection));
    if (!probeFileRefused.empty())
        o.insert(QStringLiteral("probe_file_refused"), QString::fromStdString(probeFileRefused));
    if (!outOfMemoryLine.empty())
        o.insert(QStringLiteral("out_of_memory_line"), QString::fromStdString(outOfMemoryLine));
    if (loggingSteps)
        o.insert(QStringLiteral("logging_steps"), static_cast<double>(*loggingSteps));
    o.insert(QStringLiteral("step_time_known"), summary.measuredSteps > 0);
    if (!loggedLosses.empty()) {
        QJsonArray list;
        for (const LoggedLoss &l : loggedLosses) {
            QJsonObject e {{QStringLiteral("log"), static_cast<double>(l.ordinal)}, {QStringLiteral("time_ms"), l.timeMs}};
            if (std::isfinite(l.loss))
                e.insert(QStringLiteral("loss"), l.loss); // JSON has no NaN: a diverged loss is left out, not 0
            if (l.learningRate)
                e.insert(QStringLiteral("learning_rate"), *l.learningRate);
            if (l.epoch)
                e.insert(QStringLiteral("epoch"), *l.epoch);
            list.append(e);
        }
        o.insert(QStringLiteral("trainer_losses"), list);
    }
    QJsonArray rankList;
    double slowest = 0;
    for (const auto &[rank, f] : ranks) {
        slowest = std::max(slowest, f.stepTimeMeanMs);
        rankList.append(QJsonObject {{QStringLiteral("rank"), rank}, {QStringLiteral("steps"), static_cast<double>(f.steps)},
                                     {QStringLiteral("step_time_mean_ms"), f.stepTimeMeanMs}, {QStringLiteral("tokens_per_s"), f.tokensPerSecond},
                                     {QStringLiteral("peak_allocated_bytes"), static_cast<double>(f.peakAllocatedBytes)},
                                     {QStringLiteral("peak_reserved_bytes"), static_cast<double>(f.peakReservedBytes)},
                                     {QStringLiteral("final_loss"), f.finalLoss}});
    }
    o.insert(QStringLiteral("ranks"), rankList);
    o.insert(QStringLiteral("slowest_rank_step_time_ms"), slowest);
    QJsonArray deviceList;
    for (const auto &d : devices)
        deviceList.append(QJsonObject {{QStringLiteral("index"), d.index}, {QStringLiteral("name"), QString::fromStdString(d.name)},
                                       {QStringLiteral("source"), QString::fromStdString(d.source)},
                                       {QStringLiteral("memory_total_bytes"), static_cast<double>(d.memoryTotalBytes)}});
    o.insert(QStringLiteral("devices"), deviceList);
    return o;
}

std::unique_ptr<DeviceBackend> openWatchBackend(const WatchOptions &options, std::string *why)
{
    if (!options.sampleDevices) {
        if (why)
            *why = "device sampling is off";
        return nullptr;
    }
    return options.nvmlLibrary.isEmpty() ? openAnyDeviceBackend(why) : openNvml(options.nvmlLibrary, why);
}

WatchResult watchCommand(const WatchOptions &options, WatchObserver &observer, std::unique_ptr<DeviceBackend> backend)
{
    if (options.command.isEmpty())
        throw InvalidInputError("COMMAND", "no command given: put it after --, e.g. watch -- python3 train.py");
    const QString program = resolveProgram(options.command.first(), options.environment, options.workingDir);
    const QString runDir = options.runDir.isEmpty() ? QDir::tempPath() : options.runDir;
    if (!QDir().mkpath(runDir))
        throw PilotBenchError(ExitCode::Failure, "cannot create the run folder " + runDir.toStdString());

    WatchResult result;
    result.logPath = QDir(runDir).filePath(QStringLiteral("command.log"));
    result.probePath = QDir(runDir).filePath(QStringLiteral("probe.jsonl"));
    QFile::remove(result.probePath);
    QFile log(result.logPath);
    if (!log.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw PilotBenchError(ExitCode::Failure, "cannot write the command's log " + result.logPath.toStdString() + ": " + log.errorString().toStdString());

    checkEnvironmentAdditions(options.environment);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const QString &e : options.environment) {
        const qsizetype eq = e.indexOf(QLatin1Char('='));
        env.insert(e.left(eq), e.mid(eq + 1));
    }
    // Python buffers a pipe's output in blocks; the log lines are read as they come.
    if (!env.contains(QStringLiteral("PYTHONUNBUFFERED")))
        env.insert(QStringLiteral("PYTHONUNBUFFERED"), QStringLiteral("1"));
    if (!options.probeModuleDir.isEmpty()) {
        const QString old = env.value(QStringLiteral("PYTHONPATH"));
        env.insert(QStringLiteral("PYTHONPATH"), old.isEmpty() ? options.probeModuleDir : options.probeModuleDir + QLatin1Char(':') + old);
    }

    result.deviceSource = backend ? backend->source() : "proc";
    if (!backend)
        spdlog::info("watch: no accelerator library: the process tree's memory comes from /proc");

    const int64_t oomKillsBefore = cgroupOomKills();
    QProcess process;
    process.setProgram(program);
    process.setArguments(options.command.mid(1));
    process.setStandardInputFile(QProcess::nullDevice()); // a job that prompts gets end of file, not a hang
    if (!options.workingDir.isEmpty())
        process.setWorkingDirectory(options.workingDir);
    // Its whole tree is ours to stop, however it detaches; it ends if watch itself dies.
    JobTree tree(options.graceMs);
    env.insert(QLatin1String(JobTree::kVariable), tree.id());
    // Made after the guardian is forked, so that only the job holds the pipe's write end.
    ProbeChannel probe(result.probePath);
    probe.addTo(env);
    process.setProcessEnvironment(env);
    process.setChildProcessModifier([probeFd = probe.jobFd()] {
        JobTree::prepareChild(SIGTERM);
        ProbeChannel::keepOpenInChild(probeFd);
    });
    process.start();
    probe.closeJobEnd();
    if (!process.waitForStarted(30000))
        throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' could not be started: " + process.errorString().toStdString());
    const qint64 pid = process.processId();
    tree.add(pid);
    spdlog::info("watch: started {} (pid {}), devices from {}", program.toStdString(), pid, result.deviceSource);
    observer.started(pid, QString::fromStdString(result.deviceSource));

    DeviceSampler sampler(std::move(backend), pid, options.sampleIntervalMs);
    sampler.start();
    StepCollector steps(options, observer);
    LineSplitter outLines, errLines;
    QElapsedTimer clock;
    clock.start();
    double stopAskedMs = -1;
    QElapsedTimer sinceScan;
    bool killed = false, cancelled = false;

    // Each device as last read, with the most memory the job's processes held on it over the run
    // (its processes are gone by the last reading).
    std::map<int, DeviceReading> devices;
    auto keepDevices = [&](const SamplerReading &r) {
        for (const DeviceReading &d : r.devices) {
            const int64_t most = devices.count(d.index) ? std::max(devices[d.index].processTreeBytes, d.processTreeBytes) : d.processTreeBytes;
            devices[d.index] = d;
            devices[d.index].processTreeBytes = most;
        }
    };
    const auto probeLineTooLong = [&] { steps.probeRejected("longer than " + std::to_string(kMaxProbeLineBytes) + " bytes: skipped"); };
    bool probeFileNoticed = false;
    // At most 1 MiB from each source per pass: a job that floods its channel delays its own events,
    // never watch's loop.
    auto readProbe = [&] {
        const double now = static_cast<double>(clock.elapsed());
        probe.read(1 << 20, [&](const QByteArray &line) { steps.probeLine(line, now); }, probeLineTooLong);
        if (!probe.fileRefused().empty() && !probeFileNoticed) {
            probeFileNoticed = true;
            observer.notice(QString::fromStdString(probe.fileRefused()));
        }
    };
    auto readOutput = [&] {
        const double now = static_cast<double>(clock.elapsed());
        const QByteArray out = process.readAllStandardOutput();
        const QByteArray err = process.readAllStandardError();
        if (!out.isEmpty()) {
            observer.output(false, out);
            log.write(out);
            outLines.feed(out, [&](const QByteArray &line) { steps.outputLine(line, now); });
        }
        if (!err.isEmpty()) {
            observer.output(true, err);
            log.write(err);
            errLines.feed(err, [&](const QByteArray &line) { steps.outputLine(line, now); });
        }
    };
    auto askStop = [&](const QString &why) {
        if (stopAskedMs >= 0)
            return;
        stopAskedMs = static_cast<double>(clock.elapsed());
        observer.notice(why);
        tree.signalAll(SIGTERM);
    };
    const auto hurry = [&options] { return options.stopNow && options.stopNow->load(); };

    while (process.state() != QProcess::NotRunning) {
        QElapsedTimer tick;
        tick.start();
        const bool ready = process.waitForReadyRead(25);
        readOutput();
        readProbe();
        for (const SamplerReading &r : sampler.drain()) {
            steps.deviceReading(r);
            observer.devices(r);
            keepDevices(r);
        }
        // The tree is a scan of /proc (a millisecond on a busy host): five times a second is enough.
        if (sinceScan.elapsed() > 200 || !sinceScan.isValid()) {
            tree.scan();
            sinceScan.start();
        }
        const double now = static_cast<double>(clock.elapsed());
        if (options.cancel && options.cancel->load() && !cancelled) {
            cancelled = true;
            askStop(QStringLiteral("cancelled: stopping the command's process tree"));
        }
        if (options.maxSteps && steps.stepsSeen() >= *options.maxSteps && stopAskedMs < 0) {
            result.stoppedOnPurpose = true;
            askStop(QStringLiteral("%1 steps measured as asked: stopping the command").arg(steps.stepsSeen()));
        }
        if (options.maxSeconds && now >= *options.maxSeconds * 1000.0 && stopAskedMs < 0) {
            result.stoppedOnPurpose = true;
            askStop(QStringLiteral("%1 s measured as asked: stopping the command").arg(*options.maxSeconds));
        }
        if (hurry() && !killed) {
            cancelled = true;
            askStop(QStringLiteral("cancelled: stopping the command's process tree"));
            killed = true;
            observer.notice(QStringLiteral("interrupted again: SIGKILL to the command's process tree"));
            tree.signalAll(SIGKILL);
        }
        if (stopAskedMs >= 0 && !killed && now - stopAskedMs > options.graceMs) {
            killed = true;
            observer.notice(QStringLiteral("the command did not stop within %1 s of SIGTERM: SIGKILL").arg(options.graceMs / 1000.0));
            tree.signalAll(SIGKILL);
        }
        if (!ready && tick.elapsed() < 5)
            QThread::msleep(20); // its pipes are closed but it has not exited: do not spin
        process.waitForFinished(0);
    }
    process.waitForFinished(1000);
    readOutput();
    // Whatever it left behind (a daemonised worker, a data loader, a process that left the group,
    // one re-parented to us) goes too: SIGTERM, then SIGKILL after the grace period.
    if (const int left = tree.alive(); left > 0) {
        observer.notice(QStringLiteral("stopping %1 process(es) the command left behind").arg(left));
        if (tree.stop(killed ? 0 : options.graceMs, hurry) > 0)
            observer.notice(QStringLiteral("processes the command left behind did not stop on SIGTERM: SIGKILL"));
    }
    sampler.stop();
    for (const SamplerReading &r : sampler.drain()) {
        steps.deviceReading(r);
        observer.devices(r);
        keepDevices(r);
    }
    for (const auto &[index, d] : devices)
        result.devices.push_back(d);
    // The job's tree is gone; what it wrote last is read, up to 64 MiB a source (no job writes that
    // much in its last moments; one that does is flooding).
    probe.finish(int64_t(64) << 20, [&](const QByteArray &line) { steps.probeLine(line, static_cast<double>(clock.elapsed())); }, probeLineTooLong);
    if (probe.leftUnread())
        observer.notice(QStringLiteral("the probe channel still held more than 64 MiB when the command ended: the rest is not read"));
    if (!probe.fileRefused().empty() && !probeFileNoticed)
        observer.notice(QString::fromStdString(probe.fileRefused()));
    outLines.flush([&](const QByteArray &line) { steps.outputLine(line, static_cast<double>(clock.elapsed())); });
    errLines.flush([&](const QByteArray &line) { steps.outputLine(line, static_cast<double>(clock.elapsed())); });
    log.close();

    const bool crashed = process.exitStatus() == QProcess::CrashExit;
    result.commandExitCode = crashed ? -1 : process.exitCode();
    result.commandSignal = crashed ? process.exitCode() : 0;
    result.stepSource = steps.source();
    result.hello = steps.hello();
    result.worldSize = steps.worldSize();
    result.outOfMemoryLine = steps.oomLine();
    result.samples = steps.samples();
    result.loggedLosses = steps.loggedLosses();
    result.loggingSteps = steps.loggingSteps();
    result.peakProcessTreeDeviceBytes = sampler.peakProcessTreeDeviceBytes();
    result.peakTreeRssBytes = sampler.peakTreeRssBytes();
    result.samplesTaken = sampler.samplesTaken();
    result.probeEventsRejected = steps.probeEventsRejected();
    result.probeFirstRejection = steps.firstProbeRejection();
    result.probeFileRefused = probe.fileRefused();

    PilotSummary &s = result.summary;
    std::vector<StepSample> measured;
    for (const StepSample &sample : result.samples)
        if (sample.phase == Phase::Train)
            measured.push_back(sample);
    summarizeSteps(measured, s);
    for (const auto &[rank, r] : steps.ranks()) {
        std::vector<StepSample> m(r.steps.begin() + std::min<size_t>(r.steps.size(), static_cast<size_t>(std::max(0, options.warmupSteps))), r.steps.end());
        PilotSummary rs;
        summarizeSteps(m, rs);
        RankFigures f;
        f.steps = static_cast<int64_t>(r.steps.size());
        f.stepTimeMeanMs = rs.stepTimeMeanMs;
        f.tokensPerSecond = rs.tokensPerSecond;
        f.peakAllocatedBytes = r.peakAllocated;
        f.peakReservedBytes = r.peakReserved;
        f.finalLoss = r.steps.empty() ? 0 : r.steps.back().loss;
        result.ranks[rank] = f;
        s.peakAllocatedBytes = std::max(s.peakAllocatedBytes, r.peakAllocated);
        s.peakReservedBytes = std::max(s.peakReservedBytes, r.peakReserved);
    }
    // The job's throughput is every rank's tokens; its step time is the slowest rank's.
    if (result.ranks.size() > 1) {
        double tokens = 0, slowest = 0;
        for (const auto &[rank, f] : result.ranks) {
            tokens += f.tokensPerSecond;
            slowest = std::max(slowest, f.stepTimeMeanMs);
        }
        s.tokensPerSecond = tokens;
        s.stepTimeMeanMs = slowest;
    }
    s.peakDeviceUsedBytes = std::max<int64_t>(0, steps.peak());
    std::vector<double> validation, checkpoint;
    for (const auto &v : steps.validations())
        validation.push_back(v.durationMs);
    for (const auto &c : steps.checkpoints()) {
        checkpoint.push_back(c.writeMs);
        s.checkpointBytes = std::max(s.checkpointBytes, c.bytes);
    }
    s.validationMs = mean(validation);
    s.checkpointWriteMs = mean(checkpoint);
    s.setupMs = steps.firstStepMs() >= 0 ? steps.firstStepMs() : 0;
    s.totalMs = static_cast<double>(clock.elapsed());
    for (auto it = result.samples.rbegin(); it != result.samples.rend(); ++it) {
        if (std::isfinite(it->loss)) {
            s.finalLoss = it->loss;
            break;
        }
    }
    if (result.samples.empty() && !result.loggedLosses.empty())
        s.finalLoss = result.loggedLosses.back().loss;
    // Trainer dicts without a step count: the job trained, how fast is not known.
    const bool lossesOnly = steps.stepsSeen() == 0 && !result.loggedLosses.empty();
    const std::string untimed = std::to_string(result.loggedLosses.size()) + " Trainer log" + (result.loggedLosses.size() == 1 ? "" : "s")
                                + " with a loss, no step count seen: step time unknown (--log-every N, the Trainer's logging_steps, times them)";

    const int64_t oomKillsAfter = cgroupOomKills();
    const bool oomKilled = crashed && result.commandSignal == SIGKILL && !killed && oomKillsBefore >= 0 && oomKillsAfter > oomKillsBefore;
    if (cancelled) {
        s.verdict = Verdict::Cancelled;
        s.message = "cancelled after " + std::to_string(steps.stepsSeen()) + " steps";
    } else if (!result.outOfMemoryLine.empty() || oomKilled) {
        s.verdict = Verdict::DoesNotFit;
        s.failedStep = steps.stepsSeen() + 1;
        s.failedPhase = "train";
        s.message = (oomKilled ? std::string("killed by the kernel's OOM killer") : "out of memory: " + result.outOfMemoryLine) + " (at step "
                    + std::to_string(s.failedStep) + ", peak device use seen " + std::to_string(s.peakDeviceUsedBytes) + " bytes)";
    } else if (lossesOnly && (result.stoppedOnPurpose || (!crashed && result.commandExitCode == 0))) {
        s.verdict = Verdict::Fits;
        s.message = (result.stoppedOnPurpose ? "stopped on purpose after " : "ran to the end: ") + untimed;
    } else if (steps.stepsSeen() == 0 && (result.stoppedOnPurpose || (!crashed && result.commandExitCode == 0))) {
        // Evidence of nothing: it may have run fine, but no step was seen to run.
        s.verdict = Verdict::Failed;
        s.message = result.stoppedOnPurpose ? "stopped as asked before any step was seen"
                                            : "the command ended without a step we could see (no probe events and no recognised log lines)";
    } else if (result.stoppedOnPurpose) {
        s.verdict = Verdict::Fits;
        s.message = "stopped on purpose after " + std::to_string(steps.stepsSeen()) + " steps";
    } else if (!crashed && result.commandExitCode == 0) {
        s.verdict = Verdict::Fits;
    } else {
        s.verdict = Verdict::Failed;
        s.message = crashed ? "the command was killed by signal " + std::to_string(result.commandSignal)
                            : "the command exited with code " + std::to_string(result.commandExitCode);
        s.failedStep = steps.stepsSeen() + 1;
        if (lossesOnly)
            s.message += " after " + untimed;
    }
    spdlog::info("watch: {} ({} steps from {}, {} device samples)", s.message.empty() ? toString(s.verdict) : s.message, steps.stepsSeen(),
                 result.stepSource, result.samplesTaken);
    return result;
}

} // namespace pb::watch
