// The scale command as a user runs it, on CPU with two Gloo processes: DDP ends with the parameters
// of one process at the doubled batch, the summary's figures are consistent with each other, both
// runs are in the history (linked), a killed worker ends the step with a message and no orphan,
// and bad --gpus / --strategy are exit 2.
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QSet>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include "ScaleCli.h"
#include "dist/Rendezvous.h"
#include "history/HistoryStore.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/types.h>

namespace {

bool gone(qint64 pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// Listening TCP sockets (state 0A in /proc/net/tcp{,6}) by inode, with their local address in hex.
QMap<QString, QString> listeningSockets()
{
    QMap<QString, QString> byInode;
    for (const char *table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        QFile f(QString::fromLatin1(table));
        if (!f.open(QIODevice::ReadOnly))
            continue;
        f.readLine();
        while (!f.atEnd()) {
            const QStringList cols = QString::fromLatin1(f.readLine()).simplified().split(QLatin1Char(' '));
            if (cols.size() > 9 && cols[3] == QLatin1String("0A"))
                byInode.insert(cols[9], cols[1].section(QLatin1Char(':'), 0, 0));
        }
    }
    return byInode;
}

bool isLoopback(const QString &hexAddress)
{
    if (hexAddress.size() == 8) // IPv4, little-endian bytes: 127.x.x.x ends in 7F
        return hexAddress.endsWith(QLatin1String("7F"));
    // IPv6 ::1, or ::ffff:127.x.x.x
    return hexAddress == QLatin1String("00000000000000000000000001000000") ||
           (hexAddress.startsWith(QLatin1String("0000000000000000FFFF0000")) && hexAddress.endsWith(QLatin1String("7F")));
}

// Socket inodes held by processes whose command line contains `marker`.
QSet<QString> socketsOf(const QByteArray &marker, int &processes)
{
    QSet<QString> inodes;
    for (const QString &pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!pid.at(0).isDigit() || !cmdline.open(QIODevice::ReadOnly) || !cmdline.readAll().contains(marker))
            continue;
        ++processes;
        const QDir fds(QStringLiteral("/proc/%1/fd").arg(pid));
        for (const QString &fd : fds.entryList(QDir::Files | QDir::System)) {
            const QString target = QFile::symLinkTarget(fds.filePath(fd));
            if (target.contains(QLatin1String("socket:[")))
                inodes.insert(target.section(QLatin1Char('['), 1).chopped(1));
        }
    }
    return inodes;
}

} // namespace

class TestCliScale : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void ddpMatchesOneProcessAtDoubledBatch_data()
    {
        QTest::addColumn<int>("gradAccum");
        QTest::addColumn<bool>("overlap");
        QTest::newRow("all-reduce during backward") << 1 << true;
        QTest::newRow("during backward, grad_accum 2") << 2 << true;
        QTest::newRow("all-reduce after backward") << 1 << false;
    }

    void ddpMatchesOneProcessAtDoubledBatch()
    {
        QFETCH(int, gradAccum);
        QFETCH(bool, overlap);
        QTemporaryDir dir;
        const QString dumps = dir.filePath(QStringLiteral("dumps"));
        QStringList args {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--steps"), QStringLiteral("4"), QStringLiteral("--warmup"), QStringLiteral("1"),
                          QStringLiteral("--dump-dir"), dumps, QStringLiteral("--jsonl"), QStringLiteral("--set"), QStringLiteral("train.grad_accum=%1").arg(gradAccum)};
        if (!overlap)
            args << QStringLiteral("--no-overlap");
        const Result r = cli(base(dir) + args);
        QVERIFY2(r.code == 0, qPrintable(r.err));

        // The parameters after 5 steps: each rank on its half of every global batch, gradients
        // averaged, against one process accumulating both halves.
        const auto baseline = readFloats(dumps + QStringLiteral("/baseline.f32"));
        const auto rank0 = readFloats(dumps + QStringLiteral("/rank0.f32"));
        const auto rank1 = readFloats(dumps + QStringLiteral("/rank1.f32"));
        QVERIFY(!baseline.empty());
        QCOMPARE(rank0.size(), baseline.size());
        QCOMPARE(rank1.size(), baseline.size());
        double maxDiff = 0, maxAbs = 0;
        for (size_t i = 0; i < baseline.size(); ++i) {
            maxDiff = std::max(maxDiff, static_cast<double>(std::abs(rank0[i] - baseline[i])));
            maxAbs = std::max(maxAbs, static_cast<double>(std::abs(baseline[i])));
            QCOMPARE(rank1[i], rank0[i]); // every rank applies the same averaged gradient
        }
        QVERIFY(maxAbs > 0.1);
        QVERIFY2(maxDiff <= 1e-5, qPrintable(QStringLiteral("rank 0 differs from the doubled-batch baseline by %1").arg(maxDiff)));

        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        QCOMPARE(summary.value(QStringLiteral("strategy")).toString(), QStringLiteral("ddp"));
        QCOMPARE(summary.value(QStringLiteral("gpus")).toInt(), 2);
        QVERIFY(summary.value(QStringLiteral("parameters_agree")).toBool());
        const double baselineTps = summary.value(QStringLiteral("baseline_tokens_per_s")).toDouble();
        const double tps = summary.value(QStringLiteral("tokens_per_s")).toDouble();
        QVERIFY(baselineTps > 0 && tps > 0);
        QCOMPARE(summary.value(QStringLiteral("scaling_efficiency")).toDouble(), tps / (2 * baselineTps));
        QVERIFY(summary.value(QStringLiteral("comm_ms_per_step")).toDouble() > 0);
        const QJsonArray peaks = summary.value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        QCOMPARE(peaks.size(), 2);
        QVERIFY(peaks[0].toDouble() > 0 && peaks[1].toDouble() > 0);
        QCOMPARE(eventOf(r.out, QStringLiteral("baseline")).value(QStringLiteral("grad_accum")).toInt(), 2 * gradAccum);
        QCOMPARE(eventOf(r.out, QStringLiteral("topology")).value(QStringLiteral("collective")).toString(), QStringLiteral("gloo"));

        // Both runs recorded, the scale run pointing at its baseline.
        const qint64 baselineId = static_cast<qint64>(summary.value(QStringLiteral("baseline_run_id")).toDouble());
        const qint64 scaleId = static_cast<qint64>(summary.value(QStringLiteral("run_id")).toDouble());
        {
            auto db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("scale-check"));
            db.setDatabaseName(dir.filePath(QStringLiteral("history.db")));
            QVERIFY(db.open());
            QSqlQuery q(db);
            QVERIFY(q.exec(QStringLiteral("SELECT id, kind, verdict, parent_run_id FROM runs ORDER BY id")));
            QVERIFY(q.next());
            QCOMPARE(q.value(0).toLongLong(), baselineId);
            QCOMPARE(q.value(1).toString(), QStringLiteral("pilot"));
            QCOMPARE(q.value(2).toString(), QStringLiteral("fits"));
            QVERIFY(q.next());
            QCOMPARE(q.value(0).toLongLong(), scaleId);
            QCOMPARE(q.value(1).toString(), QStringLiteral("scale"));
            QCOMPARE(q.value(2).toString(), QStringLiteral("fits"));
            QCOMPARE(q.value(3).toLongLong(), baselineId);
            QVERIFY(!q.next());
            // Where the host has a core per rank, each rank ran bound to its own slice.
            const QJsonArray bound = eventOf(r.out, QStringLiteral("topology")).value(QStringLiteral("rank_cpus")).toArray();
            QVERIFY(q.exec(QStringLiteral("SELECT summary_json FROM runs WHERE id = %1").arg(scaleId)));
            QVERIFY(q.next());
            const QJsonArray ranks = QJsonDocument::fromJson(q.value(0).toString().toUtf8()).object().value(QStringLiteral("ranks")).toArray();
            QCOMPARE(ranks.size(), 2);
            for (int rank = 0; rank < 2 && !bound.isEmpty(); ++rank)
                QCOMPARE(ranks[rank].toObject().value(QStringLiteral("cpu_affinity")).toString(), bound[rank].toString());
            for (int rank = 0; rank < 2; ++rank)
                QCOMPARE(ranks[rank].toObject().value(QStringLiteral("overlap")).toBool(), overlap);
            if (bound.size() == 2)
                QVERIFY(bound[0].toString() != bound[1].toString());

        }
        QSqlDatabase::removeDatabase(QStringLiteral("scale-check"));
        // Both curves recorded, 1 warm-up + 4 measured steps each (rank 0's for the scaled run).
        const pb::HistoryStore store(dir.filePath(QStringLiteral("history.db")));
        QCOMPARE(store.sampleCount(baselineId), int64_t(5));
        const auto samples = store.sampleList(scaleId);
        QCOMPARE(samples.size(), size_t(5));
        QCOMPARE(samples.back().step, int64_t(5));
        QCOMPARE(samples.back().phase, pb::Phase::Train);
        QVERIFY(samples.back().stepTimeMs > 0);
        QCOMPARE(samples.back().tokens, int64_t(256) * gradAccum); // tiny: 4 x 64 tokens per micro-batch and rank

        // Every JSON line has its time; the baseline's steps name the baseline run, the workers the
        // scale run; the topology comes before either is recorded.
        int steps = 0, workers = 0;
        for (const auto &line : r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            const QJsonObject o = QJsonDocument::fromJson(line.toUtf8()).object();
            const QString event = o.value(QStringLiteral("event")).toString();
            const QString time = o.value(QStringLiteral("time")).toString();
            QVERIFY2(time.endsWith(QLatin1Char('Z')) && time.size() == 24 && QDateTime::fromString(time, Qt::ISODateWithMs).isValid(), qPrintable(event + QStringLiteral(": ") + time));
            const qint64 runId = static_cast<qint64>(o.value(QStringLiteral("run_id")).toDouble());
            if (event == QLatin1String("step") || event == QLatin1String("phase")) {
                steps += event == QLatin1String("step") ? 1 : 0;
                QCOMPARE(runId, baselineId);
            } else if (event == QLatin1String("worker_started")) {
                ++workers;
                QCOMPARE(runId, scaleId);
            } else if (event == QLatin1String("topology")) {
                QVERIFY(!o.contains(QStringLiteral("run_id")));
            }
        }
        QCOMPARE(steps, 5);
        QCOMPARE(workers, 2);
    }

    void killedWorkerEndsTheStep()
    {
        QTemporaryDir dir;
        // A recorded baseline at the ranks' effective batch (grad_accum 1 x 2 ranks), reused so the
        // workers start at once and train long enough to be killed mid-run.
        const Result pilot = cli({QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"),
                                  QStringLiteral("--set"), QStringLiteral("train.grad_accum=2"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"),
                                  QStringLiteral("0"), QStringLiteral("--db"), dir.filePath(QStringLiteral("history.db"))});
        QVERIFY2(pilot.code == 0, qPrintable(pilot.err));

        QProcess p;
        p.start(QStringLiteral(PB_CLI_PATH), base(dir) + QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--baseline-run"), QStringLiteral("1"),
                                                                      QStringLiteral("--steps"), QStringLiteral("1000000"), QStringLiteral("--warmup"), QStringLiteral("0"),
                                                                      QStringLiteral("--jsonl")});
        QVERIFY(p.waitForStarted());
        std::vector<qint64> pids;
        QString out;
        while (pids.size() < 2 && p.state() == QProcess::Running) {
            if (!p.canReadLine() && !p.waitForReadyRead(60000))
                break;
            while (p.canReadLine()) {
                const QByteArray line = p.readLine();
                out += QString::fromUtf8(line);
                const QJsonObject o = QJsonDocument::fromJson(line).object();
                if (o.value(QStringLiteral("event")).toString() == QLatin1String("worker_started"))
                    pids.push_back(static_cast<qint64>(o.value(QStringLiteral("pid")).toDouble()));
            }
        }
        QVERIFY2(pids.size() == 2, qPrintable(out + QString::fromUtf8(p.readAllStandardError())));
        QVERIFY(!gone(pids[0]) && !gone(pids[1]));
        QTest::qWait(1500); // let the ranks get into their steps
        QCOMPARE(::kill(static_cast<pid_t>(pids[1]), SIGKILL), 0);

        QVERIFY2(p.waitForFinished(120000), "the launcher did not end the step after a worker died");
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 1);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("worker rank 1")) && err.contains(QStringLiteral("killed")), qPrintable(err));
        QVERIFY2(gone(pids[0]), "rank 0 outlived the step");
        QVERIFY(gone(pids[1]));
        // The workers' logs are kept after a failure, and named.
        static const QRegularExpression logsLine(QStringLiteral("worker logs: (\\S+)"));
        const auto logs = logsLine.match(err);
        QVERIFY2(logs.hasMatch(), qPrintable(err));
        QDir logDir(logs.captured(1));
        QVERIFY(logDir.exists(QStringLiteral("rank0.log")) && logDir.exists(QStringLiteral("rank1.log")));
        QVERIFY(logDir.removeRecursively());
        const QJsonObject error = eventOf(out + QString::fromUtf8(p.readAllStandardOutput()), QStringLiteral("error"));
        QCOMPARE(error.value(QStringLiteral("verdict")).toString(), QStringLiteral("failed"));
        QVERIFY(error.value(QStringLiteral("message")).toString().contains(QStringLiteral("worker rank 1")));
        {
            auto db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("kill-check"));
            db.setDatabaseName(dir.filePath(QStringLiteral("history.db")));
            QVERIFY(db.open());
            QSqlQuery q(db);
            QVERIFY(q.exec(QStringLiteral("SELECT kind, verdict, parent_run_id FROM runs WHERE id = 2")));
            QVERIFY(q.next());
            QCOMPARE(q.value(0).toString(), QStringLiteral("scale"));
            QCOMPARE(q.value(1).toString(), QStringLiteral("failed"));
            QCOMPARE(q.value(2).toLongLong(), qint64(1));
        }
        QSqlDatabase::removeDatabase(QStringLiteral("kill-check"));
    }

    void reusedBaselineMustMatchTheEffectiveBatch()
    {
        QTemporaryDir dir;
        const Result pilot = cli({QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"),
                                  QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"),
                                  dir.filePath(QStringLiteral("history.db"))});
        QVERIFY2(pilot.code == 0, qPrintable(pilot.err));
        const Result r = cli(base(dir) + QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--baseline-run"), QStringLiteral("1")});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("train.grad_accum=2")), qPrintable(r.err));
    }

    void badArguments_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("named");
        QTest::newRow("zero gpus") << QStringList {QStringLiteral("--gpus"), QStringLiteral("0")} << QStringLiteral("--gpus");
        QTest::newRow("negative gpus") << QStringList {QStringLiteral("--gpus"), QStringLiteral("-1")} << QStringLiteral("--gpus");
        QTest::newRow("text gpus") << QStringList {QStringLiteral("--gpus"), QStringLiteral("two")} << QStringLiteral("--gpus");
        QTest::newRow("no gpus") << QStringList {} << QStringLiteral("--gpus");
        QTest::newRow("more gpus than cuda devices") << QStringList {QStringLiteral("--gpus"), QStringLiteral("9999"), QStringLiteral("--device"), QStringLiteral("cuda")}
                                                     << QStringLiteral("--gpus");
        QTest::newRow("one device named") << QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--device"), QStringLiteral("cuda:1")}
                                          << QStringLiteral("--device");
        QTest::newRow("fsdp with fp16") << QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("fsdp"), QStringLiteral("--set"),
                                                         QStringLiteral("train.precision=fp16-mixed")}
                                        << QStringLiteral("fsdp cannot run fp16");
        QTest::newRow("zero2 with fp16") << QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--set"),
                                                          QStringLiteral("train.precision=fp16-mixed")}
                                         << QStringLiteral("zero2 cannot run fp16");
        QTest::newRow("unknown strategy") << QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("zero9")}
                                          << QStringLiteral("--strategy");
    }

    // A scaling step on one host opens no listener beyond loopback: an unauthenticated TCPStore on
    // every interface would let anyone on the network join or poison the rendezvous.
    void singleHostListensOnLoopbackOnly()
    {
        QTemporaryDir dir;
        QProcess p;
        p.start(QStringLiteral(PB_CLI_PATH), base(dir) + QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("ddp"),
                                                                       QStringLiteral("--steps"), QStringLiteral("40"), QStringLiteral("--warmup"), QStringLiteral("1")});
        int sawWorkers = 0;
        QStringList exposed;
        while (!p.waitForFinished(100)) {
            int processes = 0;
            const QSet<QString> mine = socketsOf(QByteArrayLiteral("scale-worker"), processes);
            sawWorkers = std::max(sawWorkers, processes);
            const auto listening = listeningSockets();
            for (auto it = listening.cbegin(); it != listening.cend(); ++it)
                if (mine.contains(it.key()) && !isLoopback(it.value()))
                    exposed << it.value();
            QVERIFY2(p.state() != QProcess::NotRunning || p.exitCode() == 0, "scale ended early");
        }
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(sawWorkers >= 2, "the workers were never seen running: the check saw nothing");
        QVERIFY2(exposed.isEmpty(), qPrintable(QStringLiteral("listening beyond loopback at ") + exposed.join(QStringLiteral(", "))));
    }

    void badArguments()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, named);
        QTemporaryDir dir;
        const Result r = cli(base(dir) + args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(named), qPrintable(r.err));
        QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("history.db")))); // refused before anything ran
    }

    // Every rank is a process of its own and writes its own log file (RANK from its launcher);
    // other commands keep the main one, whatever RANK says.
    void workersLogToFilesOfTheirOwn()
    {
        QTemporaryDir home;
        const QString folder = home.filePath(QStringLiteral("pilotbench"));
        auto run = [&](const QStringList &args, const QString &rank) {
            QProcess p;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert(QStringLiteral("XDG_DATA_HOME"), home.path());
            env.insert(QStringLiteral("RANK"), rank);
            p.setProcessEnvironment(env);
            p.start(QStringLiteral(PB_CLI_PATH), args);
            return p.waitForFinished(60000) && p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        };
        QCOMPARE(run({QStringLiteral("scale-worker"), QStringLiteral("--help")}, QStringLiteral("1")), 0);
        QCOMPARE(run({QStringLiteral("scale-worker"), QStringLiteral("--help")}, QStringLiteral("2")), 0);
        QVERIFY(QFile::exists(folder + QStringLiteral("/pilotbench.rank1.log")));
        QVERIFY(QFile::exists(folder + QStringLiteral("/pilotbench.rank2.log")));
        QVERIFY(!QFile::exists(folder + QStringLiteral("/pilotbench.log")));
        QCOMPARE(run({QStringLiteral("presets")}, QStringLiteral("3")), 0);
        QVERIFY(QFile::exists(folder + QStringLiteral("/pilotbench.log")));
        QVERIFY(!QFile::exists(folder + QStringLiteral("/pilotbench.rank3.log")));
    }

    void workerUnderTorchrunEnvironment_data()
    {
        QTest::addColumn<bool>("usablePort");
        QTest::newRow("lone rank") << true;
        QTest::newRow("port 0 refused") << false;
    }

    void workerUnderTorchrunEnvironment()
    {
        // One rank as torchrun would start it (world of one): its result JSON on stdout.
        QFETCH(bool, usablePort);
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
        env.insert(QStringLiteral("MASTER_PORT"), QString::number(usablePort ? pb::freeLocalPort() : 0));
        env.insert(QStringLiteral("RANK"), QStringLiteral("0"));
        env.insert(QStringLiteral("WORLD_SIZE"), QStringLiteral("1"));
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("scale-worker"), QStringLiteral("--config"),
                                              QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("0"),
                                              QStringLiteral("--threads"), QStringLiteral("1")});
        QVERIFY(p.waitForFinished(120000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        if (!usablePort) {
            QCOMPARE(p.exitCode(), 2);
            QVERIFY2(err.contains(QStringLiteral("MASTER_PORT")), qPrintable(err));
            return;
        }
        QVERIFY2(p.exitCode() == 0, qPrintable(err));
        const QJsonObject result = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(result.value(QStringLiteral("collective")).toString(), QStringLiteral("gloo"));
        QCOMPARE(result.value(QStringLiteral("world_size")).toInt(), 1);
        QCOMPARE(result.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(result.value(QStringLiteral("measured_steps")).toInt(), 2);
        QVERIFY(!result.value(QStringLiteral("cpu_affinity")).toString().isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestCliScale)
#include "tst_cli_scale.moc"
