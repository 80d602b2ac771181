#pragma once
// Runs PilotEngine off the GUI thread: a QThread hosting a context object, the engine reporting
// into a SampleBuffer (drained by the view's frame timer) and into the history through
// PilotRecorder. The outcome comes back as a queued call; a superseded run's outcome is dropped by
// a generation counter. An exception in the engine becomes failed(message): the GUI keeps running.
#include "config/RunConfig.h"
#include "engine/PilotEngine.h"

#include <QObject>
#include <QString>

#include <atomic>

class QThread;

namespace pb::ui {

class SampleBuffer;

class PilotController final : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PilotController)
public:
    PilotController(SampleBuffer &buffer, QObject *parent = nullptr);
    // Cancels a running pilot and waits for the thread: the engine stops within one micro-batch.
    ~PilotController() override;

    // False (and nothing started) while another pilot runs. `options.cancel` is set here.
    bool start(const RunConfig &config, PilotOptions options, const QString &databasePath);
    void cancel();
    bool isRunning() const { return m_running; }
    int64_t currentRunId() const { return m_runId; }

Q_SIGNALS:
    void runStarted(qint64 runId);
    // `historyError` is non-empty when the history stopped accepting writes during the run.
    void runFinished(qint64 runId, const pb::PilotSummary &summary, const QString &historyError);
    // The engine or the history refused the run (bad input, an exception): nothing was measured.
    void runFailed(const QString &message);

private:
    SampleBuffer &m_buffer;
    QThread *m_thread = nullptr;
    QObject *m_context = nullptr;
    std::atomic<bool> m_cancel {false};
    int m_generation = 0;
    bool m_running = false;
    int64_t m_runId = 0;
};

} // namespace pb::ui
