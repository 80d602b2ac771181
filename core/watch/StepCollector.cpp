#include "watch/StepCollector.h"

#include "watch/ProbeEvents.h"

#include <QStringList>

#include <algorithm>

namespace pb::watch {

void StepCollector::probeRejected(const std::string &why)
{
    ++m_probeLines;
    ++m_probeRejected;
    const std::string named = "probe line " + std::to_string(m_probeLines) + ": " + why;
    if (m_firstProbeRejection.empty())
        m_firstProbeRejection = named;
    // A job that writes nothing but bad lines must not flood the terminal: the first few are shown,
    // the count is in the summary.
    if (m_probeRejected <= 3)
        m_observer.notice(QStringLiteral("probe event refused, not counted: %1").arg(QString::fromStdString(named)));
    else if (m_probeRejected == 4)
        m_observer.notice(QStringLiteral("more probe events refused: the summary counts them"));
}

void StepCollector::probeLine(const QByteArray &line, double nowMs)
{
    ProbeLine read = readProbeLine(line);
    if (!read.event) {
        probeRejected(read.rejection);
        return;
    }
    ++m_probeLines;
    const ProbeEvent *event = &*read.event;
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

void StepCollector::outputLine(const QByteArray &bytes, double nowMs)
{
    const QString line = QString::fromUtf8(bytes);
    if (const QString oom = m_oomLine.empty() ? outOfMemoryText(line) : QString(); !oom.isEmpty()) {
        m_oomLine = oom.toStdString();
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

void StepCollector::deviceReading(const SamplerReading &r)
{
    const int64_t used = watchedMemoryBytes(r);
    m_deviceSinceStep = std::max(m_deviceSinceStep, used);
    m_peak = std::max(m_peak, used);
}

void StepCollector::trainerLoss(const RecognizedLine &r, double nowMs)
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

void StepCollector::addRankZeroStep(StepSample s, double nowMs)
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

} // namespace pb::watch
