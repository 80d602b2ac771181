#include "dist/WorkerLauncher.h"

#include "util/Errors.h"

#include <QFile>

#include <csignal>

#include <spdlog/spdlog.h>

namespace pb {

WorkerLauncher::WorkerLauncher(std::vector<WorkerSpec> specs) : m_specs(std::move(specs)) {}

WorkerLauncher::~WorkerLauncher() { killAll(); }

void WorkerLauncher::start()
{
    m_tree = std::make_unique<JobTree>(0);
    for (size_t rank = 0; rank < m_specs.size(); ++rank) {
        const auto &spec = m_specs[rank];
        auto process = std::make_unique<QProcess>();
        process->setProgram(spec.program);
        process->setArguments(spec.arguments);
        QProcessEnvironment environment = spec.environment;
        environment.insert(QLatin1String(JobTree::kVariable), m_tree->id());
        process->setProcessEnvironment(environment);
        process->setChildProcessModifier([] { JobTree::prepareChild(SIGKILL); });
        process->setProcessChannelMode(QProcess::MergedChannels);
        process->setStandardOutputFile(spec.logPath);
        process->setStandardInputFile(QProcess::nullDevice());
        process->start();
        if (!process->waitForStarted(30000)) {
            const std::string reason = process->errorString().toStdString();
            m_processes.push_back(std::move(process));
            killAll();
            throw PilotBenchError(ExitCode::Failure, "cannot start worker rank " + std::to_string(rank) + " (" + spec.program.toStdString() + "): " + reason);
        }
        m_pids.push_back(process->processId());
        m_tree->add(process->processId());
        m_processes.push_back(std::move(process));
    }
}

std::vector<int64_t> WorkerLauncher::pids() const { return m_pids; }

int WorkerLauncher::exitCode(int rank) const { return m_processes.at(static_cast<size_t>(rank))->exitCode(); }

WorkerOutcome WorkerLauncher::wait(std::chrono::milliseconds timeout, const std::atomic<bool> *cancel, const std::function<void()> &tick)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    WorkerOutcome outcome;
    for (;;) {
        bool running = false;
        for (size_t rank = 0; rank < m_processes.size(); ++rank) {
            QProcess &p = *m_processes[rank];
            if (p.state() != QProcess::NotRunning)
                p.waitForFinished(m_processes.size() > 1 ? 20 : 100);
            if (p.state() != QProcess::NotRunning) {
                running = true;
                continue;
            }
            const bool crashed = p.exitStatus() == QProcess::CrashExit;
            if (!crashed && p.exitCode() == 0)
                continue;
            outcome.kind = WorkerOutcome::Kind::WorkerFailed;
            outcome.failedRank = static_cast<int>(rank);
            outcome.crashed = crashed;
            outcome.exitCode = p.exitCode();
            outcome.message = "worker rank " + std::to_string(rank) + " (pid " + std::to_string(m_pids[rank]) + ") "
                              + (crashed ? std::string("was killed by a signal or crashed") : "exited with code " + std::to_string(p.exitCode()))
                              + "; stopped the other worker(s)";
            killAll();
            return outcome;
        }
        if (!running)
            return outcome;
        if (tick)
            tick();
        if (cancel && cancel->load()) {
            killAll();
            outcome.kind = WorkerOutcome::Kind::Cancelled;
            outcome.message = "cancelled by the user; stopped every worker";
            return outcome;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            killAll();
            outcome.kind = WorkerOutcome::Kind::TimedOut;
            outcome.message = "the workers did not finish within " + std::to_string(timeout.count() / 1000) + " s (--timeout); stopped every worker";
            return outcome;
        }
    }
}

void WorkerLauncher::killAll()
{
    for (auto &p : m_processes) {
        if (p->state() == QProcess::NotRunning)
            continue;
        p->kill();
        if (!p->waitForFinished(10000))
            spdlog::error("worker pid {} did not end after SIGKILL", p->processId());
    }
    if (m_tree)
        m_tree->stop(0); // anything a worker started and left behind
}

std::string tailOfFile(const QString &path, int maxLines)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return "";
    const qint64 size = file.size();
    file.seek(std::max<qint64>(0, size - 8192));
    const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    return lines.mid(std::max<qsizetype>(0, lines.size() - maxLines)).join(QLatin1Char('\n')).toStdString();
}

} // namespace pb
