// `pilotbench-cli watch -- COMMAND` as a user runs it, on real small PyTorch training scripts
// (tests/data/watch, Debian's python3-torch on the CPU): with the probe, with log lines only, out of
// memory, a crash, a missing program, a stop after N steps, a cancel that leaves no process behind;
// the run recorded in the history and used by compare.
#include "e2e/CliProcess.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <csignal>

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");

QString script(const char *name) { return QStringLiteral(PB_SOURCE_DIR "/tests/data/watch/") + QLatin1String(name); }

struct Result {
    int code = -1;
    QByteArray out;
    QString err;
};

Result cli(const QStringList &args, const QStringList &env = {}, int timeoutMs = 240000)
{
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const QString &kv : env)
        e.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
    const pbtest::CliBytes r = pbtest::runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, timeoutMs, e);
    return {r.exitCode, r.out, QString::fromUtf8(r.err)};
}

using pbtest::eventOf;

int countEvents(const QByteArray &jsonl, const QString &name)
{
    int n = 0;
    for (const QByteArray &line : jsonl.split('\n'))
        n += QJsonDocument::fromJson(line).object().value(QStringLiteral("event")).toString() == name ? 1 : 0;
    return n;
}

QJsonArray runs(const QString &db)
{
    const Result r = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")});
    return QJsonDocument::fromJson(r.out).object().value(QStringLiteral("runs")).toArray();
}

bool torchAvailable()
{
    QProcess p;
    p.start(kPython, {QStringLiteral("-c"), QStringLiteral("import torch")});
    return p.waitForFinished(60000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

} // namespace

class TestCliWatch : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString path(const QString &name) const { return m_dir.filePath(name); }
    QStringList base(const QString &db) const
    {
        return {QStringLiteral("watch"), QStringLiteral("--db"), db, QStringLiteral("--jsonl"), QStringLiteral("--no-devices"), QStringLiteral("--grace"), QStringLiteral("3")};
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QVERIFY2(torchAvailable(), "/usr/bin/python3 cannot import torch: scripts/setup.sh installs python3-torch");
    }

    // The probe reports every step with tokens, loss, lr and time, a validation and a checkpoint;
    // the run carries them, and compare takes its measured step time for the declared config.
    void probeEventsAreTheSteps()
    {
        const QString db = path(QStringLiteral("probe.sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--"), kPython, script("train_probe.py")},
                             {QStringLiteral("STEPS=12")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(summary.value(QStringLiteral("step_source")).toString(), QStringLiteral("probe"));
        QCOMPARE(summary.value(QStringLiteral("measured_steps")).toInt(), 10); // 12 less 2 warm-up
        QCOMPARE(countEvents(r.out, QStringLiteral("step")), 12);
        QVERIFY(summary.value(QStringLiteral("step_time_mean_ms")).toDouble() > 0);
        QVERIFY(summary.value(QStringLiteral("tokens_per_s")).toDouble() > 0);
        QVERIFY(summary.value(QStringLiteral("flops_per_step")).toDouble() > 0);
        QVERIFY(std::isfinite(summary.value(QStringLiteral("final_loss")).toDouble()));
        QVERIFY(!summary.value(QStringLiteral("probe_hello")).toObject().value(QStringLiteral("torch_version")).toString().isEmpty());
        QCOMPARE(summary.value(QStringLiteral("device_source")).toString(), QStringLiteral("proc"));
        QVERIFY(summary.value(QStringLiteral("peak_device_used_bytes")).toDouble() > 1e6); // the python process's RSS
        QVERIFY(QFile::exists(summary.value(QStringLiteral("log_path")).toString()));
        QCOMPARE(countEvents(r.out, QStringLiteral("validation")), 1);
        QCOMPARE(countEvents(r.out, QStringLiteral("checkpoint")), 1);

        const QJsonArray list = runs(db);
        QCOMPARE(list.size(), 1);
        const QJsonObject run = list[0].toObject();
        QCOMPARE(run.value(QStringLiteral("kind")).toString(), QStringLiteral("watch"));
        QCOMPARE(run.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(run.value(QStringLiteral("sample_count")).toInt(), 12);

        const Result cmp = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db, QStringLiteral("--json")});
        QVERIFY2(cmp.code == 0, qPrintable(cmp.err));
        const QJsonObject c = QJsonDocument::fromJson(cmp.out).object();
        QCOMPARE(c.value(QStringLiteral("pilot_run_id")).toInt(), run.value(QStringLiteral("id")).toInt());
        QVERIFY(c.value(QStringLiteral("pilot_device")).toString().contains(QStringLiteral("watched command")));

        const QString pdf = path(QStringLiteral("watch.pdf"));
        const Result rep = cli({QStringLiteral("report"), QStringLiteral("--run"), QString::number(run.value(QStringLiteral("id")).toInt()), QStringLiteral("--db"), db,
                                QStringLiteral("--out"), pdf});
        QVERIFY2(rep.code == 0, qPrintable(rep.err));
        QVERIFY(pbtest::pdfText(pdf).contains(QStringLiteral("(watch)")));
    }

    // Every JSON line says when it happened and which history run it belongs to: the run is begun
    // before the command starts, so even "started" names it.
    void everyEventHasTimeAndRunId()
    {
        const QString db = path(QStringLiteral("events.sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--"), kPython, script("train_probe.py")}, {QStringLiteral("STEPS=3")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const double runId = eventOf(r.out, QStringLiteral("summary")).value(QStringLiteral("run_id")).toDouble();
        QVERIFY(runId >= 1);
        QCOMPARE(runs(db).at(0).toObject().value(QStringLiteral("id")).toDouble(), runId);
        int lines = 0;
        for (const QByteArray &line : r.out.split('\n')) {
            if (line.trimmed().isEmpty())
                continue;
            ++lines;
            const QJsonObject o = QJsonDocument::fromJson(line).object();
            const QString event = o.value(QStringLiteral("event")).toString();
            const QString time = o.value(QStringLiteral("time")).toString();
            QVERIFY2(time.endsWith(QLatin1Char('Z')) && time.size() == 24 && QDateTime::fromString(time, Qt::ISODateWithMs).isValid(), qPrintable(event + QStringLiteral(": ") + time));
            QVERIFY2(o.value(QStringLiteral("run_id")).toDouble() == runId, qPrintable(event));
        }
        QVERIFY(lines >= 5); // started, 3 steps, summary
        QVERIFY(eventOf(r.out, QStringLiteral("started")).contains(QStringLiteral("run_id")));
    }

    // Without the probe: the Trainer's logged dicts and tqdm's counter give the steps and the loss.
    void logLinesGiveTheSteps()
    {
        const QString db = path(QStringLiteral("logs.sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--"), kPython, script("train_trainer_logs.py")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("step_source")).toString(), QStringLiteral("log-lines"));
        QVERIFY(countEvents(r.out, QStringLiteral("step")) >= 5);
        QVERIFY(summary.value(QStringLiteral("step_time_mean_ms")).toDouble() > 0);
        QVERIFY(summary.value(QStringLiteral("final_loss")).toDouble() > 0);
        QVERIFY(r.err.contains(QStringLiteral("it/s"))); // the command's own output passed through
    }

    // disable_tqdm=True: only the Trainer's dicts. Their losses are recorded; without logging_steps
    // the step time is unknown and the verdict follows the exit; with it (printed or given) the dicts
    // time the steps after the first log.
    void trainerDictsWithoutABar()
    {
        const QString db = path(QStringLiteral("dicts.sqlite"));
        const QStringList env {QStringLiteral("--env"), QStringLiteral("NO_BAR=1"), QStringLiteral("--env"), QStringLiteral("STEP_SLEEP_MS=20"),
                               QStringLiteral("--env"), QStringLiteral("STEPS=12")};
        const QStringList command {QStringLiteral("--"), kPython, script("train_trainer_logs.py")};
        const Result r = cli(base(db) + env + command);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(!r.err.contains(QStringLiteral("it/s")));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QVERIFY2(summary.value(QStringLiteral("message")).toString().contains(QStringLiteral("step time unknown")), qPrintable(summary.value(QStringLiteral("message")).toString()));
        QCOMPARE(summary.value(QStringLiteral("step_time_known")).toBool(true), false);
        QCOMPARE(countEvents(r.out, QStringLiteral("step")), 0);
        QCOMPARE(countEvents(r.out, QStringLiteral("trainer_loss")), 12);
        const QJsonArray losses = summary.value(QStringLiteral("trainer_losses")).toArray();
        QCOMPARE(losses.size(), 12);
        QVERIFY(losses.last().toObject().value(QStringLiteral("loss")).toDouble() < losses.first().toObject().value(QStringLiteral("loss")).toDouble());
        QCOMPARE(summary.value(QStringLiteral("final_loss")).toDouble(), losses.last().toObject().value(QStringLiteral("loss")).toDouble());
        QCOMPARE(runs(db)[0].toObject().value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));

        // logging_steps=4 from the printed TrainingArguments, or --log-every 4: steps 5..12 timed.
        const QStringList every {QStringLiteral("--env"), QStringLiteral("LOGGING_STEPS=4")};
        for (const QStringList &how : {QStringList {QStringLiteral("--env"), QStringLiteral("PRINT_ARGS=1")}, QStringList {QStringLiteral("--log-every"), QStringLiteral("4")}}) {
            const Result timed = cli(base(db) + env + every + how + command);
            QVERIFY2(timed.code == 0, qPrintable(timed.err));
            const QJsonObject s = eventOf(timed.out, QStringLiteral("summary"));
            QCOMPARE(s.value(QStringLiteral("logging_steps")).toInt(), 4);
            QCOMPARE(s.value(QStringLiteral("trainer_losses")).toArray().size(), 3);
            QCOMPARE(countEvents(timed.out, QStringLiteral("step")), 8);
            QVERIFY(s.value(QStringLiteral("step_time_known")).toBool());
            // 4 steps of >= 20 ms sleep between two logs
            QVERIFY2(s.value(QStringLiteral("step_time_mean_ms")).toDouble() >= 19, qPrintable(QString::number(s.value(QStringLiteral("step_time_mean_ms")).toDouble())));
        }
        const Result bad = cli(base(db) + QStringList {QStringLiteral("--log-every"), QStringLiteral("0")} + command);
        QCOMPARE(bad.code, 2);
        QVERIFY(bad.err.contains(QStringLiteral("--log-every")));
    }

    void outcomes_data()
    {
        QTest::addColumn<QString>("scriptName");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("verdict");
        QTest::addColumn<QString>("message");
        QTest::newRow("out of memory") << QStringLiteral("oom.py") << 3 << QStringLiteral("does-not-fit") << QStringLiteral("out of memory");
        QTest::newRow("crash") << QStringLiteral("crash.py") << 1 << QStringLiteral("failed") << QStringLiteral("exited with code 1");
    }
    void outcomes()
    {
        QFETCH(QString, scriptName);
        QFETCH(int, exitCode);
        QFETCH(QString, verdict);
        QFETCH(QString, message);
        const QString db = path(scriptName + QStringLiteral(".sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--"), kPython, script(scriptName.toLatin1().constData())});
        QCOMPARE(r.code, exitCode);
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), verdict);
        QVERIFY2(summary.value(QStringLiteral("message")).toString().contains(message), qPrintable(summary.value(QStringLiteral("message")).toString()));
        const QJsonArray list = runs(db);
        QCOMPARE(list.size(), 1);
        QCOMPARE(list[0].toObject().value(QStringLiteral("verdict")).toString(), verdict);
        QCOMPARE(list[0].toObject().value(QStringLiteral("status")).toString(), QStringLiteral("done"));
    }

    void missingProgramIsInvalidInput()
    {
        const QString db = path(QStringLiteral("missing.sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--"), QStringLiteral("no-such-trainer-xyz"), QStringLiteral("--epochs"), QStringLiteral("1")});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("no-such-trainer-xyz")), qPrintable(r.err));
        QVERIFY(runs(db).isEmpty());
        const Result none = cli(base(db));
        QCOMPARE(none.code, 2);
        QVERIFY(none.err.contains(QStringLiteral("COMMAND")));
    }

    void stopsOnPurposeAfterMaxSteps()
    {
        const QString db = path(QStringLiteral("max.sqlite"));
        const Result r = cli(base(db) + QStringList {QStringLiteral("--max-steps"), QStringLiteral("5"), QStringLiteral("--"), kPython, script("long_with_child.py")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QVERIFY(summary.value(QStringLiteral("stopped_on_purpose")).toBool());
        QVERIFY(countEvents(r.out, QStringLiteral("step")) >= 5);
    }

    // The user's own job proves restoration (an uninterrupted watched run and one resumed from its
    // checkpoint, losses compared step by step) and scaling (watched on one rank and on two): the
    // checklist's stages 2 and 3 pass on them.
    void watchedRunsAreRestoreAndScalingEvidence()
    {
        const QString db = path(QStringLiteral("evidence.sqlite"));
        QTemporaryDir ckpt;
        const QStringList config {QStringLiteral("--config"), QStringLiteral("preset:tiny")};
        auto idOf = [](const Result &r) { return eventOf(r.out, QStringLiteral("summary")).value(QStringLiteral("run_id")).toInt(); };
        const Result a = cli(base(db) + config + QStringList {QStringLiteral("--env"), QStringLiteral("CHECKPOINT_DIR=") + ckpt.path(), QStringLiteral("--env"),
                                                             QStringLiteral("STEPS=8"), QStringLiteral("--"), kPython, script("train_probe.py")});
        QVERIFY2(a.code == 0, qPrintable(a.err));
        const Result b = cli(base(db) + config + QStringList {QStringLiteral("--env"), QStringLiteral("RESUME_FROM=") + ckpt.filePath(QStringLiteral("step-4.pt")),
                                                             QStringLiteral("--env"), QStringLiteral("STEPS=8"), QStringLiteral("--"), kPython, script("train_probe.py")});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        Result r = cli({QStringLiteral("restore-check"), QStringLiteral("--db"), db, QStringLiteral("--jsonl"), QStringLiteral("--uninterrupted-run"),
                        QString::number(idOf(a)), QStringLiteral("--resumed-run"), QString::number(idOf(b))});
        QVERIFY2(r.code == 0, r.out.constData());
        QJsonObject proof = eventOf(r.out, QStringLiteral("summary"));
        QVERIFY(proof.value(QStringLiteral("pass")).toBool());
        QCOMPARE(proof.value(QStringLiteral("first_resumed_step")).toInt(), 5);
        QCOMPARE(proof.value(QStringLiteral("compared_steps")).toInt(), 4);
        QCOMPARE(proof.value(QStringLiteral("max_abs_loss_diff")).toDouble(), 0.0);
        // A run that did not resume is no proof, and says why.
        r = cli({QStringLiteral("restore-check"), QStringLiteral("--db"), db, QStringLiteral("--uninterrupted-run"), QString::number(idOf(b)),
                 QStringLiteral("--resumed-run"), QString::number(idOf(a))});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("did not resume")), qPrintable(r.err));

        const Result ddp = cli(base(db) + config + QStringList {QStringLiteral("--"), kPython, script("ddp_two_ranks.py"), QStringLiteral("6")});
        QVERIFY2(ddp.code == 0, qPrintable(ddp.err));
        QCOMPARE(eventOf(ddp.out, QStringLiteral("summary")).value(QStringLiteral("world_size")).toInt(), 2);
        r = cli(QStringList {QStringLiteral("checklist"), QStringLiteral("--db"), db, QStringLiteral("--json")} + config);
        const QJsonArray stages = QJsonDocument::fromJson(r.out).object().value(QStringLiteral("stages")).toArray();
        QCOMPARE(stages.size(), 4);
        for (int i = 0; i < 3; ++i)
            QVERIFY2(stages[i].toObject().value(QStringLiteral("state")).toString() == QLatin1String("passed"),
                     qPrintable(stages[i].toObject().value(QStringLiteral("evidence")).toString()));
        QVERIFY(stages[1].toObject().value(QStringLiteral("evidence")).toString().contains(QStringLiteral("Watched runs")));

        // A job whose kernels vary run to run (JITTER_ULPS): a second uninterrupted run is the
        // envelope; a resumed run inside it passes, one that moved a thousand times more fails.
        const QStringList jitter {QStringLiteral("--env"), QStringLiteral("JITTER_ULPS=1"), QStringLiteral("--env"), QStringLiteral("STEPS=8")};
        QVERIFY(QDir(ckpt.path()).mkpath(QStringLiteral("j")));
        const Result ja = cli(base(db) + config + jitter + QStringList {QStringLiteral("--env"), QStringLiteral("CHECKPOINT_DIR=") + ckpt.filePath(QStringLiteral("j")),
                                                                       QStringLiteral("--"), kPython, script("train_probe.py")});
        const Result jref = cli(base(db) + config + jitter + QStringList {QStringLiteral("--"), kPython, script("train_probe.py")});
        const Result jb = cli(base(db) + config + jitter + QStringList {QStringLiteral("--env"), QStringLiteral("RESUME_FROM=") + ckpt.filePath(QStringLiteral("j/step-4.pt")),
                                                                       QStringLiteral("--"), kPython, script("train_probe.py")});
        const Result jfar = cli(base(db) + config + QStringList {QStringLiteral("--env"), QStringLiteral("JITTER_ULPS=100000"), QStringLiteral("--env"), QStringLiteral("STEPS=8"),
                                                                QStringLiteral("--env"), QStringLiteral("RESUME_FROM=") + ckpt.filePath(QStringLiteral("j/step-4.pt")),
                                                                QStringLiteral("--"), kPython, script("train_probe.py")});
        for (const Result *x : {&ja, &jref, &jb, &jfar})
            QVERIFY2(x->code == 0, qPrintable(x->err));
        auto envelope = [&](const Result &resumed) {
            return cli({QStringLiteral("restore-check"), QStringLiteral("--db"), db, QStringLiteral("--jsonl"), QStringLiteral("--uninterrupted-run"), QString::number(idOf(ja)),
                        QStringLiteral("--resumed-run"), QString::number(idOf(resumed)), QStringLiteral("--reference-run"), QString::number(idOf(jref))});
        };
        r = envelope(jb);
        QVERIFY2(r.code == 0, r.out.constData());
        proof = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(proof.value(QStringLiteral("kind")).toString(), QStringLiteral("envelope"));
        // One ulp of jitter may leave every reported float32 loss unchanged (CI saw it): the reference
        // is still the envelope, at the losses' own resolution at least.
        QCOMPARE(proof.value(QStringLiteral("reference_run_ids")).toArray(), QJsonArray {static_cast<double>(idOf(jref))});
        QVERIFY(proof.value(QStringLiteral("reference_max_abs_loss_diff")).isDouble());
        QVERIFY(proof.value(QStringLiteral("message")).toString().contains(QStringLiteral("run-to-run variation")));
        r = envelope(jfar);
        QCOMPARE(r.code, 1);
        QVERIFY2(eventOf(r.out, QStringLiteral("summary")).value(QStringLiteral("message")).toString().contains(QStringLiteral("diverged")), r.out.constData());

    }

    // SIGTERM to watch (as Ctrl-C or a closed session would) stops the command and its child; the
    // run is recorded cancelled and no process of the job is left.
    void cancelLeavesNoProcess()
    {
        const QString db = path(QStringLiteral("cancel.sqlite"));
        QTemporaryDir marker;
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("WATCH_TEST_MARKER"), marker.path());
        p.setProcessEnvironment(e);
        p.start(QStringLiteral(PB_CLI_PATH), QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + base(db)
                                                 + QStringList {QStringLiteral("--"), kPython, script("long_with_child.py"), marker.path()});
        QVERIFY(p.waitForStarted());
        QByteArray out;
        for (int i = 0; i < 600 && countEvents(out, QStringLiteral("step")) < 3; ++i) {
            p.waitForReadyRead(100);
            out += p.readAllStandardOutput();
        }
        QVERIFY2(countEvents(out, QStringLiteral("step")) >= 3, p.readAllStandardError().constData());
        ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
        QVERIFY(p.waitForFinished(60000));
        out += p.readAllStandardOutput();
        QCOMPARE(p.exitCode(), 4);
        QCOMPARE(eventOf(out, QStringLiteral("summary")).value(QStringLiteral("verdict")).toString(), QStringLiteral("cancelled"));
        QCOMPARE(runs(db)[0].toObject().value(QStringLiteral("verdict")).toString(), QStringLiteral("cancelled"));
        // No process of the job remains: none has the marker folder on its command line.
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                for (const QString &pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
                    QFile cmd(QStringLiteral("/proc/") + pid + QStringLiteral("/cmdline"));
                    if (pid.toInt() > 0 && cmd.open(QIODevice::ReadOnly) && cmd.readAll().contains(marker.path().toUtf8()))
                        return false;
                }
                return true;
            }(),
            10000);
    }
};

QTEST_GUILESS_MAIN(TestCliWatch)
#include "tst_cli_watch.moc"
