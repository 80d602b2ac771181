// pilotbench-cli basics and the pilot command, run as a user would.
#include "e2e/CliProcess.h"
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

using Result = pbtest::CliBytes;

Result cli(const QStringList &args) { return pbtest::runCliBytes(args); }

QList<QJsonObject> events(const QByteArray &out)
{
    QList<QJsonObject> list;
    for (const auto &line : out.split('\n'))
        if (!line.trimmed().isEmpty())
            list << QJsonDocument::fromJson(line).object();
    return list;
}

} // namespace

class TestCliPilot : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString db() const { return m_dir.filePath(QStringLiteral("history.sqlite")); }

private Q_SLOTS:
    void versionAndHelpSayWhatTheyAre()
    {
        auto r = cli({QStringLiteral("--version")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("pilotbench 0.1.0"));
        QVERIFY(r.out.contains("LibTorch "));
        QVERIFY(r.out.contains("CUDA available: "));
        r = cli({QStringLiteral("--help")});
        QCOMPARE(r.exitCode, 0);
        for (const char *command : {"pilot", "estimate", "history", "config", "restore-check", "compare", "report", "scale"})
            QVERIFY2(r.out.contains(command), command);
        r = cli({QStringLiteral("frobnicate")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("unknown command 'frobnicate'"));
    }

    void pilotStreamsJsonlAndRecordsTheRun()
    {
        const auto r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("4"),
                            QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--jsonl"), QStringLiteral("--db"), db()});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto list = events(r.out);
        int steps = 0;
        for (const auto &e : list) {
            if (e.value(QStringLiteral("event")).toString() != QLatin1String("step"))
                continue;
            ++steps;
            for (const char *key : {"step", "phase", "step_time_ms", "data_wait_ms", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes",
                                    "device_used_bytes", "tokens", "loss"})
                QVERIFY2(e.contains(QLatin1String(key)), key);
        }
        QCOMPARE(steps, 5);
        const QJsonObject summary = list.last();
        QCOMPARE(summary.value(QStringLiteral("event")).toString(), QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(summary.value(QStringLiteral("measured_steps")).toInt(), 4);
        QVERIFY(summary.value(QStringLiteral("run_id")).toInt() >= 1);
        QVERIFY(summary.value(QStringLiteral("environment")).toObject().contains(QStringLiteral("torch_version")));
        QVERIFY(summary.value(QStringLiteral("mfu")).isNull());
        const auto history = cli({QStringLiteral("history"), QStringLiteral("--db"), db(), QStringLiteral("--json")});
        QVERIFY(history.out.contains(summary.value(QStringLiteral("config_hash")).toString().toUtf8()));
    }

    void memoryLimitExitsThreeAndTheNextRunFits()
    {
        auto r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                      QStringLiteral("--memory-limit"), QStringLiteral("1M"), QStringLiteral("--jsonl"), QStringLiteral("--db"), db()});
        QCOMPARE(r.exitCode, 3);
        const QJsonObject summary = events(r.out).last();
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("does-not-fit"));
        QVERIFY(!summary.value(QStringLiteral("failed_phase")).toString().isEmpty());
        r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                 QStringLiteral("--db"), db()});
        QCOMPARE(r.exitCode, 0);
    }

    void badInputExitsTwoNamingIt_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("named");
        QTest::newRow("device") << QStringList {QStringLiteral("--device"), QStringLiteral("tpu")} << QStringLiteral("--device");
        QTest::newRow("steps") << QStringList {QStringLiteral("--steps"), QStringLiteral("0")} << QStringLiteral("--steps");
        QTest::newRow("memory limit") << QStringList {QStringLiteral("--memory-limit"), QStringLiteral("lots")} << QStringLiteral("--memory-limit");
        QTest::newRow("config field") << QStringList {QStringLiteral("--set"), QStringLiteral("train.seq_len=0")} << QStringLiteral("train.seq_len");
    }
    void badInputExitsTwoNamingIt()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, named);
        const auto r = cli(QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db()} + args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(named.toUtf8()), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCliPilot)
#include "tst_cli_pilot.moc"
