#pragma once
// A watched command's steps as they come: from the probe's events (every rank) or, without the
// probe, from the log lines the command prints (the Trainer's dicts, tqdm's counter), with the
// devices' readings between steps and an out-of-memory line when one is printed. One per run.
#include "result/PilotTypes.h"
#include "watch/DeviceSampler.h"
#include "watch/LogRecognizer.h"
#include "watch/WatchedCommand.h"

#include <QByteArray>
#include <QJsonObject>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb::watch {

struct RankSteps {
    std::vector<StepSample> steps;
    int64_t peakAllocated = 0, peakReserved = 0;
};

// Turns the command's output and the probe's events into steps, for one run.
class StepCollector {
public:
    StepCollector(const WatchOptions &options, WatchObserver &observer) : m_options(options), m_observer(observer), m_loggingSteps(options.logEvery) {}

    // One line of the probe channel: an event checked by readProbeLine, or refused, counted and
    // named (never averaged in).
    void probeLine(const QByteArray &line, double nowMs);
    // A line of the probe channel refused before it was parsed (longer than kMaxProbeLineBytes).
    void probeRejected(const std::string &why);
    int64_t probeEventsRejected() const { return m_probeRejected; }
    const std::string &firstProbeRejection() const { return m_firstProbeRejection; }

    // A line of the command's own output: log-line steps (only while the probe says nothing) and
    // out-of-memory reports.
    void outputLine(const QByteArray &bytes, double nowMs);

    void deviceReading(const SamplerReading &r);
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
    void trainerLoss(const RecognizedLine &r, double nowMs);

    void addRankZeroStep(StepSample s, double nowMs);

    const WatchOptions &m_options;
    WatchObserver &m_observer;
    std::string m_source = "none";
    std::string m_oomLine;
    int64_t m_probeLines = 0, m_probeRejected = 0;
    std::string m_firstProbeRejection;       // "probe line 4: step event: step_time_ms: -50 is negative"
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

} // namespace pb::watch
