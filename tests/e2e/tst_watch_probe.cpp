// The probe channel under `pilotbench-cli watch`, fed by a hostile job (tests/data/watch/
// probe_corpus.py writing tests/data/watch/probe_corpus/*.jsonl raw): each bad event is refused,
// named and counted in the summary, and the figures are the good events' alone; a probe file
// replaced by a link to /dev/zero or by a FIFO, or a 64 MiB line, neither hangs nor floods watch.
// Every row runs under a time bound (a hang fails the row, it does not hang the test).
#include "e2e/CliProcess.h"

#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

namespace {

const QString kPython = QStringLiteral("/usr/bin/python3");
const QString kData = QStringLiteral(PB_SOURCE_DIR "/tests/data/watch/");
constexpr int kBoundMs = 60000;

using pbtest::eventOf;

} // namespace

class TestWatchProbe : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;

    struct Run {
        pbtest::CliBytes cli;
        QJsonObject summary;
        qint64 elapsedMs = 0;
    };
    Run watch(const QString &name, const QString &mode, const QString &events, const QStringList &env = {}, bool jsonl = true)
    {
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        for (const QString &kv : env)
            e.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
        QStringList args {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("watch"), QStringLiteral("--db"), m_dir.filePath(name + QStringLiteral(".sqlite")),
                          QStringLiteral("--no-devices"), QStringLiteral("--grace"), QStringLiteral("3"), QStringLiteral("--run-dir"), m_dir.filePath(name)};
        if (jsonl)
            args << QStringLiteral("--jsonl");
        args << QStringLiteral("--") << kPython << kData + QStringLiteral("probe_corpus.py") << mode << kData + QStringLiteral("probe_corpus/") + events + QStringLiteral(".jsonl");
        Run r;
        QElapsedTimer t;
        t.start();
        r.cli = pbtest::runCliBytes(args, kBoundMs, e);
        r.elapsedMs = t.elapsed();
        r.summary = eventOf(r.cli.out, QStringLiteral("summary"));
        return r;
    }

    // The good events alone: 4 steps of 100 ms and 1000 tokens, 2 of them warm-up, nothing else.
    static void checkGoodFigures(const Run &r)
    {
        QVERIFY2(r.cli.exitCode == 0, r.cli.err.right(600).constData());
        QVERIFY2(r.elapsedMs < kBoundMs, "watch did not end within the bound");
        QVERIFY2(!r.cli.err.contains("bad_alloc") && !r.cli.err.contains("watch failed"), r.cli.err.right(600).constData());
        const QJsonObject &s = r.summary;
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(s.value(QStringLiteral("step_source")).toString(), QStringLiteral("probe"));
        QCOMPARE(s.value(QStringLiteral("measured_steps")).toInt(), 2);
        QCOMPARE(s.value(QStringLiteral("step_time_mean_ms")).toDouble(), 100.0);
        QCOMPARE(s.value(QStringLiteral("tokens_per_s")).toDouble(), 10000.0);
        QCOMPARE(s.value(QStringLiteral("data_stall_fraction")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("validation_ms")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("checkpoint_write_ms")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("checkpoint_bytes")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("peak_allocated_bytes")).toDouble(), 0.0);
        QCOMPARE(s.value(QStringLiteral("world_size")).toInt(), 1);
        QCOMPARE(s.value(QStringLiteral("ranks")).toArray().size(), 1);
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // One bad event among good ones, through the pipe and through the fallback file.
    void badEventIsRefused_data()
    {
        QTest::addColumn<QString>("events");
        QTest::addColumn<QString>("channel");
        QTest::addColumn<QString>("why");
        const QList<QPair<const char *, const char *>> rows {
            {"negative-step-time", "step event: step_time_ms: -50 is negative"},
            {"negative-tokens", "step event: tokens: -4600 is negative"},
            {"tokens-near-2e63", "step event: tokens: 92233720368547"},
            {"tokens-2e40", "tokens: 1099511627776 is not below 2^40"},
            {"tokens-fraction", "tokens: 1000.5 is not a whole number"},
            {"tokens-string", "tokens: \"1000\" is a string"},
            {"step-time-over-a-day", "step_time_ms: 86400000 ms is not below a day"},
            {"step-time-infinite", "not JSON"},
            {"negative-forward", "forward_ms: -30 is negative"},
            {"negative-data-wait", "data_wait_ms: -1000000000 is negative"},
            {"peak-memory-1pib", "peak_allocated_bytes: 1125899906842624 is not below 1 PiB"},
            {"negative-reserved", "peak_reserved_bytes: -1 is negative"},
            {"negative-lr", "lr: -0.5 is negative"},
            {"loss-string", "loss: \"low\" is a string"},
            {"negative-step", "step: -3 is negative"},
            {"negative-rank", "rank: -1 is negative"},
            {"fractional-rank", "rank: 0.5 is not a whole number"},
            {"negative-validation", "validation event: duration_ms: -1000000 is negative"},
            {"validation-infinite", "not JSON"},
            {"negative-checkpoint", "checkpoint event: duration_ms: -5 is negative"},
            {"checkpoint-bytes-2e60", "checkpoint event: bytes: 1152921504606846976 is not below 1 PiB"},
            {"world-size-huge", "hello event: world_size: 1000000000000 is not below"},
            {"not-json", "not JSON"},
            {"no-event", "not a JSON object"},
        };
        for (const auto &[events, why] : rows)
            QTest::newRow(events) << QString::fromLatin1(events) << QStringLiteral("pipe") << QString::fromLatin1(why);
        // The fallback file is checked the same way.
        QTest::newRow("negative-step-time (file)") << QStringLiteral("negative-step-time") << QStringLiteral("file") << QStringLiteral("step_time_ms: -50 is negative");
        QTest::newRow("tokens-near-2e63 (file)") << QStringLiteral("tokens-near-2e63") << QStringLiteral("file") << QStringLiteral("tokens: 92233720368547");
        QTest::newRow("negative-validation (file)") << QStringLiteral("negative-validation") << QStringLiteral("file") << QStringLiteral("duration_ms: -1000000 is negative");
    }
    void badEventIsRefused()
    {
        QFETCH(QString, events);
        QFETCH(QString, channel);
        QFETCH(QString, why);
        const Run r = watch(events + QLatin1Char('-') + channel, QStringLiteral("events"), events, {QStringLiteral("CORPUS_CHANNEL=") + channel});
        checkGoodFigures(r);
        QCOMPARE(r.summary.value(QStringLiteral("probe_events_rejected")).toInt(), 1);
        const QString first = r.summary.value(QStringLiteral("probe_first_rejection")).toString();
        QVERIFY2(first.startsWith(QStringLiteral("probe line 4: ")) && first.contains(why), qPrintable(first));
        QVERIFY2(r.cli.out.contains("probe event refused, not counted"), r.cli.out.constData()); // said while it ran
        // The pipe carried the events where the job used it: the fallback file was never made.
        QCOMPARE(QFile::exists(m_dir.filePath(events + QLatin1Char('-') + channel + QStringLiteral("/probe.jsonl"))), channel == QLatin1String("file"));
    }

    // What the job does to the path cannot block or flood watch: a link to /dev/zero and a FIFO are
    // refused by name, a 64 MiB line is one refused line; the pipe's events still count.
    void hostileChannel_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<QString>("channel");
        QTest::addColumn<int>("rejected");
        QTest::addColumn<QString>("refused");
        QTest::newRow("link to /dev/zero") << QStringLiteral("link-dev-zero") << QStringLiteral("pipe") << 0 << QStringLiteral("is a symbolic link");
        QTest::newRow("fifo") << QStringLiteral("fifo") << QStringLiteral("pipe") << 0 << QStringLiteral("is a FIFO");
        QTest::newRow("64 MiB line, pipe") << QStringLiteral("flood") << QStringLiteral("pipe") << 1 << QString();
        QTest::newRow("64 MiB line, file") << QStringLiteral("flood") << QStringLiteral("file") << 1 << QString();
    }
    void hostileChannel()
    {
        QFETCH(QString, mode);
        QFETCH(QString, channel);
        QFETCH(int, rejected);
        QFETCH(QString, refused);
        const Run r = watch(mode + QLatin1Char('-') + channel, mode, QStringLiteral("good"), {QStringLiteral("CORPUS_CHANNEL=") + channel});
        checkGoodFigures(r);
        QCOMPARE(r.summary.value(QStringLiteral("probe_events_rejected")).toInt(), rejected);
        if (rejected > 0)
            QVERIFY(r.summary.value(QStringLiteral("probe_first_rejection")).toString().contains(QStringLiteral("longer than 65536 bytes")));
        if (refused.isEmpty()) {
            QVERIFY(!r.summary.contains(QStringLiteral("probe_file_refused")));
        } else {
            const QString why = r.summary.value(QStringLiteral("probe_file_refused")).toString();
            QVERIFY2(why.contains(refused) && why.contains(QStringLiteral("probe.jsonl")), qPrintable(why));
        }
    }

    // Without --jsonl the person reading the terminal is told too.
    void printedSummarySaysSo()
    {
        const Run r = watch(QStringLiteral("printed"), QStringLiteral("events"), QStringLiteral("negative-step-time"), {}, false);
        QVERIFY2(r.cli.exitCode == 0, r.cli.err.right(600).constData());
        QVERIFY2(r.cli.out.contains("probe: 1 event refused, not counted (first: probe line 4: step event: step_time_ms: -50 is negative)"), r.cli.out.constData());
        QVERIFY2(r.cli.out.contains("step time: mean 100.0 ms"), r.cli.out.constData());
    }
};

QTEST_GUILESS_MAIN(TestWatchProbe)
#include "tst_watch_probe.moc"
