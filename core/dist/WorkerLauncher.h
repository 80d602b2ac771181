#pragma once
// Starts the worker processes of one scaling step and watches them: the first worker that exits
// badly, or the deadline, ends the whole step (every other worker is killed and reaped), so no
// process outlives the step. Each worker's stderr goes to its own log file, whose tail is quoted
// when it fails. No torch in this header.
#include "util/JobTree.h"

#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pb {

struct WorkerSpec {
    QString program;
    QStringList arguments;
    QProcessEnvironment environment;
    QString logPath;                 // stderr (and stdout) of the worker
};

struct WorkerOutcome {
    enum class Kind { Finished, WorkerFailed, TimedOut, Cancelled };
    Kind kind = Kind::Finished;
    int failedRank = -1;
    int exitCode = 0;                // of the failed worker (or its signal number when killed)
    bool crashed = false;            // killed by a signal
    std::string message;             // empty when every worker exited 0
};

class WorkerLauncher final {
public:
    explicit WorkerLauncher(std::vector<WorkerSpec> specs);
    ~WorkerLauncher();               // kills and reaps whatever still runs
    WorkerLauncher(const WorkerLauncher &) = delete;
    WorkerLauncher &operator=(const WorkerLauncher &) = delete;

    // Throws PilotBenchError(Failure) when a worker cannot be started (the others are killed).
    void start();
    std::vector<int64_t> pids() const;
    // Returns once every worker has exited, one failed (then the rest are killed), the deadline
    // passed or *cancel became true. `tick` (may be empty) runs about every 100 ms.
    WorkerOutcome wait(std::chrono::milliseconds timeout, const std::atomic<bool> *cancel, const std::function<void()> &tick = {});
    void killAll();
    int exitCode(int rank) const;

private:
    std::vector<WorkerSpec> m_specs;
    std::unique_ptr<JobTree> m_tree; // what the workers start goes with them
    std::vector<std::unique_ptr<QProcess>> m_processes;
    std::vector<int64_t> m_pids;
};

// The last `maxLines` lines of a text file ("" when it cannot be read).
std::string tailOfFile(const QString &path, int maxLines);

} // namespace pb
