#pragma once
// Runs the restoration proof (core/checkpoint/RestoreCheck) off the GUI thread and records it in
// the history as a restore-check run, the way `pilotbench-cli restore-check` does: run A trains
// K+M steps, run B trains K and checkpoints, a fresh pilotbench-cli process restores and trains M.
#include "config/RunConfig.h"

#include <QObject>
#include <QString>

#include <atomic>

class QThread;

namespace pb::ui {

class RestoreCheckRunner final : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RestoreCheckRunner)
public:
    explicit RestoreCheckRunner(QObject *parent = nullptr);
    // Cancels a running check and waits for it (the fresh process is stopped by the check itself).
    ~RestoreCheckRunner() override;
    // Default: pilotbench-cli next to the running program.
    void setCliPath(const QString &path) { m_cliPath = path; }
    const QString &cliPath() const { return m_cliPath; }
    void setSteps(int64_t before, int64_t after);
    // False when one is already running.
    bool start(const RunConfig &config, const QString &databasePath, const QString &checkpointDir);
    void cancel() { m_cancel.store(true); }
    bool isRunning() const { return m_running; }

Q_SIGNALS:
    // `runId` 0 when nothing was recorded (the check refused its input before it began).
    void finished(qint64 runId, bool pass, const QString &message);

private:
    QThread *m_thread = nullptr;
    QObject *m_context = nullptr;
    QString m_cliPath;
    int64_t m_before = 4, m_after = 4;
    std::atomic<bool> m_cancel {false};
    bool m_running = false;
};

} // namespace pb::ui
