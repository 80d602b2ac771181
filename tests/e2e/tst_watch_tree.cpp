// A watched job never outlives its watch: jobs that daemonise (setsid, a double fork, a background
// job in a group of its own, a child that ignores SIGTERM and keeps the output open), a Ctrl-C
// pressed twice, and a SIGKILL of watch itself. Each row checks through /proc that no process
// carrying the row's marker (in its environment and its argv) and none of the job's process group
// is left, within a time bound, and that the run is recorded once, not left running.
#include "CliProcess.h"
#include "JobProcesses.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QUuid>
#include <QtTest>

#include <csignal>
#include <unistd.h>

namespace {

using pbtest::carriers;
using pbtest::leftAfter;

QJsonArray runsIn(const QString &db)
{
    const pbtest::CliBytes r = pbtest::runCliBytes({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")}, 60000);
    const QJsonDocument d = QJsonDocument::fromJson(r.out);
    return d.isArray() ? d.array() : d.object().value(QStringLiteral("runs")).toArray();
}

} // namespace

class TestWatchTree : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    // watch --jsonl -- sh -c SCRIPT, with the row's marker in the job's environment and argv.
    QProcess *startWatch(const QString &script, const QByteArray &marker, const QString &db, const QString &grace)
    {
        auto *p = new QProcess(this);
        p->setProgram(QStringLiteral(PB_CLI_PATH));
        p->setArguments({QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("watch"), QStringLiteral("--jsonl"), QStringLiteral("--no-devices"),
                         QStringLiteral("--db"), db, QStringLiteral("--grace"), grace, QStringLiteral("--run-dir"), m_dir.filePath(QString::fromLatin1(marker)),
                         QStringLiteral("--env"), QStringLiteral("PB_TREE_MARK=") + QString::fromLatin1(marker), QStringLiteral("--"), QStringLiteral("/bin/sh"),
                         QStringLiteral("-c"), script, QString::fromLatin1(marker)});
        p->start();
        return p;
    }

private Q_SLOTS:
    void daemonisedDescendantsEnd_data()
    {
        QTest::addColumn<QString>("script");
        // Each leaves a process behind that would keep a card busy; the script itself exits 0 at once.
        QTest::newRow("setsid child") << QStringLiteral("setsid sh -c 'sleep 300; :' \"$0\" & exit 0");
        QTest::newRow("python double fork")
            << QStringLiteral("/usr/bin/python3 -c 'import os,sys,time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n    os._exit(0)\nos.wait()' \"$0\"; sleep 0.3; exit 0");
        QTest::newRow("background job, own group") << QStringLiteral("set -m; sleep 300 & sleep 300 & exit 0");
        QTest::newRow("ignores SIGTERM, keeps stdout") << QStringLiteral("(trap '' TERM; while :; do sleep 1; echo alive; done) & exit 0");
    }

    void daemonisedDescendantsEnd()
    {
        QFETCH(QString, script);
        const QByteArray marker = "pbtree-" + QUuid::createUuid().toByteArray(QUuid::Id128);
        const QString db = m_dir.filePath(QString::fromLatin1(marker) + QStringLiteral(".sqlite"));
        QProcess *watch = startWatch(script, marker, db, QStringLiteral("1"));
        QVERIFY(watch->waitForFinished(30000));
        const qint64 pgid = static_cast<qint64>(pbtest::eventOf(watch->readAllStandardOutput(), QStringLiteral("started")).value(QStringLiteral("pid")).toDouble(-1));
        QVERIFY(pgid > 0);
        // The job ran to its end without a step we could see: failed, exit 1, whatever it left behind.
        QCOMPARE(watch->exitCode(), 1);
        const QList<qint64> left = leftAfter(marker, pgid, 3000);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("left running after watch ended: %1").arg(QString::number(left.size()))));
        const QJsonArray runs = runsIn(db);
        QCOMPARE(runs.size(), 1);
        QCOMPARE(runs[0].toObject().value(QStringLiteral("status")).toString(), QStringLiteral("done"));
    }

    // Ctrl-C twice 0.3 s apart against a job that ignores SIGTERM, under a long grace period: the
    // second kills the tree at once; recorded once as cancelled, exit 4.
    void secondInterruptKillsTheTree()
    {
        const QByteArray marker = "pbtree-" + QUuid::createUuid().toByteArray(QUuid::Id128);
        const QString db = m_dir.filePath(QString::fromLatin1(marker) + QStringLiteral(".sqlite"));
        QProcess *watch = startWatch(QStringLiteral("trap '' TERM INT; setsid sh -c 'trap \"\" TERM; sleep 300' \"$0\" & sleep 300; :"), marker, db, QStringLiteral("60"));
        QVERIFY(watch->waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(carriers(marker).size() >= 5, 20000); // watch, sh, its sleep, the setsid sh and its sleep
        ::kill(static_cast<pid_t>(watch->processId()), SIGINT);
        QThread::msleep(300);
        ::kill(static_cast<pid_t>(watch->processId()), SIGINT);
        QElapsedTimer t;
        t.start();
        QVERIFY(watch->waitForFinished(20000));
        QVERIFY2(t.elapsed() < 10000, "the second Ctrl-C waited for the grace period");
        QCOMPARE(watch->exitCode(), 4);
        const qint64 pgid = static_cast<qint64>(pbtest::eventOf(watch->readAllStandardOutput(), QStringLiteral("started")).value(QStringLiteral("pid")).toDouble(-1));
        QVERIFY(leftAfter(marker, pgid, 3000).isEmpty());
        const QJsonArray runs = runsIn(db);
        QCOMPARE(runs.size(), 1);
        QCOMPARE(runs[0].toObject().value(QStringLiteral("verdict")).toString(), QStringLiteral("cancelled"));
    }

    // SIGKILL of watch: nothing of ours runs any more, the guardian stops the job (TERM, the grace
    // period, KILL), including a process that left the group and ignores SIGTERM.
    void killedWatchTakesTheJobDown()
    {
        const QByteArray marker = "pbtree-" + QUuid::createUuid().toByteArray(QUuid::Id128);
        const QString db = m_dir.filePath(QString::fromLatin1(marker) + QStringLiteral(".sqlite"));
        QProcess *watch = startWatch(QStringLiteral("setsid sh -c 'trap \"\" TERM; sleep 300' \"$0\" & sleep 300 & wait"), marker, db, QStringLiteral("1"));
        QVERIFY(watch->waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(carriers(marker).size() >= 5, 20000); // watch, sh, both sleeps, the setsid sh
        ::kill(static_cast<pid_t>(watch->processId()), SIGKILL);
        QVERIFY(watch->waitForFinished(10000));
        const QList<qint64> left = leftAfter(marker, -1, 5000);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("%1 process(es) outlived a killed watch").arg(left.size())));
        // The run it began is not left running: the next reader marks it interrupted.
        const QJsonArray runs = runsIn(db);
        QCOMPARE(runs.size(), 1);
        QCOMPARE(runs[0].toObject().value(QStringLiteral("status")).toString(), QStringLiteral("interrupted"));
    }
};

QTEST_GUILESS_MAIN(TestWatchTree)
#include "tst_watch_tree.moc"
