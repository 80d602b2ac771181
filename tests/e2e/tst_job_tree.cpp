// The processes scale and restore-check start end with them: scale's worker ranks when scale is
// killed with SIGKILL (nothing of ours runs any more), and the restore proof's fresh process when
// the proof is cancelled while it runs (exit 4, no run left running). Checked through /proc by a
// marker in the environment every process of the tree inherits, within a time bound.
#include "CliProcess.h"
#include "JobProcesses.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
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

} // namespace

class TestJobTree : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    QProcess *start(const QStringList &args, const QByteArray &marker)
    {
        auto *p = new QProcess(this);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("PB_TREE_MARK"), QString::fromLatin1(marker));
        env.insert(QStringLiteral("XDG_DATA_HOME"), m_dir.filePath(QStringLiteral("data")));
        p->setProcessEnvironment(env);
        p->start(QStringLiteral(PB_CLI_PATH), QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args);
        return p;
    }

private Q_SLOTS:
    void killedScaleTakesItsRanksDown()
    {
        const QByteArray marker = "pbtree-" + QUuid::createUuid().toByteArray(QUuid::Id128);
        QProcess *scale = start({QStringLiteral("scale"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--gpus"), QStringLiteral("2"),
                                 QStringLiteral("--steps"), QStringLiteral("60"), QStringLiteral("--db"), m_dir.filePath(QString::fromLatin1(marker) + QStringLiteral(".sqlite"))},
                                marker);
        QVERIFY(scale->waitForStarted());
        // Both ranks running (after the one-process baseline, which runs the same steps).
        QTRY_VERIFY_WITH_TIMEOUT(carriers(marker, "scale-worker").size() >= 2, 120000);
        QThread::msleep(500); // into their steps
        ::kill(static_cast<pid_t>(scale->processId()), SIGKILL);
        QVERIFY(scale->waitForFinished(10000));
        const QList<qint64> left = leftAfter(marker, -1, 5000);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("%1 process(es) outlived a killed scale").arg(left.size())));
    }

    void cancelledRestoreCheckStopsItsFreshProcess()
    {
        const QByteArray marker = "pbtree-" + QUuid::createUuid().toByteArray(QUuid::Id128);
        const QString db = m_dir.filePath(QString::fromLatin1(marker) + QStringLiteral(".sqlite"));
        QProcess *check = start({QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps-before"), QStringLiteral("2"),
                                 QStringLiteral("--steps-after"), QStringLiteral("60"), QStringLiteral("--db"), db},
                                marker);
        QVERIFY(check->waitForStarted());
        // The uninterrupted and reference runs go first; cancel while the fresh process trains.
        QTRY_VERIFY_WITH_TIMEOUT(!carriers(marker, "--resume-from").isEmpty(), 180000);
        ::kill(static_cast<pid_t>(check->processId()), SIGINT);
        QVERIFY(check->waitForFinished(30000));
        QCOMPARE(check->exitCode(), 4);
        const QList<qint64> left = leftAfter(marker, -1, 5000);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("%1 process(es) outlived the cancelled proof").arg(left.size())));
        const pbtest::CliBytes h = pbtest::runCliBytes({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")}, 60000);
        for (const QJsonValue &run : QJsonDocument::fromJson(h.out).object().value(QStringLiteral("runs")).toArray())
            QVERIFY(run.toObject().value(QStringLiteral("status")).toString() != QLatin1String("running"));
    }
};

QTEST_GUILESS_MAIN(TestJobTree)
#include "tst_job_tree.moc"
