// The GUI's scaling step as a child process (the real pilotbench-cli, tiny preset, 2 Gloo ranks on
// CPU): a finished step is recorded as a scale run; a cancel, during the baseline or once the ranks
// run, ends with exit code 4, a run recorded as cancelled and no process left behind; so does
// destroying the runner mid-step; a missing CLI is exit code 2 naming the path.
#include "stages/ScaleRunner.h"

#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <memory>

using pb::ui::ScaleRunner;

namespace {

// The build machine has two cores shared with whatever else runs: a whole step can be slow.
constexpr int kStepTimeoutMs = 300000;

QByteArray procFile(const QString &pid, const char *name)
{
    QFile file(QStringLiteral("/proc/%1/%2").arg(pid, QLatin1String(name)));
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

QStringList processIds()
{
    static const QRegularExpression digits(QStringLiteral("^[0-9]+$"));
    return QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot).filter(digits);
}

// Processes with `argument` as one of their command-line arguments.
QList<qint64> processesWithArgument(const QString &argument)
{
    const QByteArray wanted = argument.toUtf8();
    QList<qint64> pids;
    for (const QString &pid : processIds())
        if (procFile(pid, "cmdline").split('\0').contains(wanted))
            pids.append(pid.toLongLong());
    return pids;
}

// The ranks a scale launcher started: each carries the launcher's pid in its environment.
QList<qint64> ranksOf(qint64 launcher)
{
    const QByteArray wanted = "PB_SCALE_LAUNCHER_PID=" + QByteArray::number(launcher);
    QList<qint64> pids;
    for (const QString &pid : processIds())
        if (procFile(pid, "environ").split('\0').contains(wanted))
            pids.append(pid.toLongLong());
    return pids;
}

// Whether the process has its own SIGTERM handler yet: before the CLI installs it, SIGTERM simply
// kills it and nothing is recorded, so a test of the recorded cancellation waits for this.
bool catchesSigterm(qint64 pid)
{
    for (const QByteArray &line : procFile(QString::number(pid), "status").split('\n')) {
        if (!line.startsWith("SigCgt:"))
            continue;
        bool ok = false;
        const qulonglong mask = line.mid(7).trimmed().toULongLong(&ok, 16);
        return ok && (mask & (1ULL << (SIGTERM - 1))) != 0;
    }
    return false;
}

bool progressReached(const QSignalSpy &spy, int done)
{
    for (const auto &args : spy)
        if (args.at(0).toInt() >= done)
            return true;
    return false;
}

// A step that ends early keeps its workers' logs for the post-mortem; the tests do not need them.
void removeWorkerLogs(const QSignalSpy &logLines)
{
    static const QRegularExpression logsLine(QStringLiteral("worker logs: (\\S+)"));
    for (const auto &args : logLines) {
        const auto match = logsLine.match(args.at(0).toString());
        if (match.hasMatch() && QFileInfo(match.captured(1)).fileName().startsWith(QLatin1String("pilotbench-scale-")))
            QDir(match.captured(1)).removeRecursively();
    }
}

} // namespace

class TestScaleRunner : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void runsToCompletionAndIsRecorded()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.db"));
        const pb::RunConfig config = pb::presetConfig(QStringLiteral("tiny"));
        ScaleRunner runner;
        runner.setCliPath(QStringLiteral(PB_CLI_PATH));
        runner.setSteps(1, 2);
        QSignalSpy progress(&runner, &ScaleRunner::progress);
        QSignalSpy logLines(&runner, &ScaleRunner::logLine);
        QSignalSpy finished(&runner, &ScaleRunner::finished);
        QVERIFY(runner.start(config, db, 2, pb::ParallelStrategy::Ddp, QStringLiteral("cpu")));
        QVERIFY(runner.isRunning());
        const QString configFile = runner.configPath();
        QVERIFY(QFile::exists(configFile));
        QVERIFY2(!runner.start(config, db, 2, pb::ParallelStrategy::Ddp, QStringLiteral("cpu")), "a second step started beside the first");

        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kStepTimeoutMs);
        const auto args = finished.takeFirst();
        const qint64 runId = args.at(0).toLongLong();
        QVERIFY2(args.at(1).toInt() == 0, qPrintable(args.at(2).toString()));
        QVERIFY(runId > 0);
        QVERIFY(!args.at(2).toString().isEmpty());
        QVERIFY(!runner.isRunning());
        QVERIFY2(!QFile::exists(configFile), "the temporary config outlived the step");
        QVERIFY(!logLines.isEmpty()); // the CLI's log reached the GUI

        QVERIFY(!progress.isEmpty());
        const auto last = progress.last();
        QCOMPARE(last.at(0).toInt(), last.at(1).toInt());
        QCOMPARE(runner.summary().value(QStringLiteral("gpus")).toInt(), 2);
        QCOMPARE(runner.summary().value(QStringLiteral("strategy")).toString(), QStringLiteral("ddp"));

        const pb::HistoryStore store(db);
        const auto run = store.findRun(runId);
        QVERIFY(run);
        QCOMPARE(run->kind, QStringLiteral("scale"));
        QCOMPARE(run->status, QStringLiteral("done"));
        QCOMPARE(run->verdict, QStringLiteral("fits"));
        QCOMPARE(run->configHash, pb::configHash(config)); // the form's config, not another
    }

    void cancelStopsEverything_data()
    {
        QTest::addColumn<bool>("duringBaseline");
        QTest::newRow("during the baseline") << true;
        QTest::newRow("while the ranks run") << false;
    }

    void cancelStopsEverything()
    {
        QFETCH(bool, duringBaseline);
        if (!QFileInfo::exists(QStringLiteral("/proc/self/cmdline")))
            QSKIP("finding the step's processes needs /proc");
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.db"));
        ScaleRunner runner;
        runner.setCliPath(QStringLiteral(PB_CLI_PATH));
        // Endless for the baseline case; for the other, short enough for the baseline to end and
        // far longer than the ranks need to start.
        runner.setSteps(0, duringBaseline ? 1000000 : 30);
        QSignalSpy progress(&runner, &ScaleRunner::progress);
        QSignalSpy logLines(&runner, &ScaleRunner::logLine);
        QSignalSpy finished(&runner, &ScaleRunner::finished);
        QVERIFY(runner.start(pb::presetConfig(QStringLiteral("tiny")), db, 2, pb::ParallelStrategy::Ddp, QStringLiteral("cpu")));
        const QString configFile = runner.configPath();
        // The /proc look-up sees the CLI while it runs, so its silence afterwards means something.
        QTRY_COMPARE_WITH_TIMEOUT(processesWithArgument(configFile).size(), 1, 60000);
        const qint64 cli = processesWithArgument(configFile).constFirst();

        QTRY_VERIFY_WITH_TIMEOUT(progressReached(progress, duringBaseline ? 0 : 2) || !finished.isEmpty(), kStepTimeoutMs);
        QVERIFY2(finished.isEmpty(), qPrintable(finished.isEmpty() ? QString() : finished.first().at(2).toString()));
        if (duringBaseline)
            QTRY_VERIFY_WITH_TIMEOUT(catchesSigterm(cli), 60000);
        else
            QCOMPARE(ranksOf(cli).size(), 2);
        runner.cancel();

        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kStepTimeoutMs);
        removeWorkerLogs(logLines);
        const auto args = finished.takeFirst();
        QCOMPARE(args.at(1).toInt(), 4);
        QCOMPARE(args.at(2).toString(), QStringLiteral("cancelled"));
        const qint64 runId = args.at(0).toLongLong();
        QVERIFY(runId > 0);
        QVERIFY(!runner.isRunning());
        const auto *process = runner.findChild<QProcess *>();
        QVERIFY(process);
        QCOMPARE(process->state(), QProcess::NotRunning);
        QCOMPARE(process->exitStatus(), QProcess::NormalExit); // SIGTERM was handled, not fatal
        QVERIFY2(processesWithArgument(configFile).isEmpty(), "pilotbench-cli outlived the cancel");
        QVERIFY2(ranksOf(cli).isEmpty(), "a rank outlived the cancel");

        const pb::HistoryStore store(db);
        const auto run = store.findRun(runId);
        QVERIFY(run);
        QCOMPARE(run->kind, QStringLiteral("scale"));
        QCOMPARE(run->status, QStringLiteral("done"));
        QCOMPARE(run->verdict, QStringLiteral("cancelled"));
    }

    void destroyingTheRunnerEndsTheStep()
    {
        if (!QFileInfo::exists(QStringLiteral("/proc/self/cmdline")))
            QSKIP("finding the step's processes needs /proc");
        QTemporaryDir dir;
        auto runner = std::make_unique<ScaleRunner>();
        runner->setCliPath(QStringLiteral(PB_CLI_PATH));
        runner->setSteps(0, 1000000);
        QSignalSpy finished(runner.get(), &ScaleRunner::finished);
        QVERIFY(runner->start(pb::presetConfig(QStringLiteral("tiny")), dir.filePath(QStringLiteral("history.db")), 2, pb::ParallelStrategy::Ddp,
                              QStringLiteral("cpu")));
        const QString configFile = runner->configPath();
        QTRY_COMPARE_WITH_TIMEOUT(processesWithArgument(configFile).size(), 1, 60000);
        const qint64 cli = processesWithArgument(configFile).constFirst();
        QTRY_VERIFY_WITH_TIMEOUT(catchesSigterm(cli) || !finished.isEmpty(), 60000);
        QVERIFY2(finished.isEmpty(), qPrintable(finished.isEmpty() ? QString() : finished.first().at(2).toString()));
        runner.reset();
        QVERIFY2(processesWithArgument(configFile).isEmpty(), "pilotbench-cli outlived its runner");
        QVERIFY(ranksOf(cli).isEmpty());
        QVERIFY(!QFile::exists(configFile));
    }

    void missingCliIsInvalidInput()
    {
        QTemporaryDir dir;
        const QString missing = dir.filePath(QStringLiteral("no-such-pilotbench-cli"));
        ScaleRunner runner;
        runner.setCliPath(missing);
        QSignalSpy finished(&runner, &ScaleRunner::finished);
        QVERIFY(runner.start(pb::presetConfig(QStringLiteral("tiny")), dir.filePath(QStringLiteral("history.db")), 2, pb::ParallelStrategy::Ddp,
                             QStringLiteral("cpu")));
        QCOMPARE(finished.count(), 0); // the caller hears of it after start() returns
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        const auto args = finished.takeFirst();
        QCOMPARE(args.at(0).toLongLong(), qint64(0));
        QCOMPARE(args.at(1).toInt(), 2);
        QVERIFY2(args.at(2).toString().contains(missing), qPrintable(args.at(2).toString()));
        QVERIFY(!runner.isRunning());
        QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("history.db"))));
        // The runner is free again.
        QVERIFY(runner.start(pb::presetConfig(QStringLiteral("tiny")), dir.filePath(QStringLiteral("history.db")), 2, pb::ParallelStrategy::Ddp,
                             QStringLiteral("cpu")));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    }
};

QTEST_GUILESS_MAIN(TestScaleRunner)
#include "tst_scale_runner.moc"
