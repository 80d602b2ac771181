#pragma once
// A user's own training command, run and measured like our own pilot: started in its own process
// group with its output passed through and kept in a log file; its steps from the probe's events
// (resources/python/pilotbench_probe.py) or, without the probe, from the log lines it prints; the
// devices sampled in their own thread; stopped as a whole tree (SIGTERM, then SIGKILL after a grace
// period) on cancel or when the asked steps or seconds are reached; out of memory a verdict.
// Blocking: the CLI calls it on its main thread, the GUI on a worker thread.
#include "result/PilotObserver.h"
#include "watch/DeviceSampler.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb::watch {

struct WatchOptions {
    QStringList command;                 // program and its arguments, as the user gave them
    QString workingDir;                  // "": the current folder
    QStringList environment;             // NAME=VALUE additions
    QString runDir;                      // the log and the probe's events go here (made if missing)
    std::optional<int64_t> maxSteps;     // stop on purpose after this many steps (rank 0)
    std::optional<double> maxSeconds;    // stop on purpose after this long
    // How many steps each Trainer dict with a loss stands for (the Trainer's logging_steps); unset:
    // read from the command's printed TrainingArguments when it prints them.
    std::optional<int64_t> logEvery;
    int warmupSteps = 2;                 // steps left out of the figures (compilation, allocator warm-up)
    int graceMs = 10000;                 // between SIGTERM and SIGKILL
    int sampleIntervalMs = 50;
    bool sampleDevices = true;           // false: /proc only
    QString nvmlLibrary;                 // "": libnvidia-ml.so.1 (tests load a fake)
    QString probeModuleDir;              // prepended to PYTHONPATH ("": left alone)
    const std::atomic<bool> *cancel = nullptr;
    const std::atomic<bool> *stopNow = nullptr; // a second Ctrl-C: SIGKILL at once, no grace period
};

// One Trainer dict with a training loss, as printed (the mean over the steps since the last one).
struct LoggedLoss {
    int64_t ordinal = 0;                 // 1-based among the dicts with a loss
    double timeMs = 0;                   // since the command started
    double loss = 0;
    std::optional<double> learningRate, epoch;
};

// What a front end shows while the command runs; the pilot events are rank 0's.
class WatchObserver : public PilotObserver {
public:
    virtual void started(qint64 /*pid*/, const QString & /*deviceSource*/) {}
    virtual void output(bool /*isStderr*/, const QByteArray & /*bytes*/) {}
    virtual void devices(const SamplerReading & /*reading*/) {}
    // Where the steps come from, when that is first known or changes: "probe" or "log-lines".
    virtual void stepSource(const std::string & /*source*/) {}
    // One line a person reads: where the steps come from, a stop asked for, an OOM seen.
    virtual void notice(const QString & /*text*/) {}
    // A Trainer dict with a training loss, as it comes (whether or not it also counts steps).
    virtual void trainerLoss(const LoggedLoss & /*loss*/) {}
};

struct RankFigures {
    int64_t steps = 0;
    double stepTimeMeanMs = 0;           // over its measured steps
    double tokensPerSecond = 0;
    int64_t peakAllocatedBytes = 0;      // the probe's per-step peaks (0: not reported)
    int64_t peakReservedBytes = 0;
    double finalLoss = 0;
};

struct WatchResult {
    PilotSummary summary;                // verdict, message and the figures of rank 0's steps
    std::vector<StepSample> samples;     // rank 0's steps, with the device peak between steps
    int commandExitCode = 0;
    int commandSignal = 0;               // > 0 when the command was killed by a signal
    bool stoppedOnPurpose = false;       // --max-steps / --max-seconds reached
    std::string stepSource;              // "probe", "log-lines" or "none"
    std::string deviceSource;            // "nvml", "rocm-smi" or "proc"
    QJsonObject hello;                   // rank 0's hello event (versions, device names)
    std::map<int, RankFigures> ranks;
    int worldSize = 1;
    std::vector<DeviceReading> devices;  // the last reading of each device
    int64_t peakProcessTreeDeviceBytes = -1;
    int64_t peakTreeRssBytes = -1;
    int64_t samplesTaken = 0;
    std::string outOfMemoryLine;
    std::vector<LoggedLoss> loggedLosses; // every Trainer dict with a loss, steps or not
    std::optional<int64_t> loggingSteps;  // --log-every, or the Trainer's printed logging_steps
    QString logPath, probePath;
    // Probe lines refused (a figure out of bounds, not JSON, too long): counted, never averaged in.
    int64_t probeEventsRejected = 0;
    std::string probeFirstRejection;      // "probe line 4: step event: step_time_ms: -50 is negative"
    std::string probeFileRefused;         // the probe file was not a regular file: what it was
    // The run's summary as stored: toJson(summary) plus the fields above.
    QJsonObject toJson() const;
};

// The memory one reading says the watched job uses: the whole-device use of the devices its
// processes are on (NVML / ROCm SMI list them; other users' devices on a shared host do not count),
// of every device when the library cannot list processes, else the process tree's RSS.
int64_t watchedMemoryBytes(const SamplerReading &reading);

// Where `program` runs from: a path as given, else the first match on PATH (with `environment`'s
// PATH when it sets one). Throws InvalidInputError("COMMAND", ...) naming it when there is none.
// A relative path with a slash (./train.sh) is the working folder's.
QString resolveProgram(const QString &program, const QStringList &environment = {}, const QString &workingDir = {});
// Throws InvalidInputError("--env", ...) for an addition that is not NAME=VALUE.
void checkEnvironmentAdditions(const QStringList &environment);

// The device library `options` asks for (NVML, else ROCm SMI; a named fake in tests); nullptr with
// `why` when there is none or sampleDevices is off.
std::unique_ptr<DeviceBackend> openWatchBackend(const WatchOptions &options, std::string *why);

// Runs the command to its end (or to a stop) and returns what it measured, sampling `backend`
// (nullptr: /proc only). Throws InvalidInputError("COMMAND", ...) when the program does not exist
// or cannot be started.
WatchResult watchCommand(const WatchOptions &options, WatchObserver &observer, std::unique_ptr<DeviceBackend> backend);

} // namespace pb::watch
