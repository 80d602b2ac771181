// The launcher's promise: the first worker that fails, hangs past the deadline or is cancelled ends
// the whole step, and no worker process is left behind (checked with kill(pid, 0) after the step).
#include "dist/WorkerLauncher.h"
#include "util/Errors.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cerrno>
#include <csignal>
#include <sys/types.h>

using namespace pb;

namespace {

WorkerSpec shell(const QTemporaryDir &dir, const QString &script, int rank)
{
    WorkerSpec spec;
    spec.program = QStringLiteral("/bin/sh");
    spec.arguments = {QStringLiteral("-c"), script};
    spec.environment = QProcessEnvironment::systemEnvironment();
    spec.logPath = dir.filePath(QStringLiteral("rank%1.log").arg(rank));
    return spec;
}

bool gone(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

} // namespace

class TestWorkerLauncher : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void allFinish()
    {
        QTemporaryDir dir;
        WorkerLauncher launcher({shell(dir, QStringLiteral("echo zero; exit 0"), 0), shell(dir, QStringLiteral("sleep 0.3; echo one"), 1)});
        launcher.start();
        const auto outcome = launcher.wait(std::chrono::seconds(30), nullptr);
        QCOMPARE(int(outcome.kind), int(WorkerOutcome::Kind::Finished));
        QVERIFY(outcome.message.empty());
        QCOMPARE(tailOfFile(dir.filePath(QStringLiteral("rank1.log")), 5), std::string("one"));
    }

    void failingWorkerStopsTheOthers()
    {
        QTemporaryDir dir;
        WorkerLauncher launcher({shell(dir, QStringLiteral("exec sleep 60"), 0), shell(dir, QStringLiteral("echo out of luck >&2; exit 3"), 1)});
        launcher.start();
        const auto pids = launcher.pids();
        QCOMPARE(pids.size(), size_t(2));
        const auto outcome = launcher.wait(std::chrono::seconds(30), nullptr);
        QCOMPARE(int(outcome.kind), int(WorkerOutcome::Kind::WorkerFailed));
        QCOMPARE(outcome.failedRank, 1);
        QCOMPARE(outcome.exitCode, 3);
        QVERIFY(!outcome.crashed);
        QVERIFY2(QString::fromStdString(outcome.message).contains(QStringLiteral("rank 1")), outcome.message.c_str());
        QVERIFY(gone(pids[0]));
        QVERIFY(gone(pids[1]));
        QCOMPARE(tailOfFile(dir.filePath(QStringLiteral("rank1.log")), 3), std::string("out of luck"));
    }

    void killedWorkerStopsTheOthers()
    {
        QTemporaryDir dir;
        WorkerLauncher launcher({shell(dir, QStringLiteral("exec sleep 60"), 0), shell(dir, QStringLiteral("exec sleep 60"), 1)});
        launcher.start();
        const auto pids = launcher.pids();
        int ticks = 0;
        const auto outcome = launcher.wait(std::chrono::seconds(30), nullptr, [&] {
            if (++ticks == 3)
                ::kill(static_cast<pid_t>(pids[0]), SIGKILL);
        });
        QCOMPARE(int(outcome.kind), int(WorkerOutcome::Kind::WorkerFailed));
        QCOMPARE(outcome.failedRank, 0);
        QVERIFY(outcome.crashed);
        QVERIFY(gone(pids[0]));
        QVERIFY(gone(pids[1]));
    }

    void hangingWorkersTimeOut()
    {
        QTemporaryDir dir;
        WorkerLauncher launcher({shell(dir, QStringLiteral("exec sleep 60"), 0), shell(dir, QStringLiteral("exec sleep 60"), 1)});
        launcher.start();
        const auto pids = launcher.pids();
        const auto outcome = launcher.wait(std::chrono::milliseconds(500), nullptr);
        QCOMPARE(int(outcome.kind), int(WorkerOutcome::Kind::TimedOut));
        QVERIFY(gone(pids[0]));
        QVERIFY(gone(pids[1]));
    }

    void cancelStopsEveryWorker()
    {
        QTemporaryDir dir;
        std::atomic<bool> cancel {false};
        WorkerLauncher launcher({shell(dir, QStringLiteral("exec sleep 60"), 0)});
        launcher.start();
        const auto pids = launcher.pids();
        int ticks = 0;
        const auto outcome = launcher.wait(std::chrono::seconds(30), &cancel, [&] {
            if (++ticks == 2)
                cancel = true;
        });
        QCOMPARE(int(outcome.kind), int(WorkerOutcome::Kind::Cancelled));
        QVERIFY(gone(pids[0]));
    }

    void destructorLeavesNoOrphan()
    {
        QTemporaryDir dir;
        std::vector<int64_t> pids;
        {
            WorkerLauncher launcher({shell(dir, QStringLiteral("exec sleep 60"), 0), shell(dir, QStringLiteral("exec sleep 60"), 1)});
            launcher.start();
            pids = launcher.pids();
            QVERIFY(!gone(pids[0]));
        }
        QVERIFY(gone(pids[0]));
        QVERIFY(gone(pids[1]));
    }

    void missingProgramIsAFailure()
    {
        QTemporaryDir dir;
        WorkerSpec spec = shell(dir, QString(), 0);
        spec.program = dir.filePath(QStringLiteral("no-such-program"));
        WorkerLauncher launcher({spec});
        QVERIFY_THROWS_EXCEPTION(PilotBenchError, launcher.start());
    }
};

QTEST_GUILESS_MAIN(TestWorkerLauncher)
#include "tst_worker_launcher.moc"
