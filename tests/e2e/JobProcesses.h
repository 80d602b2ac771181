#pragma once
// What a job left running, for the end-to-end tests of process trees (tst_watch_tree,
// tst_job_tree): the processes carrying a test's marker, found through /proc.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QList>
#include <QThread>

#include <cerrno>
#include <csignal>
#include <unistd.h>

namespace pbtest {

// The PIDs (not this process) whose environment or command line holds `marker` and whose command
// line holds `inArgs`. A zombie has no environment or command line left to read: what is found is
// alive.
inline QList<qint64> carriers(const QByteArray &marker, const QByteArray &inArgs = {})
{
    QList<qint64> found;
    for (const QString &name : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        bool ok = false;
        const qint64 pid = name.toLongLong(&ok);
        if (!ok || pid == ::getpid())
            continue;
        QFile environ(QStringLiteral("/proc/%1/environ").arg(pid));
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!environ.open(QIODevice::ReadOnly) || !cmdline.open(QIODevice::ReadOnly))
            continue;
        const QByteArray args = cmdline.readAll();
        if ((environ.readAll().contains(marker) || args.contains(marker)) && (inArgs.isEmpty() || args.contains(inArgs)))
            found << pid;
    }
    return found;
}

inline bool groupAlive(qint64 pgid) { return pgid > 0 && (::kill(static_cast<pid_t>(-pgid), 0) == 0 || errno == EPERM); }

// Waits up to `ms` for no carrier of `marker` and no live process group `pgid` (-1: none); returns
// what is left, killed so that a failing row does not leave it either (a group as -pgid).
inline QList<qint64> leftAfter(const QByteArray &marker, qint64 pgid, int ms)
{
    QElapsedTimer t;
    t.start();
    QList<qint64> left;
    do {
        left = carriers(marker);
        if (left.isEmpty() && !groupAlive(pgid))
            return {};
        QThread::msleep(50);
    } while (t.elapsed() < ms);
    for (qint64 p : left)
        ::kill(static_cast<pid_t>(p), SIGKILL);
    if (groupAlive(pgid)) {
        left << -pgid;
        ::kill(static_cast<pid_t>(-pgid), SIGKILL);
    }
    return left;
}

} // namespace pbtest
