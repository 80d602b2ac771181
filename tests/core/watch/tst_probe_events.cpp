// The probe channel as input: every event's figures finite, non-negative and bounded or the event
// refused with the field named; a refused event counted and never averaged in; lines longer than
// the limit skipped without being buffered; the fallback file read only when it is a regular file
// (a link to /dev/zero, a FIFO, a folder refused at once, without blocking).
#include "watch/ProbeChannel.h"
#include "watch/ProbeEvents.h"
#include "watch/StepCollector.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace pb::watch;

namespace {

QByteArray stepLine(const QByteArray &extra)
{
    return QByteArrayLiteral("{\"event\":\"step\",\"t\":1700000000,\"rank\":0,\"pid\":1,\"step\":3,\"tokens\":1000,\"step_time_ms\":100") + extra + '}';
}

struct CountingObserver : WatchObserver {
    QStringList notices;
    void notice(const QString &text) override { notices << text; }
};

// Every line the channel gives, with the over-long ones as "<too long>".
struct Collected {
    QList<QByteArray> lines;
    int tooLong = 0;
};

} // namespace

class TestProbeEvents : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void refusesOutOfBounds_data()
    {
        QTest::addColumn<QByteArray>("line");
        QTest::addColumn<QString>("why"); // what the reason must hold
        QTest::newRow("negative step time") << stepLine(",\"step_time_ms\":-50") << QStringLiteral("step_time_ms: -50 is negative");
        QTest::newRow("step time of a day") << stepLine(",\"step_time_ms\":86400000") << QStringLiteral("step_time_ms: 86400000 ms is not below a day");
        QTest::newRow("negative tokens") << stepLine(",\"tokens\":-4600") << QStringLiteral("tokens: -4600 is negative");
        // Qt reads it as 9223372036854774784.
        QTest::newRow("tokens near 2^63") << stepLine(",\"tokens\":9223372036854775000") << QStringLiteral("tokens: 92233720368547");
        QTest::newRow("tokens 2^40") << stepLine(",\"tokens\":1099511627776") << QStringLiteral("tokens: 1099511627776 is not below 2^40");
        QTest::newRow("tokens fraction") << stepLine(",\"tokens\":10.5") << QStringLiteral("tokens: 10.5 is not a whole number");
        QTest::newRow("tokens as text") << stepLine(",\"tokens\":\"1000\"") << QStringLiteral("tokens: \"1000\" is a string, not a number");
        QTest::newRow("tokens as object") << stepLine(",\"tokens\":{}") << QStringLiteral("tokens: not a number");
        QTest::newRow("negative forward") << stepLine(",\"forward_ms\":-1") << QStringLiteral("forward_ms: -1 is negative");
        QTest::newRow("negative backward") << stepLine(",\"backward_ms\":-1") << QStringLiteral("backward_ms: -1 is negative");
        QTest::newRow("negative optimizer") << stepLine(",\"optimizer_ms\":-1") << QStringLiteral("optimizer_ms: -1 is negative");
        QTest::newRow("negative data wait") << stepLine(",\"data_wait_ms\":-1e9") << QStringLiteral("data_wait_ms: -1000000000 is negative");
        QTest::newRow("fwd+bwd of a day") << stepLine(",\"forward_backward_ms\":1e8") << QStringLiteral("forward_backward_ms: 100000000 ms is not below a day");
        QTest::newRow("peak 1 PiB") << stepLine(",\"peak_allocated_bytes\":1125899906842624") << QStringLiteral("peak_allocated_bytes: 1125899906842624 is not below 1 PiB");
        QTest::newRow("negative reserved") << stepLine(",\"peak_reserved_bytes\":-1") << QStringLiteral("peak_reserved_bytes: -1 is negative");
        QTest::newRow("allocated fraction") << stepLine(",\"allocated_bytes\":0.5") << QStringLiteral("allocated_bytes: 0.5 is not a whole number");
        QTest::newRow("negative lr") << stepLine(",\"lr\":-0.5") << QStringLiteral("lr: -0.5 is negative");
        QTest::newRow("negative grad norm") << stepLine(",\"grad_norm\":-2") << QStringLiteral("grad_norm: -2 is negative");
        QTest::newRow("loss as text") << stepLine(",\"loss\":\"low\"") << QStringLiteral("loss: \"low\" is a string");
        QTest::newRow("negative step") << stepLine(",\"step\":-3") << QStringLiteral("step: -3 is negative");
        QTest::newRow("negative rank") << stepLine(",\"rank\":-1") << QStringLiteral("rank: -1 is negative");
        QTest::newRow("fractional rank") << stepLine(",\"rank\":0.5") << QStringLiteral("rank: 0.5 is not a whole number");
        QTest::newRow("rank 2^20") << stepLine(",\"rank\":1048576") << QStringLiteral("rank: 1048576 is not below 2^20");
        QTest::newRow("negative time") << stepLine(",\"t\":-1") << QStringLiteral("t: -1 is negative");
        QTest::newRow("infinite step time") << stepLine(",\"step_time_ms\":1e999") << QStringLiteral("not JSON");
        QTest::newRow("negative validation") << QByteArray("{\"event\":\"validation\",\"step\":2,\"loss\":2.5,\"duration_ms\":-1000000}")
                                             << QStringLiteral("validation event: duration_ms: -1000000 is negative");
        QTest::newRow("validation batches") << QByteArray("{\"event\":\"validation\",\"step\":2,\"batches\":-1,\"duration_ms\":5}")
                                            << QStringLiteral("validation event: batches: -1 is negative");
        QTest::newRow("negative checkpoint") << QByteArray("{\"event\":\"checkpoint\",\"step\":2,\"duration_ms\":-5,\"bytes\":1000}")
                                             << QStringLiteral("checkpoint event: duration_ms: -5 is negative");
        QTest::newRow("checkpoint 2^60 bytes") << QByteArray("{\"event\":\"checkpoint\",\"step\":2,\"duration_ms\":5,\"bytes\":1152921504606846976}")
                                               << QStringLiteral("checkpoint event: bytes: 1152921504606846976 is not below 1 PiB");
        QTest::newRow("checkpoint path number") << QByteArray("{\"event\":\"checkpoint\",\"step\":2,\"path\":5}") << QStringLiteral("path: not a string");
        QTest::newRow("world size 1e12") << QByteArray("{\"event\":\"hello\",\"world_size\":1000000000000}") << QStringLiteral("hello event: world_size: 1000000000000 is not below");
        QTest::newRow("world size 0") << QByteArray("{\"event\":\"hello\",\"world_size\":0}") << QStringLiteral("world_size: 0 is below 1");
        QTest::newRow("torn line") << QByteArray("{\"event\":\"step\",\"step\":3,\"tokens\":") << QStringLiteral("not JSON");
        QTest::newRow("array") << QByteArray("[1,2,3]") << QStringLiteral("not a JSON object");
        QTest::newRow("no event") << QByteArray("{\"step\":3}") << QStringLiteral("event: missing or not a string");
        QTest::newRow("event number") << QByteArray("{\"event\":3}") << QStringLiteral("event: missing or not a string");
    }
    void refusesOutOfBounds()
    {
        QFETCH(QByteArray, line);
        QFETCH(QString, why);
        const ProbeLine read = readProbeLine(line);
        QVERIFY2(!read.event, line.constData());
        QVERIFY2(QString::fromStdString(read.rejection).contains(why), read.rejection.c_str());
    }

    // The bounds are strict upper bounds and nothing more: figures just below them, zeros, nulls
    // (not reported), a negative loss and fields the reader does not know are all accepted.
    void acceptsWhatIsInside_data()
    {
        QTest::addColumn<QByteArray>("line");
        QTest::newRow("plain") << stepLine({});
        QTest::newRow("just below the bounds") << stepLine(",\"tokens\":1099511627775,\"step_time_ms\":86399999.9,\"peak_allocated_bytes\":1125899906842623,\"rank\":1048575");
        QTest::newRow("zeros") << stepLine(",\"tokens\":0,\"step_time_ms\":0,\"step\":0,\"lr\":0");
        QTest::newRow("nulls") << stepLine(",\"tokens\":null,\"loss\":null,\"lr\":null,\"grad_norm\":null,\"peak_allocated_bytes\":null");
        QTest::newRow("negative loss") << stepLine(",\"loss\":-3.5");
        QTest::newRow("job's own field") << stepLine(",\"mean_token_accuracy\":-1,\"note\":\"x\"");
        QTest::newRow("unknown kind") << QByteArray("{\"event\":\"error\",\"oom\":true,\"type\":\"RuntimeError\",\"message\":\"CUDA out of memory\"}");
        QTest::newRow("log") << QByteArray("{\"event\":\"log\",\"value\":-5}");
        QTest::newRow("world size 8") << QByteArray("{\"event\":\"hello\",\"world_size\":8}");
    }
    void acceptsWhatIsInside()
    {
        QFETCH(QByteArray, line);
        const ProbeLine read = readProbeLine(line);
        QVERIFY2(read.event, read.rejection.c_str());
        QVERIFY(read.rejection.empty());
    }

    // The collector: a refused step is counted and named, the accepted ones alone make the figures.
    void refusedStepIsNotAveragedIn()
    {
        CountingObserver observer;
        WatchOptions options;
        options.warmupSteps = 0;
        StepCollector steps(options, observer);
        steps.probeLine(stepLine(",\"step\":1"), 1);
        steps.probeLine(stepLine(",\"step\":2,\"step_time_ms\":-50"), 2);
        steps.probeLine(stepLine(",\"step\":3,\"tokens\":9223372036854775000"), 3);
        steps.probeLine(stepLine(",\"step\":4"), 4);
        QCOMPARE(steps.stepsSeen(), int64_t(2));
        QCOMPARE(steps.probeEventsRejected(), int64_t(2));
        QCOMPARE(QString::fromStdString(steps.firstProbeRejection()), QStringLiteral("probe line 2: step event: step_time_ms: -50 is negative"));
        for (const pb::StepSample &s : steps.samples()) {
            QCOMPARE(s.stepTimeMs, 100.0);
            QCOMPARE(s.tokens, int64_t(1000));
        }
        QCOMPARE(observer.notices.filter(QStringLiteral("refused")).size(), 2);
        steps.probeLine("{\"event\":\"validation\",\"step\":2,\"duration_ms\":-1000000}", 5);
        QVERIFY(steps.validations().empty());
        steps.probeRejected("longer than 65536 bytes: skipped");
        QCOMPARE(steps.probeEventsRejected(), int64_t(4));
        // A job that writes only bad lines does not flood the terminal.
        for (int i = 0; i < 100; ++i)
            steps.probeLine("garbage", 6);
        QVERIFY(observer.notices.filter(QStringLiteral("refused")).size() <= 4);
        QCOMPARE(steps.probeEventsRejected(), int64_t(104));
    }

    // Over-long lines are skipped to their newline whatever the chunking, never buffered whole.
    void longLinesAreSkipped()
    {
        const QByteArray longLine(kMaxProbeLineBytes + 1, 'x');
        const QByteArray stream = "a\n" + longLine + "\nb\n" + QByteArray(3 * kMaxProbeLineBytes, 'y') + "\nc\nd";
        for (const qsizetype chunk : {qsizetype(1), qsizetype(7), qsizetype(4096), qsizetype(kMaxProbeLineBytes), stream.size()}) {
            ProbeLineSplitter splitter;
            Collected c;
            for (qsizetype i = 0; i < stream.size(); i += chunk)
                splitter.feed(stream.constData() + i, std::min(chunk, stream.size() - i), [&](const QByteArray &l) { c.lines << l; }, [&] { ++c.tooLong; });
            splitter.flush([&](const QByteArray &l) { c.lines << l; });
            QCOMPARE(c.lines, (QList<QByteArray> {"a", "b", "c", "d"}));
            QCOMPARE(c.tooLong, 2);
        }
        // A line exactly at the limit is a line.
        ProbeLineSplitter splitter;
        Collected c;
        const QByteArray atLimit = QByteArray(kMaxProbeLineBytes, 'z') + '\n';
        splitter.feed(atLimit.constData(), atLimit.size(), [&](const QByteArray &l) { c.lines << l; }, [&] { ++c.tooLong; });
        QCOMPARE(c.lines.size(), 1);
        QCOMPARE(c.tooLong, 0);
    }

    // The pipe: lines read as they come, at most the budget per call, an endless line skipped.
    void pipeIsReadWithinBudget()
    {
        QTemporaryDir dir;
        ProbeChannel channel(dir.filePath(QStringLiteral("probe.jsonl")));
        QVERIFY(channel.jobFd() >= 0);
        QVERIFY(fcntl(channel.jobFd(), F_GETFD) & FD_CLOEXEC); // only the job gets it, not every child
        QProcessEnvironment env;
        channel.addTo(env);
        QCOMPARE(env.value(QStringLiteral("PILOTBENCH_PROBE_FD")).toInt(), channel.jobFd());
        struct stat st {};
        QCOMPARE(fstat(channel.jobFd(), &st), 0);
        QCOMPARE(env.value(QStringLiteral("PILOTBENCH_PROBE_FD_INODE")).toULongLong(), static_cast<unsigned long long>(st.st_ino));
        const int w = dup(channel.jobFd()); // the job's copy
        channel.closeJobEnd();
        const QByteArray first = "{\"event\":\"hello\"}\n" + QByteArray(40000, 'x');
        QCOMPARE(write(w, first.constData(), first.size()), ssize_t(first.size()));
        Collected c;
        auto sink = [&](const QByteArray &l) { c.lines << l; };
        auto tooLong = [&] { ++c.tooLong; };
        channel.read(1000, sink, tooLong);
        QCOMPARE(c.lines.size(), 1); // the first 1000 bytes hold the hello line
        QElapsedTimer t;
        t.start();
        channel.read(1 << 20, sink, tooLong); // returns at once with nothing left: no wait
        QVERIFY(t.elapsed() < 1000);
        const QByteArray rest = QByteArray(40000, 'x') + "\n{\"event\":\"end\"}\n";
        QCOMPARE(write(w, rest.constData(), rest.size()), ssize_t(rest.size()));
        close(w);
        channel.finish(1 << 20, sink, tooLong);
        QCOMPARE(c.lines, (QList<QByteArray> {"{\"event\":\"hello\"}", "{\"event\":\"end\"}"}));
        QCOMPARE(c.tooLong, 1);
        QVERIFY(!channel.leftUnread());
        QVERIFY(channel.fileRefused().empty());
    }

    // The fallback file: a regular file is read; anything else put there by the job is refused at
    // once (a FIFO nobody writes to, a link to /dev/zero, a folder), with the reason.
    void fileMustBeRegular_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("why");
        QTest::newRow("link to /dev/zero") << QStringLiteral("link") << QStringLiteral("is a symbolic link");
        QTest::newRow("link to a regular file") << QStringLiteral("link-file") << QStringLiteral("is a symbolic link");
        QTest::newRow("fifo") << QStringLiteral("fifo") << QStringLiteral("is a FIFO");
        QTest::newRow("folder") << QStringLiteral("dir") << QStringLiteral("is a folder");
        QTest::newRow("regular") << QStringLiteral("file") << QString();
    }
    void fileMustBeRegular()
    {
        QFETCH(QString, kind);
        QFETCH(QString, why);
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("probe.jsonl"));
        const QByteArray p = QFile::encodeName(path);
        const QByteArray target = QFile::encodeName(dir.filePath(QStringLiteral("real.jsonl")));
        QFile real(QString::fromUtf8(target));
        QVERIFY(real.open(QIODevice::WriteOnly));
        real.write("{\"event\":\"hello\"}\n");
        real.close();
        if (kind == QLatin1String("link"))
            QCOMPARE(symlink("/dev/zero", p.constData()), 0);
        else if (kind == QLatin1String("link-file"))
            QCOMPARE(symlink(target.constData(), p.constData()), 0);
        else if (kind == QLatin1String("fifo"))
            QCOMPARE(mkfifo(p.constData(), 0600), 0);
        else if (kind == QLatin1String("dir"))
            QVERIFY(QDir().mkdir(path));
        else
            QVERIFY(QFile::copy(QString::fromUtf8(target), path));
        ProbeChannel channel(path);
        channel.closeJobEnd();
        Collected c;
        QElapsedTimer t;
        t.start();
        channel.finish(int64_t(64) << 20, [&](const QByteArray &l) { c.lines << l; }, [&] { ++c.tooLong; });
        QVERIFY2(t.elapsed() < 2000, "reading the probe file waited");
        if (why.isEmpty()) {
            QVERIFY(channel.fileRefused().empty());
            QCOMPARE(c.lines, (QList<QByteArray> {"{\"event\":\"hello\"}"}));
        } else {
            QVERIFY2(QString::fromStdString(channel.fileRefused()).contains(why), channel.fileRefused().c_str());
            QVERIFY(QString::fromStdString(channel.fileRefused()).contains(path));
            QVERIFY(c.lines.isEmpty());
            QCOMPARE(c.tooLong, 0);
        }
    }

    // A regular file bigger than the budget: read a budget at a time, the rest said to be unread.
    void hugeFileIsBounded()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("probe.jsonl"));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QVERIFY(f.resize(qint64(64) << 30)); // a sparse 64 GiB of zeros: one endless line
        f.close();
        ProbeChannel channel(path);
        channel.closeJobEnd();
        Collected c;
        QElapsedTimer t;
        t.start();
        channel.finish(int64_t(8) << 20, [&](const QByteArray &l) { c.lines << l; }, [&] { ++c.tooLong; });
        QVERIFY(t.elapsed() < 5000);
        QVERIFY(channel.leftUnread());
        QCOMPARE(c.tooLong, 1);
        QVERIFY(c.lines.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestProbeEvents)
#include "tst_probe_events.moc"
