#pragma once
// Runs the checklist's scaling step (`pilotbench-cli scale --jsonl`) as a child process rather than
// on a thread: the step starts its own rank processes and must own them, and a process boundary
// lets the GUI cancel it with SIGTERM and still get a cancelled run recorded by the CLI itself.
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>

#include <memory>

class QTemporaryDir;
class QTimer;

namespace pb::ui {

class ScaleRunner final : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ScaleRunner)
public:
    explicit ScaleRunner(QObject *parent = nullptr);
    // Cancels a running step and waits for the CLI (which stops its ranks) so nothing outlives us.
    ~ScaleRunner() override;

    // Default: pilotbench-cli next to the running program.
    void setCliPath(const QString &path) { m_cliPath = path; }
    const QString &cliPath() const { return m_cliPath; }
    // Used by the baseline and by every rank; the defaults keep a GUI step short.
    void setSteps(int warmup, int steps);

    // `device`: "cpu", or "cuda"/"cuda:N" (the CLI puts rank r on cuda:r itself). False when a step
    // is already running; otherwise exactly one finished() follows.
    bool start(const RunConfig &config, const QString &databasePath, int gpus, ParallelStrategy strategy, const QString &device);
    // SIGTERM, then SIGKILL after a grace period; finished() follows.
    void cancel();
    bool isRunning() const { return m_running; }
    // The config file of the step in progress ("" when none); it lives only as long as the step.
    QString configPath() const;
    // The last `summary` event (empty until a step completes): the figures for the GUI to show.
    const QJsonObject &summary() const { return m_summary; }

Q_SIGNALS:
    // Milestones of the step (0 of 3 baseline running, 1 ranks starting, 2 ranks running, 3 done).
    void progress(int done, int total, const QString &text);
    void logLine(const QString &line);
    // `runId`: the recorded scale run, 0 when none was recorded (refused input, failed start, or a
    // CLI killed before it could record). `exitCode` follows the CLI's: 0 fits, 1 failure, 2
    // invalid input, 3 out of memory, 4 cancelled.
    void finished(qint64 runId, int exitCode, const QString &message);

private:
    QList<QByteArray> takeLines(QProcess::ProcessChannel channel);
    void readStdout();
    void readStderr();
    void handleLine(const QByteArray &line);
    void handleStderrLine(const QString &line);
    void onFinished(int exitCode, QProcess::ExitStatus status);
    void onError(QProcess::ProcessError error);
    void finishLater(qint64 runId, int exitCode, const QString &message);
    QString successMessage() const;

    QProcess *m_process = nullptr;
    QTimer *m_killTimer = nullptr;
    std::unique_ptr<QTemporaryDir> m_workDir;
    QString m_cliPath;
    int m_warmup = 2;
    int m_steps = 10;
    int m_gpus = 0;
    int m_ranksStarted = 0;
    bool m_running = false;
    bool m_cancelRequested = false;
    QJsonObject m_summary;
    QJsonObject m_error;             // the CLI's `error` event: the recorded run and why it ended
    QString m_lastStderrLine;
};

} // namespace pb::ui
