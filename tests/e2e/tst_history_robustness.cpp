// Issue 35, the history's corpus cases as a user meets them through pilotbench-cli: a history locked
// by another process while a pilot runs (waited for; or the pilot says it could not record and the
// history agrees), non-file --db values, any history offered as an output, export -> import of every
// run kind (a watched run whose probe reported no grad_norm or lr included), and a read-only history
// read by every reading command.
#include "CliProcess.h"
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryWriter.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");

// Another process holding the history's write lock (BEGIN IMMEDIATE) for `seconds`.
class LockHolder {
public:
    LockHolder(const QString &db, double seconds)
    {
        m_process.start(kPython, {QStringLiteral("-c"), QStringLiteral(
            "import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n"
            "c.execute('COMMIT')\n"), db, QString::number(seconds)});
    }
    ~LockHolder() { m_process.waitForFinished(120000); }
    bool waitUntilHeld()
    {
        while (!m_process.canReadLine())
            if (!m_process.waitForReadyRead(30000))
                return false;
        return m_process.readLine().trimmed() == "held";
    }

private:
    QProcess m_process;
};

pbtest::CliBytes cli(const QStringList &args, const QProcessEnvironment &env = {})
{
    return pbtest::runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, 300000, env);
}

QJsonArray runsOf(const QString &db)
{
    const pbtest::CliBytes r = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")});
    return QJsonDocument::fromJson(r.out).object().value(QStringLiteral("runs")).toArray();
}

QJsonObject runOf(const QString &db, int id)
{
    for (const QJsonValue &v : runsOf(db))
        if (v.toObject().value(QStringLiteral("id")).toInt() == id)
            return v.toObject();
    return {};
}

// Waits until `db` holds a run still marked running (the pilot has begun recording).
bool waitForRunningRun(const QString &db, QProcess &pilot)
{
    for (int i = 0; i < 600; ++i) {
        QProcess q;
        q.start(kPython, {QStringLiteral("-c"), QStringLiteral("import sqlite3, sys\n"
                                                              "c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n"
                                                              "print(c.execute(\"SELECT count(*) FROM runs WHERE status = 'running'\").fetchone()[0])\n"), db});
        q.waitForFinished(10000);
        if (q.readAllStandardOutput().trimmed() == "1")
            return true;
        if (pilot.state() == QProcess::NotRunning)
            return false;
        QThread::msleep(50);
    }
    return false;
}

void startPilot(QProcess &p, const QString &db, int steps, const QProcessEnvironment &env = QProcessEnvironment::systemEnvironment())
{
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"),
                                          QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QString::number(steps), QStringLiteral("--warmup"),
                                          QStringLiteral("0"), QStringLiteral("--db"), db});
}

QByteArray sha(const QString &path) { return QFile::exists(path) ? pb::test::fileSha256(path) : QByteArray("(none)"); }

// The fields of an exported run that an import keeps (ids, origin and the import's own bookkeeping aside).
QJsonObject comparable(QJsonObject run)
{
    for (const char *key : {"id", "origin_host", "origin_run_id", "parent_run_id", "sample_count", "pinned_baseline"})
        run.remove(QLatin1String(key));
    return run;
}

} // namespace

class TestHistoryRobustness : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString path(const QString &name) const { return m_dir.filePath(name); }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        // The --db of the output rows: a history with one pilot, copied for each row.
        const pbtest::CliBytes r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                                        QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), path(QStringLiteral("outputs-mine.sqlite"))});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    // The corpus case: a lock held from early in a pilot for longer than one busy timeout. The
    // writer waits (and says so in the log), and the pilot ends recorded in full.
    void pilotWaitsForALockedHistory()
    {
        const QString db = path(QStringLiteral("locked.sqlite"));
        QCOMPARE(cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                      QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), db}).exitCode, 0);
        QProcess pilot;
        startPilot(pilot, db, 60);
        QVERIFY(waitForRunningRun(db, pilot));
        {
            LockHolder lock(db, 8);
            QVERIFY(lock.waitUntilHeld());
            QVERIFY(pilot.waitForFinished(180000));
        }
        const QString out = QString::fromUtf8(pilot.readAllStandardOutput());
        const QString err = QString::fromUtf8(pilot.readAllStandardError());
        QVERIFY2(pilot.exitStatus() == QProcess::NormalExit && pilot.exitCode() == 0, qPrintable(err.right(2000)));
        QVERIFY2(err.contains(QStringLiteral("is locked by another process")), qPrintable(err.right(2000))); // it did meet the lock
        QVERIFY2(out.contains(QStringLiteral("recorded as run 2 in ")), qPrintable(out));
        const QJsonObject run = runOf(db, 2);
        QCOMPARE(run.value(QStringLiteral("status")).toString(), QStringLiteral("done"));
        QCOMPARE(run.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(run.value(QStringLiteral("sample_count")).toInt(), 60);
    }

    // Past the wait it allows ($PILOTBENCH_HISTORY_LOCK_WAIT_S=1): the pilot fails with exit 1, never
    // prints "recorded as run", and what it prints (verdict, steps kept) is what the history holds.
    void pilotThatCannotRecordSaysSoAndTheHistoryAgrees()
    {
        const QString db = path(QStringLiteral("unrecorded.sqlite"));
        QCOMPARE(cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                      QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), db}).exitCode, 0);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("PILOTBENCH_HISTORY_LOCK_WAIT_S"), QStringLiteral("1"));
        QProcess pilot;
        startPilot(pilot, db, 60, env);
        QVERIFY(waitForRunningRun(db, pilot));
        {
            LockHolder lock(db, 12);
            QVERIFY(lock.waitUntilHeld());
            QVERIFY(pilot.waitForFinished(180000));
        }
        const QString out = QString::fromUtf8(pilot.readAllStandardOutput());
        const QString err = QString::fromUtf8(pilot.readAllStandardError());
        QCOMPARE(pilot.exitCode(), 1);
        QVERIFY2(!out.contains(QStringLiteral("recorded as run")), qPrintable(out));
        QVERIFY2(out.startsWith(QStringLiteral("verdict: failed (the history database stopped accepting writes")), qPrintable(out));
        const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("NOT (?:fully )?recorded: run 2 in .* holds (\\d+) of the (\\d+) steps run")).match(out);
        QVERIFY2(m.hasMatch(), qPrintable(out));
        // All 60 when training ended before the writer gave up; fewer when giving up stopped it.
        const int stepsRun = m.captured(2).toInt();
        QVERIFY2(stepsRun >= 1 && stepsRun <= 60, qPrintable(out));
        const QJsonObject run = runOf(db, 2);
        QVERIFY(run.value(QStringLiteral("status")).toString() != QLatin1String("running"));
        QCOMPARE(run.value(QStringLiteral("sample_count")).toInt(), m.captured(1).toInt());
        QVERIFY2(m.captured(1).toInt() < stepsRun, qPrintable(out)); // the steps run under the lock were lost, and it says so
        const QString verdict = out.contains(QStringLiteral("is marked failed")) ? QStringLiteral("failed") : QStringLiteral("interrupted");
        QCOMPARE(run.value(QStringLiteral("verdict")).toString(), verdict);
        QVERIFY2(err.contains(QStringLiteral("locked by another process")), qPrintable(err.right(2000)));
    }

    void nonFileDatabasesAreRefused_data()
    {
        QTest::addColumn<QString>("db");
        QTest::newRow(":memory:") << QStringLiteral(":memory:");
        QTest::newRow("memory URI") << QStringLiteral("file:h?mode=memory");
        QTest::newRow("file URI") << QStringLiteral("file:h.sqlite");
        QTest::newRow("empty") << QString();
    }
    void nonFileDatabasesAreRefused()
    {
        QFETCH(QString, db);
        for (const QStringList &command : {QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"),
                                                        QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0")},
                                           QStringList {QStringLiteral("history")}}) {
            const pbtest::CliBytes r = cli(command + QStringList {QStringLiteral("--db"), db});
            QVERIFY2(r.exitCode == 2, r.err.constData());
            QVERIFY2(r.err.contains("--db"), r.err.constData());
            QVERIFY2(!r.out.contains("recorded as run"), r.out.constData());
        }
    }

    // Every command that writes a file, pointed at a history that is not its --db (or at one through
    // a link, or at its -wal, -shm or -journal file): refused with exit 2, nothing written.
    void historiesAreRefusedAsOutputs_data()
    {
        QTest::addColumn<QStringList>("command");
        QTest::addColumn<QString>("target"); // relative to the test folder
        const QString hf = QStringLiteral(PB_TEST_DATA_DIR "/hf/llama-3.1-8b");
        const QStringList mine {QStringLiteral("--db"), QStringLiteral("mine.sqlite")};
        const QStringList configNew {QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--preset"), QStringLiteral("tiny"), QStringLiteral("--out")};
        const QStringList importHf {QStringLiteral("config"), QStringLiteral("import-hf"), hf, QStringLiteral("--out")};
        QTest::newRow("config new, the history") << configNew << QStringLiteral("other.sqlite");
        QTest::newRow("config new, a link to it") << configNew << QStringLiteral("link.json");
        QTest::newRow("config new, its -wal") << configNew << QStringLiteral("other.sqlite-wal");
        QTest::newRow("config new, its -shm") << configNew << QStringLiteral("other.sqlite-shm");
        QTest::newRow("config new, its -journal") << configNew << QStringLiteral("other.sqlite-journal");
        QTest::newRow("import-hf, the history") << importHf << QStringLiteral("other.sqlite");
        QTest::newRow("import-hf, its -wal") << importHf << QStringLiteral("other.sqlite-wal");
        QTest::newRow("history export json") << QStringList {QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("json")} + mine
                                                    + QStringList {QStringLiteral("--out")} << QStringLiteral("other.sqlite");
        QTest::newRow("history export csv, a link") << QStringList {QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("csv")} + mine
                                                          + QStringList {QStringLiteral("--out")} << QStringLiteral("link.json");
        QTest::newRow("report") << QStringList {QStringLiteral("report"), QStringLiteral("--run"), QStringLiteral("1")} + mine + QStringList {QStringLiteral("--out")}
                                << QStringLiteral("other.sqlite");
        const QStringList pilot = QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"),
                                               QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("1")} + mine;
        QTest::newRow("pilot --memory-snapshot") << pilot + QStringList {QStringLiteral("--memory-snapshot")} << QStringLiteral("other.sqlite");
        QTest::newRow("pilot --param-dump") << pilot + QStringList {QStringLiteral("--param-dump")} << QStringLiteral("other.sqlite");
    }
    void historiesAreRefusedAsOutputs()
    {
        QFETCH(QStringList, command);
        QFETCH(QString, target);
        QTemporaryDir dir;
        const QString mine = dir.filePath(QStringLiteral("mine.sqlite"));
        QVERIFY(QFile::copy(path(QStringLiteral("outputs-mine.sqlite")), mine));
        const QString other = dir.filePath(QStringLiteral("other.sqlite"));
        {
            pb::HistoryWriter writer(other);
            writer.beginRun(pb::test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 64));
        }
        for (const char *suffix : {"-wal", "-shm"}) {
            QFile f(other + QLatin1String(suffix));
            QVERIFY(f.open(QIODevice::WriteOnly));
        }
        QVERIFY(QFile::link(other, dir.filePath(QStringLiteral("link.json"))));
        const QString targetPath = dir.filePath(target);
        const QByteArray historyBefore = sha(other);
        const QByteArray targetBefore = sha(targetPath);
        QStringList args;
        for (const QString &a : command + QStringList {target})
            args << (a.endsWith(QLatin1String(".sqlite")) || a == target ? dir.filePath(a) : a);
        const pbtest::CliBytes r = cli(args);
        QVERIFY2(r.exitCode == 2, qPrintable(QString::number(r.exitCode) + QLatin1Char(' ') + QString::fromUtf8(r.err.right(600))));
        QVERIFY2(r.err.contains("PilotBench history database"), r.err.right(600).constData());
        QCOMPARE(sha(other), historyBefore);
        QCOMPARE(sha(targetPath), targetBefore);
    }

    // Every run kind, a watched run whose probe reported neither grad_norm nor lr among them, goes out
    // and comes back: the import succeeds and each run's record, samples, phases, validations and
    // checkpoints are what was exported.
    void exportImportRoundTripsEveryKind()
    {
        const QString db = path(QStringLiteral("kinds.sqlite"));
        const QStringList config {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db};
        const QString probeJob = path(QStringLiteral("no_grad_norm.py"));
        {
            QFile f(probeJob);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("import json, os, time\n"
                    "with open(os.environ['PILOTBENCH_PROBE'], 'a') as f:\n"
                    "    f.write(json.dumps({'event': 'hello', 't': time.time()}) + '\\n')\n"
                    "    for s in range(1, 6):\n"
                    "        f.write(json.dumps({'event': 'step', 't': time.time(), 'step': s, 'step_time_ms': 10.0, 'tokens': 128, 'loss': 2.0 / s}) + '\\n')\n"
                    "        f.flush()\n"
                    "        time.sleep(0.05)\n"
                    "    f.write(json.dumps({'event': 'end', 't': time.time()}) + '\\n')\n");
        }
        pbtest::CliBytes r = cli(QStringList {QStringLiteral("pilot"), QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = cli({QStringLiteral("watch"), QStringLiteral("--db"), db, QStringLiteral("--"), kPython, probeJob});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = cli(QStringList {QStringLiteral("scale"), QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--device"), QStringLiteral("cpu"),
                             QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = cli(QStringList {QStringLiteral("restore-check"), QStringLiteral("--steps-before"), QStringLiteral("2"), QStringLiteral("--steps-after"), QStringLiteral("2"),
                             QStringLiteral("--checkpoint-dir"), path(QStringLiteral("ckpt"))} + config);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = cli(QStringList {QStringLiteral("compare"), QStringLiteral("--record"), QStringLiteral("--json")} + config);
        QVERIFY2(r.exitCode == 0, r.err.constData());

        const QString first = path(QStringLiteral("kinds.json"));
        r = cli({QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("json"), QStringLiteral("--out"), first, QStringLiteral("--db"), db});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString into = path(QStringLiteral("kinds-imported.sqlite"));
        r = cli({QStringLiteral("history"), QStringLiteral("import"), first, QStringLiteral("--db"), into});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString second = path(QStringLiteral("kinds-again.json"));
        r = cli({QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("json"), QStringLiteral("--out"), second, QStringLiteral("--db"), into});
        QVERIFY2(r.exitCode == 0, r.err.constData());

        auto runs = [](const QString &file) {
            QFile f(file);
            return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("runs")).toArray() : QJsonArray();
        };
        const QJsonArray out = runs(first);
        const QJsonArray back = runs(second);
        QCOMPARE(back.size(), out.size());
        QSet<QString> kinds;
        bool watchedWithoutGradNorm = false;
        for (qsizetype i = 0; i < out.size(); ++i) {
            const QJsonObject a = out[i].toObject();
            kinds << a.value(QStringLiteral("kind")).toString();
            if (a.value(QStringLiteral("kind")).toString() == QLatin1String("watch")) {
                const QJsonArray gradNorm = a.value(QStringLiteral("samples")).toObject().value(QStringLiteral("grad_norm")).toArray();
                watchedWithoutGradNorm = !gradNorm.isEmpty() && gradNorm[0].isNull();
            }
            QCOMPARE(comparable(back[i].toObject()), comparable(a));
        }
        QVERIFY(watchedWithoutGradNorm);
        for (const char *kind : {"pilot", "watch", "scale", "restore-check", "decision"})
            QVERIFY2(kinds.contains(QLatin1String(kind)), kind);
    }

    // A history that this user cannot write (file 0444, folder 0555; as user nobody when the tests run
    // as root, who may write anything), in rollback-journal mode (the corpus case) and in WAL mode
    // (PilotBench's own, whose -shm cannot be made there): every reading command works and the file
    // is left as it was.
    void readOnlyHistoryIsRead_data()
    {
        QTest::addColumn<QString>("journal");
        QTest::newRow("rollback journal") << QStringLiteral("delete");
        QTest::newRow("WAL") << QStringLiteral("wal");
    }
    void readOnlyHistoryIsRead()
    {
        QFETCH(QString, journal);
        QTemporaryDir dir;
        QFile::setPermissions(dir.path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadOther | QFile::ExeOther | QFile::ReadGroup | QFile::ExeGroup);
        const QString folder = dir.filePath(QStringLiteral("history"));
        const QString out = dir.filePath(QStringLiteral("out"));
        QVERIFY(QDir().mkpath(folder));
        QVERIFY(QDir().mkpath(out));
        QFile::setPermissions(out, QFile::Permissions(0x7777));
        const QString db = folder + QStringLiteral("/ro.sqlite");
        pbtest::CliBytes r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                                  QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), db});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QProcess mode;
        mode.start(kPython, {QStringLiteral("-c"), QStringLiteral("import sqlite3, sys\nprint(sqlite3.connect(sys.argv[1]).execute('PRAGMA journal_mode = ' + sys.argv[2]).fetchone()[0])"), db, journal});
        QVERIFY(mode.waitForFinished(30000));
        QCOMPARE(QString::fromUtf8(mode.readAllStandardOutput().trimmed()), journal);
        QVERIFY(!QFile::exists(db + QStringLiteral("-wal")) && !QFile::exists(db + QStringLiteral("-shm")));
        QVERIFY(QFile::setPermissions(db, QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther));
        QVERIFY(QFile::setPermissions(folder, QFile::ReadOwner | QFile::ExeOwner | QFile::ReadGroup | QFile::ExeGroup | QFile::ReadOther | QFile::ExeOther));
        const QByteArray before = sha(db);

        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), out);
        env.insert(QStringLiteral("XDG_DATA_HOME"), out);
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), out);
        env.insert(QStringLiteral("XDG_RUNTIME_DIR"), out);
        const bool root = ::geteuid() == 0;
        auto read = [&](const QStringList &args) {
            QStringList full = QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args + QStringList {QStringLiteral("--db"), db};
            if (!root)
                return pbtest::runProgramBytes(QStringLiteral(PB_CLI_PATH), full, 300000, env);
            return pbtest::runProgramBytes(QStringLiteral("/usr/bin/setpriv"),
                                           QStringList {QStringLiteral("--reuid=65534"), QStringLiteral("--regid=65534"), QStringLiteral("--clear-groups"), QStringLiteral(PB_CLI_PATH)} + full,
                                           300000, env);
        };
        // First make sure the file really cannot be written by whoever reads it.
        r = read({QStringLiteral("history"), QStringLiteral("note"), QStringLiteral("1"), QStringLiteral("x")});
        QVERIFY2(r.exitCode != 0, r.out.constData());

        struct Row { QStringList args; int code; QByteArray expect; };
        const std::vector<Row> rows {
            {{QStringLiteral("history")}, 0, "pilot"},
            {{QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1")}, 0, "Run 1 (pilot, done, fits)"},
            {{QStringLiteral("history"), QStringLiteral("export"), QStringLiteral("--format"), QStringLiteral("json"), QStringLiteral("--out"), out + QStringLiteral("/x.json")}, 0, "Exported 1 run"},
            {{QStringLiteral("history"), QStringLiteral("diff"), QStringLiteral("1"), QStringLiteral("1")}, 0, "same config"},
            {{QStringLiteral("report"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--out"), out + QStringLiteral("/r.pdf")}, 0, "report of run 1 written"},
            {{QStringLiteral("checklist"), QStringLiteral("--config"), QStringLiteral("preset:tiny")}, 1, "Memory budget       passed"}, // 1: later stages missing
            {{QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny")}, 0, "run 1"},
            {{QStringLiteral("estimate"), QStringLiteral("--config"), QStringLiteral("preset:tiny")}, 0, ""},
            {{QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--to"), out + QStringLiteral("/exported")}, 0, "exported to"},
        };
        for (const Row &row : rows) {
            r = read(row.args);
            QVERIFY2(r.exitCode == row.code, qPrintable(row.args.join(QLatin1Char(' ')) + QStringLiteral(": exit %1: ").arg(r.exitCode) + QString::fromUtf8(r.err.right(600))));
            QVERIFY2(!r.err.contains("readonly database"), r.err.constData());
            QVERIFY2(r.out.contains(row.expect), qPrintable(row.args.join(QLatin1Char(' ')) + QStringLiteral(": ") + QString::fromUtf8(r.out.left(600))));
        }
        QCOMPARE(sha(db), before);
        QVERIFY(!QFile::exists(db + QStringLiteral("-wal")) && !QFile::exists(db + QStringLiteral("-shm")));
    }
};

QTEST_GUILESS_MAIN(TestHistoryRobustness)
#include "tst_history_robustness.moc"
