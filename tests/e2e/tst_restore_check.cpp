// The restoration proof and checkpoint integrity, through pilotbench-cli as a user runs them.
#include "e2e/CliProcess.h"
#include "checkpoint/CheckpointManifest.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>

namespace {

using Result = pbtest::CliBytes;

Result cli(const QStringList &args) { return pbtest::runCliBytes(args); }

QJsonObject lastJson(const QByteArray &out)
{
    const auto lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last()).object();
}

QStringList names(const QJsonValue &v)
{
    QStringList out;
    for (const auto &x : v.toArray())
        out << x.toString();
    return out;
}

} // namespace

class TestRestoreCheck : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString path(const QString &name) const { return m_dir.filePath(name); }

private Q_SLOTS:
    void proofPasses_data()
    {
        QTest::addColumn<QStringList>("sets");
        const QStringList schedule {QStringLiteral("--set"), QStringLiteral("train.schedule.kind=cosine"), QStringLiteral("--set"),
                                    QStringLiteral("train.schedule.warmup_steps=3"), QStringLiteral("--set"), QStringLiteral("train.schedule.total_steps=10")};
        QTest::newRow("full adamw") << schedule;
        QTest::newRow("lora adamw with dropout") << (schedule + QStringList {QStringLiteral("--set"), QStringLiteral("train.mode=lora"), QStringLiteral("--set"),
                                                                             QStringLiteral("train.lora.dropout=0.1")});
        // The fused path under autocast draws the masks inside the projections' nodes.
        QTest::newRow("lora adamw with dropout, fused, bf16-mixed")
            << (schedule + QStringList {QStringLiteral("--set"), QStringLiteral("train.mode=lora"), QStringLiteral("--set"), QStringLiteral("train.lora.dropout=0.1"),
                                        QStringLiteral("--set"), QStringLiteral("train.kernels=fused"), QStringLiteral("--set"), QStringLiteral("train.precision=bf16-mixed")});
    }
    void proofPasses()
    {
        QFETCH(QStringList, sets);
        const auto r = cli(QStringList {QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--jsonl"),
                                        QStringLiteral("--checkpoint-dir"), path(QStringLiteral("ok")), QStringLiteral("--db"), path(QStringLiteral("h.db"))} + sets);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto s = lastJson(r.out);
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("pass"));
        QCOMPARE(s.value(QStringLiteral("bitwise")).toBool(), true);
        QCOMPARE(s.value(QStringLiteral("max_abs_loss_diff")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("kind")).toString(), QStringLiteral("bitwise"));
        QCOMPARE(s.value(QStringLiteral("reference_runs")).toInt(), 1);
        QCOMPARE(s.value(QStringLiteral("parameter_distance")).toDouble(), 0.0);
        const QStringList checked = names(s.value(QStringLiteral("checked")));
        for (const char *piece : {"model", "optimizer", "schedule", "rng", "data_position", "final_parameters", "continuation_losses"})
            QVERIFY2(checked.contains(QLatin1String(piece)), piece);
        QVERIFY(s.value(QStringLiteral("checkpoint_write_ms")).toDouble() > 0);
        QVERIFY(s.value(QStringLiteral("checkpoint_bytes")).toDouble() > 0);
    }

    // A mixture of experts (router, experts, shared expert, q/k norm, load-balancing loss) with
    // recomputation: the checkpoint holds every expert and the continuation is bitwise.
    void mixtureOfExpertsProofPasses()
    {
        const auto r = cli({QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny-moe"), QStringLiteral("--set"),
                            QStringLiteral("train.recompute=true"), QStringLiteral("--jsonl"), QStringLiteral("--checkpoint-dir"), path(QStringLiteral("moe")),
                            QStringLiteral("--db"), path(QStringLiteral("h.db"))});
        QVERIFY2(r.exitCode == 0, (r.out + r.err).constData());
        const auto s = lastJson(r.out);
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("pass"));
        QCOMPARE(s.value(QStringLiteral("bitwise")).toBool(), true);
    }

    // Kernels that vary run to run, emulated by moving every trainable value up to N ulps after each
    // step from an unseeded source: the state still has to come back bit for bit; the continuation
    // passes inside the variation of a second uninterrupted run and fails a thousand times outside.
    void continuationEnvelope_data()
    {
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<bool>("pass");
        QTest::addColumn<QString>("differing");
        const QStringList one {QStringLiteral("--test-jitter-ulps"), QStringLiteral("1")};
        const QStringList far {QStringLiteral("--test-resume-jitter-ulps"), QStringLiteral("1000")};
        const QStringList sharded {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--threads"),
                                   QStringLiteral("1")};
        QTest::newRow("inside: 1 ulp in every run") << one << true << QString();
        QTest::newRow("outside: 1000 ulps in the fresh process") << (one + far) << false << QStringLiteral("final_parameters");
        QTest::newRow("state still exact: optimizer dropped") << (one + QStringList {QStringLiteral("--drop-state"), QStringLiteral("optimizer")}) << false
                                                              << QStringLiteral("optimizer");
        QTest::newRow("sharded zero2 on 2 CPU ranks: inside") << (one + sharded) << true << QString();
        QTest::newRow("sharded zero2 on 2 CPU ranks: outside") << (one + far + sharded) << false << QStringLiteral("final_parameters");
    }
    void continuationEnvelope()
    {
        QFETCH(QStringList, extra);
        QFETCH(bool, pass);
        QFETCH(QString, differing);
        const auto r = cli(QStringList {QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--jsonl"),
                                        QStringLiteral("--steps-before"), QStringLiteral("3"), QStringLiteral("--steps-after"), QStringLiteral("3"),
                                        QStringLiteral("--checkpoint-dir"), path(QStringLiteral("envelope")), QStringLiteral("--db"), path(QStringLiteral("h.db"))} + extra);
        const auto s = lastJson(r.out);
        QVERIFY2(r.exitCode == (pass ? 0 : 1), (r.out + r.err).constData());
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), pass ? QStringLiteral("pass") : QStringLiteral("fail"));
        QCOMPARE(s.value(QStringLiteral("kind")).toString(), QStringLiteral("envelope"));
        QCOMPARE(s.value(QStringLiteral("bitwise")).toBool(), false);
        QVERIFY(s.value(QStringLiteral("reference_parameter_distance")).toDouble() > 0);
        QVERIFY(s.value(QStringLiteral("parameter_distance")).toDouble() > 0);
        // The first reference differed, so a second ran: three pairs of uninterrupted runs.
        QCOMPARE(s.value(QStringLiteral("reference_runs")).toInt(), 2);
        const QString message = s.value(QStringLiteral("message")).toString();
        if (pass) {
            QVERIFY2(message.startsWith(QStringLiteral("restored exactly; continuation within the kernels' run-to-run variation")), qPrintable(message));
            QVERIFY(s.value(QStringLiteral("parameter_distance")).toDouble() <= 4 * s.value(QStringLiteral("reference_parameter_distance")).toDouble());
        } else {
            QVERIFY2(names(s.value(QStringLiteral("differing"))).contains(differing), qPrintable(message));
            QVERIFY2(message.contains(differing), qPrintable(message));
        }
        // Nothing of the proof's parameter dumps is left behind.
        QVERIFY(QDir(path(QStringLiteral("envelope/restore-check"))).entryList({QStringLiteral("*.f32")}).isEmpty());
    }

    void droppedStateIsNamed_data()
    {
        QTest::addColumn<QString>("piece");
        QTest::addColumn<QStringList>("sets");
        QTest::newRow("data position") << QStringLiteral("data_position") << QStringList {};
        QTest::newRow("optimizer") << QStringLiteral("optimizer") << QStringList {};
        QTest::newRow("schedule") << QStringLiteral("schedule")
                                  << QStringList {QStringLiteral("--set"), QStringLiteral("train.schedule.kind=cosine"), QStringLiteral("--set"), QStringLiteral("train.schedule.total_steps=10")};
        // The RNG only matters where something draws from it: LoRA dropout does.
        QTest::newRow("rng") << QStringLiteral("rng")
                             << QStringList {QStringLiteral("--set"), QStringLiteral("train.mode=lora"), QStringLiteral("--set"), QStringLiteral("train.lora.dropout=0.1")};
    }
    void droppedStateIsNamed()
    {
        QFETCH(QString, piece);
        QFETCH(QStringList, sets);
        const auto r = cli(QStringList {QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--jsonl"),
                                        QStringLiteral("--checkpoint-dir"), path(QStringLiteral("drop")), QStringLiteral("--db"), path(QStringLiteral("h.db")),
                                        QStringLiteral("--drop-state"), piece} + sets);
        QCOMPARE(r.exitCode, 1);
        const auto s = lastJson(r.out);
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("fail"));
        QVERIFY2(names(s.value(QStringLiteral("differing"))).contains(piece), r.out.constData());
        QVERIFY(s.value(QStringLiteral("message")).toString().contains(piece));
    }

    void damagedCheckpointIsRefusedNamingTheFile_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::addColumn<QString>("file");
        QTest::newRow("corrupt optimizer") << QStringLiteral("corrupt") << QStringLiteral("optimizer.safetensors");
        QTest::newRow("truncated model") << QStringLiteral("truncate") << QStringLiteral("model.safetensors");
        QTest::newRow("removed rng") << QStringLiteral("remove") << QStringLiteral("rng.safetensors");
        QTest::newRow("removed manifest") << QStringLiteral("remove") << QStringLiteral("manifest.json");
    }
    void damagedCheckpointIsRefusedNamingTheFile()
    {
        QFETCH(QString, damage);
        QFETCH(QString, file);
        const QString dir = path(QStringLiteral("damage-") + damage + file);
        auto r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                      QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--checkpoint-at-end"),
                      QStringLiteral("--db"), path(QStringLiteral("h.db"))});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString step = dir + QStringLiteral("/step-00000002");
        QVERIFY(cli({QStringLiteral("checkpoint"), QStringLiteral("verify"), step}).exitCode == 0);
        QFile f(step + QLatin1Char('/') + file);
        if (damage == QLatin1String("remove")) {
            QVERIFY(f.remove());
        } else if (damage == QLatin1String("truncate")) {
            QVERIFY(f.resize(f.size() / 2));
        } else {
            QVERIFY(f.open(QIODevice::ReadWrite));
            f.seek(f.size() / 2);
            const QByteArray byte = f.read(1);
            f.seek(f.size() / 2);
            f.write(QByteArray(1, static_cast<char>(byte.at(0) ^ 0x5a)));
            f.close();
        }
        r = cli({QStringLiteral("checkpoint"), QStringLiteral("verify"), step});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(file.toUtf8()), r.err.constData());
        r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                 QStringLiteral("--resume-from"), step, QStringLiteral("--db"), path(QStringLiteral("h.db"))});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(file.toUtf8()), r.err.constData());
    }

    void killedWriterLeavesThePreviousCheckpointUsable()
    {
        const QString dir = path(QStringLiteral("killed"));
        QProcess p;
        p.start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:small"), QStringLiteral("--set"),
                                               QStringLiteral("checkpoint.every_steps=1"), QStringLiteral("--steps"), QStringLiteral("200"), QStringLiteral("--warmup"),
                                               QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--db"), path(QStringLiteral("k.db"))});
        QVERIFY(p.waitForStarted());
        // Wait until a checkpoint is complete and the next one is being written, then kill hard.
        QTRY_VERIFY_WITH_TIMEOUT(QDir(dir).entryList({QStringLiteral("step-*")}, QDir::Dirs).size() >= 3, 120000);
        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
        p.waitForFinished();
        const QString folder = pb::resolveCheckpointFolder(dir);
        const auto info = pb::verifyCheckpoint(folder);
        QVERIFY(info.step >= 1);
        const auto r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:small"), QStringLiteral("--set"),
                            QStringLiteral("checkpoint.every_steps=1"), QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--resume-from"), dir, QStringLiteral("--jsonl"), QStringLiteral("--db"),
                            path(QStringLiteral("k.db"))});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QCOMPARE(lastJson(r.out).value(QStringLiteral("first_step")).toInteger(), info.step + 1);
    }
};

QTEST_GUILESS_MAIN(TestRestoreCheck)
#include "tst_restore_check.moc"
