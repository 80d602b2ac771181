#pragma once
// Runs the user's own command (core/workflow/WatchRun) off the GUI thread, the way PilotController
// runs our engine: a QThread hosting a context object, steps into the shared SampleBuffer, the
// command's output into a byte buffer of its own; the view's frame timer drains both, so a chatty
// command costs the GUI one signal a frame, never one per chunk. The outcome comes back as a queued
// call, dropped by a generation counter once superseded.
#include "result/PilotTypes.h"
#include "workflow/WatchRun.h"

#include <QByteArray>
#include <QObject>
#include <QString>
#include <QStringDecoder>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

class QThread;

namespace pb::ui {

class SampleBuffer;

class WatchController final : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(WatchController)
public:
    // Above this much undrained output the oldest is dropped (and said so): the GUI never holds
    // more than a few frames' worth of a command that prints faster than it can be shown.
    static constexpr qsizetype kMaxPendingOutputBytes = 4 * 1024 * 1024;

    WatchController(SampleBuffer &buffer, QObject *parent = nullptr);
    // Cancels a running command and waits: the core stops its whole process tree (SIGTERM, then
    // SIGKILL after the grace period) and records what was measured.
    ~WatchController() override;

    // False (and nothing started) while a command runs. `request.options.cancel` is set here.
    bool start(WatchRunRequest request);
    void cancel();
    bool isRunning() const { return m_running; }

    // Emits output() for what the command printed since the last call, one signal per stream
    // change; the view's frame timer calls it.
    void drainOutput();
    // Peak device memory used (NVML / ROCm SMI) or, without them, the process tree's RSS; -1 unknown.
    int64_t peakMemoryBytes() const { return m_peakMemoryBytes.load(std::memory_order_relaxed); }
    // While it runs: where the figures come from ("" until known); after it: the result's.
    const QString &deviceSource() const { return m_deviceSource; }
    const QString &stepSource() const { return m_stepSource; }
    // The command's log file of the last finished run.
    const QString &logPath() const { return m_logPath; }

Q_SIGNALS:
    // 0: the command started; its run id is known once it ends (runFinished carries it).
    void runStarted(qint64 runId);
    void processStarted(qint64 pid, const QString &deviceSource);
    void output(const QString &text, bool isStderr);
    void notice(const QString &text);
    void runFinished(qint64 runId, const pb::PilotSummary &summary, const QString &stepSource, const QString &deviceSource);
    // Refused before anything ran (a missing program: the message names it), or the history could
    // not take the result.
    void runFailed(const QString &message);

private:
    class Observer;
    struct Chunk {
        bool isStderr = false;
        QByteArray bytes;
    };
    void appendOutput(bool isStderr, const QByteArray &bytes);
    void notePeak(int64_t bytes);

    SampleBuffer &m_buffer;
    QThread *m_thread = nullptr;
    QObject *m_context = nullptr;
    std::atomic<bool> m_cancel {false};
    std::atomic<int64_t> m_peakMemoryBytes {-1};
    int m_generation = 0;
    bool m_running = false;
    QString m_deviceSource, m_stepSource, m_logPath;

    std::mutex m_outputMutex;
    std::vector<Chunk> m_pendingOutput;
    qsizetype m_pendingBytes = 0, m_droppedBytes = 0;
    // GUI thread only: a UTF-8 sequence split between two reads is completed by the next one.
    QStringDecoder m_stdoutDecoder {QStringDecoder::Utf8}, m_stderrDecoder {QStringDecoder::Utf8};
};

} // namespace pb::ui
