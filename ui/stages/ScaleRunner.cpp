#include "stages/ScaleRunner.h"

#include "config/RunConfigJson.h"
#include "util/JobTree.h"

#include <QCoreApplication>
#include <QDir>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTimer>
#include <spdlog/spdlog.h>

#include <csignal>
#include <exception>

namespace pb::ui {

namespace {

constexpr int kMilestones = 3;
constexpr int kKillGraceMs = 5000;
constexpr int kCancelled = 4;

// The CLI names ZeRO-3 fsdp and refuses "zero3"; every other name it checks itself, with a message.
QString cliStrategy(ParallelStrategy strategy)
{
    return strategy == ParallelStrategy::Zero3 ? QStringLiteral("fsdp") : QString::fromLatin1(toString(strategy));
}

// The GUI speaks of cuda:N; the scaling step takes the device kind only and places rank r on cuda:r.
QString cliDevice(const QString &device)
{
    return device.startsWith(QLatin1String("cuda")) ? QStringLiteral("cuda") : device;
}

qint64 runIdOf(const QJsonObject &event)
{
    return static_cast<qint64>(event.value(QStringLiteral("run_id")).toDouble());
}

} // namespace

ScaleRunner::ScaleRunner(QObject *parent)
    : QObject(parent), m_process(new QProcess(this)), m_killTimer(new QTimer(this)),
      m_cliPath(QCoreApplication::applicationDirPath() + QStringLiteral("/pilotbench-cli"))
{
    m_process->setStandardInputFile(QProcess::nullDevice());
    // A window that dies (a crash, a SIGKILL) takes the step down: SIGTERM, which scale records as cancelled.
    m_process->setChildProcessModifier([] { JobTree::prepareChild(SIGTERM); });
    m_killTimer->setSingleShot(true);
    m_killTimer->setInterval(kKillGraceMs);
    connect(m_killTimer, &QTimer::timeout, this, [this] {
        if (m_process->state() != QProcess::NotRunning) {
            spdlog::warn("pilotbench-cli scale ignored SIGTERM for {} s: killing it (its run stays unfinished in the history)", kKillGraceMs / 1000);
            m_process->kill();
        }
    });
    connect(m_process, &QProcess::readyReadStandardOutput, this, &ScaleRunner::readStdout);
    connect(m_process, &QProcess::readyReadStandardError, this, &ScaleRunner::readStderr);
    connect(m_process, &QProcess::finished, this, &ScaleRunner::onFinished);
    connect(m_process, &QProcess::errorOccurred, this, &ScaleRunner::onError);
}

ScaleRunner::~ScaleRunner()
{
    // No signals to receivers that may already be half torn down; just stop the process tree.
    disconnect(m_process, nullptr, this, nullptr);
    if (m_process->state() == QProcess::NotRunning)
        return;
    m_process->terminate();
    if (!m_process->waitForFinished(kKillGraceMs)) {
        m_process->kill();
        m_process->waitForFinished(-1);
    }
}

void ScaleRunner::setSteps(int warmup, int steps)
{
    m_warmup = warmup;
    m_steps = steps;
}

QString ScaleRunner::configPath() const
{
    return m_workDir ? m_workDir->filePath(QStringLiteral("config.json")) : QString();
}

bool ScaleRunner::start(const RunConfig &config, const QString &databasePath, int gpus, ParallelStrategy strategy, const QString &device)
{
    if (m_running)
        return false;
    m_running = true;
    m_cancelRequested = false;
    m_gpus = gpus;
    m_ranksStarted = 0;
    m_summary = {};
    m_error = {};
    m_lastStderrLine.clear();

    m_workDir = std::make_unique<QTemporaryDir>(QDir::temp().filePath(QStringLiteral("pilotbench-gui-scale-XXXXXX")));
    if (!m_workDir->isValid()) {
        finishLater(0, 1, tr("Cannot create a folder for the scaling step's config: %1").arg(m_workDir->errorString()));
        return true;
    }
    try {
        saveRunConfig(config, configPath());
    } catch (const std::exception &e) {
        finishLater(0, 1, QString::fromUtf8(e.what()));
        return true;
    }

    const QStringList arguments {QStringLiteral("scale"),
                                 QStringLiteral("--config"), configPath(),
                                 QStringLiteral("--db"), databasePath,
                                 QStringLiteral("--gpus"), QString::number(gpus),
                                 QStringLiteral("--strategy"), cliStrategy(strategy),
                                 QStringLiteral("--device"), cliDevice(device),
                                 QStringLiteral("--warmup"), QString::number(m_warmup),
                                 QStringLiteral("--steps"), QString::number(m_steps),
                                 QStringLiteral("--jsonl")};
    spdlog::info("scaling step: {} {}", m_cliPath.toStdString(), arguments.join(QLatin1Char(' ')).toStdString());
    m_process->start(m_cliPath, arguments);
    return true;
}

void ScaleRunner::cancel()
{
    if (!m_running || m_process->state() == QProcess::NotRunning || m_cancelRequested)
        return;
    m_cancelRequested = true;
    // SIGTERM reaches the CLI's interrupt handler, which stops its ranks and records the cancellation.
    m_process->terminate();
    m_killTimer->start();
}

QList<QByteArray> ScaleRunner::takeLines(QProcess::ProcessChannel channel)
{
    // Lines are taken before any signal goes out, so a slot that spins the event loop never finds
    // the process reading from the other channel.
    m_process->setReadChannel(channel);
    QList<QByteArray> lines;
    while (m_process->canReadLine())
        lines.append(m_process->readLine());
    m_process->setReadChannel(QProcess::StandardOutput);
    return lines;
}

void ScaleRunner::readStdout()
{
    for (const QByteArray &line : takeLines(QProcess::StandardOutput))
        handleLine(line);
}

void ScaleRunner::readStderr()
{
    for (const QByteArray &raw : takeLines(QProcess::StandardError))
        handleStderrLine(QString::fromUtf8(raw).trimmed());
}

void ScaleRunner::handleStderrLine(const QString &line)
{
    if (line.isEmpty())
        return;
    m_lastStderrLine = line;
    spdlog::info("pilotbench-cli scale: {}", line.toStdString());
    Q_EMIT logLine(line);
}

void ScaleRunner::handleLine(const QByteArray &raw)
{
    const QByteArray line = raw.trimmed();
    if (line.isEmpty())
        return;
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(line, &error);
    if (!doc.isObject()) {
        // Not ours to interpret, but not to lose either.
        Q_EMIT logLine(QString::fromUtf8(line));
        return;
    }
    const QJsonObject event = doc.object();
    const QString name = event.value(QStringLiteral("event")).toString();
    // `warning` events are skipped: the CLI logs the same text on stderr, which is forwarded already.
    if (name == QLatin1String("topology")) {
        Q_EMIT progress(0, kMilestones, tr("Baseline: one process at the ranks' effective batch…"));
    } else if (name == QLatin1String("baseline")) {
        Q_EMIT progress(1, kMilestones, tr("Baseline: %1 tokens/s (run %2); starting %3 ranks…")
                                            .arg(event.value(QStringLiteral("tokens_per_s")).toDouble(), 0, 'f', 0)
                                            .arg(runIdOf(event))
                                            .arg(m_gpus));
    } else if (name == QLatin1String("worker_started")) {
        ++m_ranksStarted;
        if (m_ranksStarted >= m_gpus)
            Q_EMIT progress(2, kMilestones, tr("%1 ranks running…").arg(m_ranksStarted));
        else
            Q_EMIT progress(1, kMilestones, tr("Rank %1 started (pid %2)").arg(event.value(QStringLiteral("rank")).toInt())
                                                .arg(static_cast<qint64>(event.value(QStringLiteral("pid")).toDouble())));
    } else if (name == QLatin1String("summary")) {
        m_summary = event;
        Q_EMIT progress(kMilestones, kMilestones, successMessage());
    } else if (name == QLatin1String("error")) {
        m_error = event;
    }
}

QString ScaleRunner::successMessage() const
{
    const QString message = m_summary.value(QStringLiteral("message")).toString();
    if (!message.isEmpty())
        return message;
    return tr("%1 ranks (%2): %3 tokens/s against %4 on one, speed-up %5x, scaling efficiency %6%")
        .arg(m_summary.value(QStringLiteral("gpus")).toInt())
        .arg(m_summary.value(QStringLiteral("strategy")).toString())
        .arg(m_summary.value(QStringLiteral("tokens_per_s")).toDouble(), 0, 'f', 0)
        .arg(m_summary.value(QStringLiteral("baseline_tokens_per_s")).toDouble(), 0, 'f', 0)
        .arg(m_summary.value(QStringLiteral("speedup")).toDouble(), 0, 'f', 2)
        .arg(m_summary.value(QStringLiteral("scaling_efficiency")).toDouble() * 100, 0, 'f', 1);
}

void ScaleRunner::onFinished(int exitCode, QProcess::ExitStatus status)
{
    m_killTimer->stop();
    // The last lines may have arrived with the exit, after the final readyRead.
    readStdout();
    const QByteArray rest = m_process->readAllStandardOutput();
    if (!rest.trimmed().isEmpty())
        handleLine(rest);
    readStderr();
    handleStderrLine(QString::fromUtf8(m_process->readAllStandardError()).trimmed());

    const qint64 runId = !m_summary.isEmpty() ? runIdOf(m_summary) : runIdOf(m_error);
    int code = exitCode;
    QString message;
    if (status == QProcess::CrashExit) {
        // A cancel that landed before the CLI installed its handler (or needed SIGKILL) ends here.
        code = m_cancelRequested ? kCancelled : 1;
        message = m_cancelRequested ? tr("cancelled")
                                    : tr("pilotbench-cli crashed%1").arg(m_lastStderrLine.isEmpty() ? QString() : QStringLiteral(": ") + m_lastStderrLine);
    } else if (exitCode == kCancelled) {
        message = tr("cancelled");
    } else if (exitCode == 0) {
        message = successMessage();
    } else {
        message = m_error.value(QStringLiteral("message")).toString();
        if (message.isEmpty())
            message = m_lastStderrLine;
        if (message.isEmpty())
            message = tr("pilotbench-cli scale exited with code %1").arg(exitCode);
    }
    spdlog::info("GUI scaling step (run {}): exit {}: {}", runId, code, message.toStdString());
    m_workDir.reset();
    m_running = false;
    Q_EMIT finished(runId, code, message);
}

void ScaleRunner::onError(QProcess::ProcessError error)
{
    // Every other error also ends in QProcess::finished; a failed start does not.
    if (error != QProcess::FailedToStart)
        return;
    finishLater(0, 2, tr("Cannot start %1: %2").arg(m_cliPath, m_process->errorString()));
}

void ScaleRunner::finishLater(qint64 runId, int exitCode, const QString &message)
{
    spdlog::warn("GUI scaling step: {}", message.toStdString());
    // Queued so that start() has returned before its caller hears the outcome.
    QMetaObject::invokeMethod(this, [this, runId, exitCode, message] {
        m_workDir.reset();
        m_running = false;
        Q_EMIT finished(runId, exitCode, message);
    }, Qt::QueuedConnection);
}

} // namespace pb::ui
