// `pilotbench-cli history` as a user runs it: list, show, export, import, annotate, and the errors.
#include "core/history/HistoryTestUtil.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

struct Result {
    int code = -1;
    QByteArray out, err;
    QJsonObject json() const { return QJsonDocument::fromJson(out).object(); }
};

Result cli(const QStringList &args)
{
    QProcess p;
    p.start(QStringLiteral(PB_CLI_PATH), args);
    Result r;
    if (!p.waitForFinished(60000))
        return r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

QString copyFixture(const QTemporaryDir &dir)
{
    const QString target = dir.filePath(QStringLiteral("history.sqlite"));
    QFile::copy(QStringLiteral(PB_TEST_DATA_DIR "/history/v1.sqlite"), target);
    QFile::setPermissions(target, QFile::ReadOwner | QFile::WriteOwner);
    return target;
}

} // namespace

class TestCliHistory : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void listsRunsAsJson()
    {
        QTemporaryDir dir;
        const QString db = copyFixture(dir);
        const Result r = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")});
        QVERIFY2(r.code == 0, r.err.constData());
        const QJsonArray runs = r.json()[QStringLiteral("runs")].toArray();
        QCOMPARE(runs.size(), 2);
        const QJsonObject newest = runs[0].toObject();
        QCOMPARE(newest[QStringLiteral("id")].toInt(), 2);
        QCOMPARE(newest[QStringLiteral("kind")].toString(), QStringLiteral("pilot"));
        QCOMPARE(newest[QStringLiteral("status")].toString(), QStringLiteral("done"));
        QCOMPARE(newest[QStringLiteral("verdict")].toString(), QStringLiteral("does-not-fit"));
        QCOMPARE(newest[QStringLiteral("started_at")].toString(), QStringLiteral("2024-03-02T09:30:00.000Z"));
        QCOMPARE(newest[QStringLiteral("config_hash")].toString(), QStringLiteral("bbbb2222"));
        QCOMPARE(newest[QStringLiteral("card")].toString(), QStringLiteral("a100-80g"));

        const Result fits = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json"), QStringLiteral("--verdict"), QStringLiteral("fits")});
        QCOMPARE(fits.json()[QStringLiteral("runs")].toArray().size(), 1);
        const Result table = cli({QStringLiteral("history"), QStringLiteral("--db"), db});
        QCOMPARE(table.code, 0);
        QVERIFY(table.out.contains("does-not-fit"));
        QVERIFY(table.out.contains("cuda:0/a100-80g"));
    }

    void showsOneRun()
    {
        QTemporaryDir dir;
        const QString db = copyFixture(dir);
        const Result r = cli({QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1"), QStringLiteral("--db"), db, QStringLiteral("--json"), QStringLiteral("--samples")});
        QVERIFY2(r.code == 0, r.err.constData());
        const QJsonObject run = r.json();
        QCOMPARE(run[QStringLiteral("phases")].toArray().size(), 3);
        QCOMPARE(run[QStringLiteral("samples")].toObject()[QStringLiteral("step_time_ms")].toArray().at(4).toDouble(), 40.0);
        QCOMPARE(run[QStringLiteral("config")].toObject()[QStringLiteral("train")].toObject()[QStringLiteral("seq_len")].toInt(), 256);
        const Result text = cli({QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1"), QStringLiteral("--db"), db});
        QVERIFY(text.out.contains("Validation at step 5: loss 9.125"));
    }

    void errors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown id") << QStringList {QStringLiteral("show"), QStringLiteral("99")} << 2 << QStringLiteral("run 99: no such run");
        QTest::newRow("not an id") << QStringList {QStringLiteral("show"), QStringLiteral("abc")} << 2 << QStringLiteral("'abc' is not a run id");
        QTest::newRow("bad format") << QStringList {QStringLiteral("export"), QStringLiteral("1"), QStringLiteral("--format"), QStringLiteral("xml"), QStringLiteral("--out"), QStringLiteral("x")} << 2 << QStringLiteral("--format: must be csv or json");
        QTest::newRow("unknown action") << QStringList {QStringLiteral("frobnicate")} << 2 << QStringLiteral("unknown action");
        QTest::newRow("bad kind") << QStringList {QStringLiteral("--kind"), QStringLiteral("party")} << 2 << QStringLiteral("--kind");
        QTest::newRow("missing import") << QStringList {QStringLiteral("import"), QStringLiteral("/nonexistent/export.json")} << 2 << QStringLiteral("/nonexistent/export.json: no such file");
    }
    void errors()
    {
        QFETCH(QStringList, args);
        QFETCH(int, code);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString db = copyFixture(dir);
        const Result r = cli(QStringList {QStringLiteral("history"), QStringLiteral("--db"), db} + args);
        QCOMPARE(r.code, code);
        QVERIFY2(QString::fromUtf8(r.err).contains(message), r.err.constData());
    }

    void newerDatabaseIsRefusedUnchanged()
    {
        QTemporaryDir dir;
        const QString db = copyFixture(dir);
        {
            QFile f(db);
            QVERIFY(f.open(QIODevice::ReadWrite));
            QVERIFY(f.seek(60)); // user_version, big-endian
            QVERIFY(f.write(QByteArray("\x00\x00\x00\x07", 4)) == 4);
        }
        const QByteArray before = pb::test::fileSha256(db);
        const Result r = cli({QStringLiteral("history"), QStringLiteral("--db"), db});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("schema version 7") && r.err.contains("newer PilotBench"), r.err.constData());
        QCOMPARE(pb::test::fileSha256(db), before);
    }

    void exportImportAndAnnotate()
    {
        QTemporaryDir dir;
        const QString db = copyFixture(dir);
        const QString csv = dir.filePath(QStringLiteral("run1.csv"));
        const QString json = dir.filePath(QStringLiteral("all.json"));
        QCOMPARE(cli({QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("1"), QStringLiteral("--format"), QStringLiteral("csv"), QStringLiteral("--out"), csv, QStringLiteral("--db"), db}).code, 0);
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
        QCOMPARE(lines.size(), 6);
        QVERIFY(lines[0].startsWith("run_id,step,phase,step_time_ms"));
        QCOMPARE(lines[5], QByteArray("1,5,train,40,16,20,4,0,1000000,2000000,1800000,3200000,1024,9.25,3e-04,0.875"));

        QCOMPARE(cli({QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("json"), QStringLiteral("--out"), json, QStringLiteral("--db"), db}).code, 0);
        const QString home = dir.filePath(QStringLiteral("home.sqlite"));
        const Result first = cli({QStringLiteral("history"), QStringLiteral("import"), json, QStringLiteral("--db"), home, QStringLiteral("--json")});
        QVERIFY2(first.code == 0, first.err.constData());
        QCOMPARE(first.json()[QStringLiteral("imported")].toArray().size(), 2);
        const Result second = cli({QStringLiteral("history"), QStringLiteral("import"), json, QStringLiteral("--db"), home, QStringLiteral("--json")});
        QCOMPARE(second.code, 0);
        QCOMPARE(second.json()[QStringLiteral("imported")].toArray().size(), 0);
        QCOMPARE(second.json()[QStringLiteral("skipped")].toArray().size(), 2);
        const QJsonArray runs = cli({QStringLiteral("history"), QStringLiteral("--db"), home, QStringLiteral("--json")}).json()[QStringLiteral("runs")].toArray();
        QCOMPARE(runs.size(), 2);
        QCOMPARE(runs[1].toObject()[QStringLiteral("origin_run_id")].toInt(), 1); // oldest exported first
        QCOMPARE(runs[1].toObject()[QStringLiteral("sample_count")].toInt(), 5);

        QCOMPARE(cli({QStringLiteral("history"), QStringLiteral("tag"), QStringLiteral("2"), QStringLiteral("oom"), QStringLiteral("--db"), db}).code, 0);
        QCOMPARE(cli({QStringLiteral("history"), QStringLiteral("pin"), QStringLiteral("1"), QStringLiteral("--db"), db}).code, 0);
        const QJsonArray tagged = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json"), QStringLiteral("--tag"), QStringLiteral("oom")}).json()[QStringLiteral("runs")].toArray();
        QCOMPARE(tagged.size(), 1);
        QCOMPARE(tagged[0].toObject()[QStringLiteral("id")].toInt(), 2);
        const QJsonObject one = cli({QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1"), QStringLiteral("--db"), db, QStringLiteral("--json")}).json();
        QVERIFY(one[QStringLiteral("pinned_baseline")].toBool());
        const QJsonObject diff = cli({QStringLiteral("history"), QStringLiteral("diff"), QStringLiteral("1"), QStringLiteral("2"), QStringLiteral("--db"), db, QStringLiteral("--json")}).json();
        const QJsonArray differences = diff[QStringLiteral("differences")].toArray();
        QCOMPARE(differences.size(), 1);
        QCOMPARE(differences[0].toObject()[QStringLiteral("path")].toString(), QStringLiteral("train.seq_len"));
        QCOMPARE(differences[0].toObject()[QStringLiteral("right")].toInt(), 8192);
    }
};

QTEST_GUILESS_MAIN(TestCliHistory)
#include "tst_cli_history.moc"
