#include "watch/WatchedCommand.h"

#include "result/ResultJson.h"
#include "result/StepStatistics.h"
#include "util/Errors.h"
#include "watch/LogRecognizer.h"
#include "watch/ProbeEvents.h"

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
#include <limits>
#include <cerrno>
#include <csignal>
#include <map>
#include <sys/prctl.h>
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

// A process's start time (clock ticks since boot, field 22 of /proc/PID/stat); 0 when it is gone.
// With the PID it names one process: a PID reused after the job's process ended is someone else's.
quint64 startTime(int64_t pid)
{
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly))
        return 0;
    const QByteArray text = stat.readAll();
    const qsizetype close = text.lastIndexOf(')'); // the command name may hold spaces
    if (close < 0)
        return 0;
    const QList<QByteArray> fields = text.mid(close + 2).split(' ');
    return fields.size() > 19 ? fields[19].toULongLong() : 0; // field 22 counted from "state" (field 3)
}

// Every process seen in the command's tree, by PID and start time.
using SeenProcesses = std::map<int64_t, quint64>;

void remember(SeenProcesses &seen, qint64 root)
{
    for (int64_t p : processTree(root))
        if (!seen.count(p))
            if (const quint64 t = startTime(p))
                seen[p] = t;
}

// Signals the command's process group and every process of its tree seen so far that is still the
// same process (some leave the group: setsid, a launcher's own groups); returns how many were alive.
int signalTree(qint64 pid, SeenProcesses &seen, int signal)
{
    if (pid <= 0)
        return 0;
    remember(seen, pid);
    ::kill(-static_cast<pid_t>(pid), signal);
    int alive = 0;
    for (auto it = seen.begin(); it != seen.end();) {
        if (startTime(it->first) != it->second) {
            it = seen.erase(it); // gone, or its PID now belongs to another process
            continue;
        }
        ::kill(static_cast<pid_t>(it->first), signal);
        ++alive;
        ++it;
    }
    return alive;
}

bool groupAlive(qint64 pgid) { return pgid > 0 && (::kill(-static_cast<pid_t>(pgid), 0) == 0 || errno == EPERM); }

struct RankSteps {
    std::vector<StepSample> steps;
    int64_t peakAllocated = 0, peakReserved = 0;
};

// Turns the command's output and the probe's events into steps, for one run.
class StepCollector {
public:
    StepCollector(const WatchOptions &options, WatchObserver &observer) : m_options(options), m_observer(observer), m_loggingSteps(options.logEvery) {}

    void probeLine(const QByteArray &line, double nowMs)
    {
        const auto event = parseProbeLine(line);
        if (!event)
            return;
        m_lastEventMs = nowMs;
        switch (event->kind) {
        case ProbeEvent::Kind::Hello:
            if (event->rank == 0 || m_hello.isEmpty())
                m_hello = event->fields;
            m_worldSize = std::max(m_worldSize, event->fields.value(QStringLiteral("world_size")).toInt(1));
            break;
        case ProbeEvent::Kind::Step: {
            if (m_source != "probe") {
                m_source = "probe";
                m_observer.stepSource(m_source);
                m_observer.notice(QStringLiteral("steps from the probe's events"));
            }
            StepSample s = stepSampleFromProbe(event->fields);
            RankSteps &rank = m_ranks[event->rank];
            if (s.step <= 0)
                s.step = static_cast<int64_t>(rank.steps.size()) + 1;
            rank.peakAllocated = std::max(rank.peakAllocated, s.peakAllocatedBytes);
            rank.peakReserved = std::max(rank.peakReserved, s.reservedBytes);
            if (event->rank == 0)
                addRankZeroStep(s, nowMs);
            rank.steps.push_back(s);
            break;
        }
        case ProbeEvent::Kind::Validation:
            if (event->rank == 0) {
                m_validations.push_back(validationFromProbe(event->fields));
                m_observer.validationFinished(m_validations.back());
            }
            break;
        case ProbeEvent::Kind::Checkpoint:
            if (event->rank == 0) {
                m_checkpoints.push_back(checkpointFromProbe(event->fields));
                m_observer.checkpointWritten(m_checkpoints.back());
            }
            break;
        default:
            // The probe's "error" event: an exception left the job; an out-of-memory one is the verdict.
            if (event->fields.value(QStringLiteral("event")).toString() == QLatin1String("error") && event->fields.value(QStringLiteral("oom")).toBool()
                && m_oomLine.empty()) {
                m_oomLine = (event->fields.value(QStringLiteral("type")).toString() + QStringLiteral(": ") + event->fields.value(QStringLiteral("message")).toString())
                                .left(400)
                                .toStdString();
                m_observer.notice(QStringLiteral("out of memory reported by the probe at step %1").arg(stepsSeen() + 1));
            }
            break;
        }
    }

    // A line of the command's own output: log-line steps (only while the probe says nothing) and
    // out-of-memory reports.
    void outputLine(const QByteArray &bytes, double nowMs)
    {
        const QString line = QString::fromUtf8(bytes);
        if (m_oomLine.empty() && isOutOfMemoryLine(line)) {
            m_oomLine = line.trimmed().left(400).toStdString();
            m_observer.notice(QStringLiteral("out of memory reported at step %1: %2").arg(stepsSeen()).arg(QString::fromStdString(m_oomLine)));
        }
        if (m_source == "probe")
            return;
        const auto r = recognizeLogLine(line);
        if (!r)
            return;
        if (m_source != "log-lines") {
            m_source = "log-lines";
            m_observer.stepSource(m_source);
            m_observer.notice(QStringLiteral("no probe events: steps from the command's log lines (%1)")
                                  .arg(r->kind == RecognizedLine::Kind::TqdmProgress ? QStringLiteral("progress bar") : QStringLiteral("Trainer logs")));
        }
        if (r->kind == RecognizedLine::Kind::TrainerArguments) {
            if (!m_loggingSteps) {
                m_loggingSteps = r->loggingSteps;
                m_observer.notice(QStringLiteral("the Trainer logs every %1 steps (its logging_steps)").arg(*r->loggingSteps));
            }
            return;
        }
        if (r->loss)
            m_lastLoss = *r->loss;
        if (r->learningRate)
            m_lastLr = *r->learningRate;
        if (r->kind == RecognizedLine::Kind::TrainerLog && r->loss) {
            trainerLoss(*r, nowMs);
            return;
        }
        if (r->kind != RecognizedLine::Kind::TqdmProgress || !r->step || m_stepsFromLogs)
            return;
        // Only the training bar counts steps: not a validation, evaluation, loading or prediction bar.
        // The Trainer's evaluation bar has no description, so the first bar's total names the training one.
        static const QStringList others {QStringLiteral("valid"), QStringLiteral("eval"), QStringLiteral("load"), QStringLiteral("predict"),
                                         QStringLiteral("sanity"), QStringLiteral("test"), QStringLiteral("download"), QStringLiteral("map")};
        for (const QString &word : others)
            if (r->description.contains(word, Qt::CaseInsensitive))
                return;
        if (r->total) {
            if (m_trainTotal < 0)
                m_trainTotal = *r->total;
            else if (*r->total != m_trainTotal)
                return;
        }
        // A counter that moved from a to b: b - a steps in the wall time since it last moved.
        const long long counter = *r->step;
        if (m_lastCounter < 0 || counter < m_lastCounter) {
            m_lastCounter = counter;
            m_lastCounterMs = nowMs;
            return;
        }
        if (counter == m_lastCounter)
            return;
        // The job's own rate where tqdm prints one; our clock only moves once per read of the
        // output, so several updates read together would otherwise get 0 ms and the rest.
        double perStep = 0;
        if (r->secondsPerStep && *r->secondsPerStep > 0)
            perStep = *r->secondsPerStep * 1000.0;
        else if (nowMs > m_lastCounterMs)
            perStep = (nowMs - m_lastCounterMs) / static_cast<double>(counter - m_lastCounter);
        else
            return; // timed by the next update that comes later
        for (long long k = m_lastCounter + 1; k <= counter; ++k) {
            StepSample s;
            s.step = k;
            s.stepTimeMs = perStep;
            s.loss = m_lastLoss;
            s.learningRate = m_lastLr;
            addRankZeroStep(s, nowMs);
            m_ranks[0].steps.push_back(s);
        }
        m_lastCounter = counter;
        m_lastCounterMs = nowMs;
    }

    void deviceReading(const SamplerReading &r)
    {
        const int64_t used = watchedMemoryBytes(r);
        m_deviceSinceStep = std::max(m_deviceSinceStep, used);
        m_peak = std::max(m_peak, used);
    }
    int64_t peak() const { return m_peak; }

    int64_t stepsSeen() const { return m_ranks.count(0) ? static_cast<int64_t>(m_ranks.at(0).steps.size()) : 0; }
    const std::vector<LoggedLoss> &loggedLosses() const { return m_loggedLosses; }
    std::optional<int64_t> loggingSteps() const { return m_loggingSteps; }
    double firstStepMs() const { return m_firstStepMs; }
    const std::string &source() const { return m_source; }
    const std::string &oomLine() const { return m_oomLine; }
    const std::vector<StepSample> &samples() const { return m_samples; }
    const std::map<int, RankSteps> &ranks() const { return m_ranks; }
    const std::vector<ValidationResult> &validations() const { return m_validations; }
    const std::vector<CheckpointWrite> &checkpoints() const { return m_checkpoints; }
    const QJsonObject &hello() const { return m_hello; }
    int worldSize() const { return m_worldSize; }

private:
    // A Trainer dict with a training loss is recorded as it comes. With logging_steps known and no
    // progress bar counting, the dicts count the steps too: the first one marks step N (the steps
    // before it include start-up and stay untimed), each later one N steps in the time since.
    void trainerLoss(const RecognizedLine &r, double nowMs)
    {
        LoggedLoss logged;
        logged.ordinal = static_cast<int64_t>(m_loggedLosses.size()) + 1;
        logged.timeMs = nowMs;
        logged.loss = *r.loss;
        logged.learningRate = r.learningRate;
        logged.epoch = r.epoch;
        m_loggedLosses.push_back(logged);
        m_observer.trainerLoss(logged);
        if (!m_loggingSteps || m_lastCounter >= 0)
            return;
        const int64_t n = *m_loggingSteps;
        const int64_t counter = logged.ordinal * n;
        if (m_loggedLosses.size() > 1) {
            const double perStep = (nowMs - m_loggedLosses[m_loggedLosses.size() - 2].timeMs) / static_cast<double>(n);
            for (int64_t k = counter - n + 1; k <= counter; ++k) {
                StepSample s;
                s.step = k;
                s.stepTimeMs = perStep;
                s.loss = logged.loss;
                s.learningRate = logged.learningRate.value_or(m_lastLr);
                addRankZeroStep(s, nowMs);
                m_ranks[0].steps.push_back(s);
            }
            m_stepsFromLogs = true;
        }
    }

    void addRankZeroStep(StepSample s, double nowMs)
    {
        if (m_firstStepMs < 0)
            m_firstStepMs = nowMs;
        s.phase = static_cast<int64_t>(m_samples.size()) < m_options.warmupSteps ? Phase::Warmup : Phase::Train;
        // Steps closer together than the sampling interval keep the last reading.
        if (m_deviceSinceStep >= 0)
            m_lastDevice = m_deviceSinceStep;
        if (m_lastDevice >= 0)
            s.deviceUsedBytes = m_lastDevice;
        m_deviceSinceStep = -1;
        m_samples.push_back(s);
        m_observer.stepFinished(s);
    }

    const WatchOptions &m_options;
    WatchObserver &m_observer;
    std::string m_source = "none";
    std::string m_oomLine;
    std::map<int, RankSteps> m_ranks;
    std::vector<StepSample> m_samples;
    std::vector<ValidationResult> m_validations;
    std::vector<CheckpointWrite> m_checkpoints;
    QJsonObject m_hello;
    int m_worldSize = 1;
    double m_firstStepMs = -1, m_lastEventMs = -1;
    long long m_lastCounter = -1;
    long long m_trainTotal = -1;
    std::optional<int64_t> m_loggingSteps;
    std::vector<LoggedLoss> m_loggedLosses;
    bool m_stepsFromLogs = false;
    double m_lastCounterMs = 0;
    double m_lastLoss = std::numeric_limits<double>::quiet_NaN(), m_lastLr = std::numeric_limits<double>::quiet_NaN();
    int64_t m_deviceSinceStep = -1, m_lastDevice = -1, m_peak = -1;
};

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
    env.insert(QLatin1String(kProbeVariable), result.probePath);
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
    process.setProcessEnvironment(env);
    process.setStandardInputFile(QProcess::nullDevice()); // a job that prompts gets end of file, not a hang
    if (!options.workingDir.isEmpty())
        process.setWorkingDirectory(options.workingDir);
    process.setChildProcessModifier([] {
        ::setpgid(0, 0);                     // its own group: the whole tree can be signalled
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // and it ends if watch itself dies
    });
    process.start();
    if (!process.waitForStarted(30000))
        throw InvalidInputError("COMMAND", "'" + program.toStdString() + "' could not be started: " + process.errorString().toStdString());
    const qint64 pid = process.processId();
    spdlog::info("watch: started {} (pid {}), devices from {}", program.toStdString(), pid, result.deviceSource);
    observer.started(pid, QString::fromStdString(result.deviceSource));

    DeviceSampler sampler(std::move(backend), pid, options.sampleIntervalMs);
    sampler.start();
    StepCollector steps(options, observer);
    LineSplitter outLines, errLines, probeLines;
    QFile probe(result.probePath);
    qint64 probeOffset = 0;
    SeenProcesses seen;
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
    auto readProbe = [&] {
        if (!probe.isOpen() && QFileInfo::exists(result.probePath))
            probe.open(QIODevice::ReadOnly);
        if (!probe.isOpen())
            return;
        probe.seek(probeOffset);
        const QByteArray bytes = probe.readAll();
        probeOffset += bytes.size();
        const double now = static_cast<double>(clock.elapsed());
        probeLines.feed(bytes, [&](const QByteArray &line) { steps.probeLine(line, now); });
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
        signalTree(pid, seen, SIGTERM);
    };

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
        if (seen.size() < 4096 && (sinceScan.elapsed() > 200 || !sinceScan.isValid())) {
            remember(seen, pid);
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
        if (stopAskedMs >= 0 && !killed && now - stopAskedMs > options.graceMs) {
            killed = true;
            observer.notice(QStringLiteral("the command did not stop within %1 s of SIGTERM: SIGKILL").arg(options.graceMs / 1000.0));
            signalTree(pid, seen, SIGKILL);
        }
        if (!ready && tick.elapsed() < 5)
            QThread::msleep(20); // its pipes are closed but it has not exited: do not spin
        process.waitForFinished(0);
    }
    process.waitForFinished(1000);
    readOutput();
    // Whatever it left behind (a daemonised worker, a data loader, a process that left the group)
    // goes too: SIGTERM, then SIGKILL after the grace period.
    auto leftovers = [&] {
        int alive = groupAlive(pid) ? 1 : 0;
        for (const auto &[p, t] : seen)
            alive += startTime(p) == t ? 1 : 0;
        return alive;
    };
    if (leftovers() > 0) {
        signalTree(pid, seen, SIGTERM);
        QElapsedTimer grace;
        grace.start();
        while (leftovers() > 0 && grace.elapsed() < options.graceMs)
            QThread::msleep(40);
        if (leftovers() > 0) {
            observer.notice(QStringLiteral("processes the command left behind did not stop on SIGTERM: SIGKILL"));
            signalTree(pid, seen, SIGKILL);
        }
    }
    sampler.stop();
    for (const SamplerReading &r : sampler.drain()) {
        steps.deviceReading(r);
        observer.devices(r);
        keepDevices(r);
    }
    for (const auto &[index, d] : devices)
        result.devices.push_back(d);
    readProbe();
    probeLines.flush([&](const QByteArray &line) { steps.probeLine(line, static_cast<double>(clock.elapsed())); });
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
