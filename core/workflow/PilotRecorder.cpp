#include "workflow/PilotRecorder.h"
#include "workflow/RunRecording.h"

#include "config/RunConfigJson.h"
#include "workflow/PilotCalibration.h"
#include "engine/PilotJson.h"
#include "history/HistoryDatabase.h"

#include <spdlog/spdlog.h>

namespace pb {

PilotRecorder::PilotRecorder(HistoryWriter &writer, PilotObserver *next, std::atomic<bool> *stopFlag)
    : m_writer(writer), m_next(next), m_stop(stopFlag)
{
}

int64_t PilotRecorder::begin(const RunConfig &config, const PilotOptions &options, const QString &kind, std::optional<int64_t> parentRunId)
{
    RunStart start = runStartFor(config, kind, options.device);
    m_config = config;
    m_device = options.device;
    m_distributed = options.distributed != nullptr;
    m_environment = captureEnvironment(options.device);
    requireRunsHere(config, m_environment); // before a run is recorded
    start.environmentJson = toJson(m_environment);
    start.parentRunId = parentRunId;
    m_runId = m_writer.beginRun(start);
    return m_runId;
}

void PilotRecorder::finish(const PilotRun &run)
{
    check(m_writer.finishRun(m_runId, run.summary, summaryJson(run)));
    if (m_recordsCalibration && !m_distributed && run.summary.verdict == Verdict::Fits)
        recordCalibration(run);
    check(m_writer.flush());
}

void PilotRecorder::recordCalibration(const PilotRun &run)
{
    // The engine's own capture is what ran; begin()'s is the fallback for a run that never started.
    const Environment &env = run.environment.torchVersion.empty() ? m_environment : run.environment;
    try {
        check(m_writer.appendCalibration(calibrationRecord(m_config, m_device, env, run.summary, m_runId)));
    } catch (const std::exception &e) {
        spdlog::warn("pilot run {}: no calibration residual stored: {}", m_runId, e.what());
    }
}

QString PilotRecorder::settleUnrecorded(PilotRun &run, const QString &database)
{
    const std::string error = historyError();
    if (error.empty())
        return {};
    run.summary.verdict = Verdict::Failed;
    run.summary.message = error;
    const history::LateFinish late = history::finishRunLate(database, m_runId, QLatin1String(toString(Verdict::Failed)), summaryJson(run));
    const QString kept = late.storedSamples < 0 ? QStringLiteral("an unknown number") : QString::number(late.storedSamples);
    if (late.error.empty())
        return QStringLiteral("NOT fully recorded: run %1 in %2 holds %3 of the %4 steps run, and is marked failed").arg(m_runId).arg(database, kept).arg(m_samplesSeen.load());
    spdlog::error("run {} could not be marked failed either: {}", m_runId, late.error);
    return QStringLiteral("NOT recorded: run %1 in %2 could not be marked failed either (%3); it holds %4 of the %5 steps run and will show as interrupted")
        .arg(m_runId)
        .arg(database, QString::fromStdString(late.error), kept)
        .arg(m_samplesSeen.load());
}

std::string PilotRecorder::historyError() const
{
    std::lock_guard lock(m_mutex);
    return m_error;
}

void PilotRecorder::check(bool ok)
{
    if (ok)
        return;
    std::lock_guard lock(m_mutex);
    if (m_error.empty()) {
        m_error = "the history database stopped accepting writes: " + m_writer.lastError();
        spdlog::error("{}; stopping the pilot", m_error);
        if (m_stop)
            m_stop->store(true);
    }
}

void PilotRecorder::phaseStarted(Phase phase, int64_t step)
{
    if (m_next)
        m_next->phaseStarted(phase, step);
}

void PilotRecorder::phaseFinished(const PhaseMark &mark)
{
    check(m_writer.appendPhase(m_runId, mark));
    if (m_next)
        m_next->phaseFinished(mark);
}

void PilotRecorder::stepFinished(const StepSample &sample)
{
    ++m_samplesSeen;
    check(m_writer.appendSample(m_runId, sample));
    if (m_next)
        m_next->stepFinished(sample);
}

void PilotRecorder::validationFinished(const ValidationResult &result)
{
    check(m_writer.appendValidation(m_runId, result));
    if (m_next)
        m_next->validationFinished(result);
}

void PilotRecorder::checkpointWritten(const CheckpointWrite &write)
{
    check(m_writer.appendCheckpoint(m_runId, write));
    if (m_next)
        m_next->checkpointWritten(write);
}

} // namespace pb
