#pragma once
// Records a pilot in the history as it runs (through the writer thread, so the pilot never waits
// on the disk) and passes every event on to another observer (the CLI's printer, the GUI's sample
// buffer). A history write failure (a full disk) stops the run cleanly through the stop flag.
// A single-process pilot that fits also leaves its calibration residual (see PilotCalibration.h).
#include "engine/PilotEngine.h"
#include "history/HistoryWriter.h"

#include <atomic>
#include <mutex>
#include <optional>

namespace pb {

class PilotRecorder final : public PilotObserver {
public:
    PilotRecorder(HistoryWriter &writer, PilotObserver *next, std::atomic<bool> *stopFlag);
    int64_t begin(const RunConfig &config, const PilotOptions &options, const QString &kind = QStringLiteral("pilot"),
                  std::optional<int64_t> parentRunId = std::nullopt);
    void finish(const PilotRun &run);
    // Off by default: only a plain single-process pilot measures what the estimator predicts (a
    // scaling baseline runs under data-parallel hooks). Set before finish().
    void setRecordsCalibration(bool on) { m_recordsCalibration = on; }
    int64_t runId() const { return m_runId; }
    std::string historyError() const;
    // After finish(): when the history stopped accepting writes, the run's verdict becomes failed
    // with the reason, written once more on a fresh connection so the history says what is printed.
    // Returns the line to print instead of "recorded as run N" (empty when all was recorded).
    QString settleUnrecorded(PilotRun &run, const QString &database);

    void phaseStarted(Phase phase, int64_t step) override;
    void phaseFinished(const PhaseMark &mark) override;
    void stepFinished(const StepSample &sample) override;
    void validationFinished(const ValidationResult &result) override;
    void checkpointWritten(const CheckpointWrite &write) override;

private:
    void check(bool ok);
    void recordCalibration(const PilotRun &run);
    HistoryWriter &m_writer;
    PilotObserver *m_next;
    std::atomic<bool> *m_stop;
    int64_t m_runId = 0;
    bool m_recordsCalibration = false;
    RunConfig m_config;
    std::string m_device;
    bool m_distributed = false;
    Environment m_environment;
    mutable std::mutex m_mutex;
    std::string m_error;
    std::atomic<int64_t> m_samplesSeen {0};
};

} // namespace pb
