#pragma once
// Every process a job starts, however it detaches, stopped with it (watch's command, scale's
// workers, the restore proof's fresh processes). Three mechanisms, each for a way out:
// - the started processes get a process group of their own and PR_SET_PDEATHSIG, so a signal
//   reaches the group and a killed parent takes its direct children down;
// - this process is a child subreaper (PR_SET_CHILD_SUBREAPER): a daemonised descendant (setsid,
//   a double fork) is re-parented to us instead of to init, and found among our children by the
//   job's environment entry (PILOTBENCH_JOB=<id>), which every descendant inherits;
// - a guardian process, forked before the job starts, holds one end of a socket pair: when we end
//   without saying the job is over (SIGKILL, a crash), it sees end-of-file and stops the job's
//   groups and every process carrying the entry (TERM, the grace period, KILL).
// cgroup v2's cgroup.kill would do all three where a delegated cgroup is writable; the hosts we
// run on (containers, CI) mostly have none, so these work without it.
#include <QString>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pb {

class JobTree {
public:
    static constexpr const char *kVariable = "PILOTBENCH_JOB";

    // `graceMs`: what the guardian waits between TERM and KILL when it has to act.
    explicit JobTree(int graceMs = 10000);
    // Tells the guardian the job was stopped by us (call stop() first), then reaps it.
    ~JobTree();
    JobTree(const JobTree &) = delete;
    JobTree &operator=(const JobTree &) = delete;

    // The value of kVariable in each started process's environment.
    QString id() const { return QString::fromStdString(m_entry.substr(m_entry.find('=') + 1)); }
    // For QProcess::setChildProcessModifier: a process group of its own; `deathSignal` when the
    // thread that started it ends. Runs between fork and exec: async-signal-safe calls only.
    static void prepareChild(int deathSignal);
    // A process of the job was started (its group is the job's too).
    void add(int64_t pid);
    // Notes the job's processes seen now: the started ones and their descendants, and the
    // processes re-parented to us that carry the entry, with theirs. Re-parented ones that have
    // exited are reaped (they are our children now; nobody else will).
    void scan();
    // How many of the processes seen are still running.
    int alive();
    // Sends `signal` to the started groups and to every process seen that is still the same
    // process; returns how many were running.
    int signalAll(int signal);
    // TERM, then KILL after `graceMs` or as soon as `hurry()` says so. Returns how many had to be
    // killed (0: none was left, or all ended on TERM). Every process is gone when it returns,
    // except one in uninterruptible sleep, which ends when the kernel lets it.
    int stop(int graceMs, const std::function<bool()> &hurry = {});

private:
    std::string m_entry;
    std::vector<std::pair<int64_t, uint64_t>> m_started; // PID, start time
    std::map<int64_t, uint64_t> m_seen; // PID -> start time
    int m_guardianSocket = -1;
    int64_t m_guardian = -1;
};

} // namespace pb
