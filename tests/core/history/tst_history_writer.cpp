// The writer thread: everything a pilot records comes back exactly; a full disk stops it cleanly; a
// reader on another connection sees a growing, consistent run; a process killed mid-run leaves a
// database that opens and holds everything committed.
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryDatabase.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <cstdio>
#include <thread>

using namespace pb;

class TestHistoryWriter : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void recordsComeBackExactly()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter writer(path);
        RunStart start = test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 512);
        start.tags = QStringList {QStringLiteral("nightly")};
        start.startedAt = QDateTime(QDate(2025, 1, 2), QTime(3, 4, 5, 678), Qt::UTC);
        const int64_t id = writer.beginRun(start);
        QVERIFY(id > 0);
        const int64_t steps = 10000; // more than two chunks
        for (int64_t step = 1; step <= steps; ++step)
            QVERIFY(writer.appendSample(id, test::sampleAt(step)));
        QVERIFY(writer.appendPhase(id, PhaseMark {Phase::Warmup, 1, 12.5, 80.25, 1500003, 3000000001}));
        QVERIFY(writer.appendValidation(id, ValidationResult {100, 2.5, 8, 33.75}));
        QVERIFY(writer.appendCheckpoint(id, CheckpointWrite {200, "/data/ckpt-200.pt", 123456789, 456.5}));
        PilotSummary summary;
        summary.verdict = Verdict::DoesNotFit;
        summary.message = "out of memory in backward";
        summary.peakAllocatedBytes = 79000000000;
        QVERIFY(writer.finishRun(id, summary));
        QVERIFY(writer.flush());

        HistoryStore store(path);
        const RunRecord run = store.run(id);
        QCOMPARE(run.status, QStringLiteral("done"));
        QCOMPARE(run.verdict, QStringLiteral("does-not-fit"));
        QCOMPARE(run.startedAt, start.startedAt);
        QVERIFY(run.finishedAt.isValid());
        QCOMPARE(run.configHash, std::string("hash-tiny-512"));
        QCOMPARE(run.config, start.configJson);
        QCOMPARE(run.environment, start.environmentJson);
        QCOMPARE(run.tags, start.tags);
        QCOMPARE(run.summary[QStringLiteral("message")].toString(), QStringLiteral("out of memory in backward"));
        QCOMPARE(run.summary[QStringLiteral("peak_allocated_bytes")].toInteger(), 79000000000LL);
        QCOMPARE(run.sampleCount, steps);
        const auto samples = store.sampleList(id);
        QCOMPARE(samples.size(), size_t(steps));
        for (int64_t step = 1; step <= steps; ++step)
            QVERIFY2(test::sameSample(samples[size_t(step - 1)], test::sampleAt(step)), qPrintable(QString::number(step)));
        const SampleSeries series = store.samples(id);
        QCOMPARE(series.size(), size_t(steps));
        QCOMPARE(series.deviceUsedBytes[9], 3000000010.0);
        QCOMPARE(series.stepTimeMs[6], 40.0); // step 7: 7 % 7 == 0
        QCOMPARE(store.phases(id).at(0).peakDeviceUsedBytes, int64_t(3000000001));
        QCOMPARE(store.validations(id).at(0).durationMs, 33.75);
        QCOMPARE(store.checkpoints(id).at(0).path, std::string("/data/ckpt-200.pt"));
    }

    void unknownKindIsRefused()
    {
        QTemporaryDir dir;
        HistoryWriter writer(dir.filePath(QStringLiteral("h.sqlite")));
        RunStart start;
        start.kind = QStringLiteral("benchmark");
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, writer.beginRun(start));
    }

    // A slow pilot writes one tiny chunk per batch; finishing packs them so loads stay fast.
    void slowRunIsCompactedOnFinish()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter writer(path);
        const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("m"), QStringLiteral("cpu"), 64));
        for (int64_t step = 1; step <= 40; ++step) {
            writer.appendSample(id, test::sampleAt(step));
            QVERIFY(writer.flush());
        }
        HistoryStore store(path);
        QCOMPARE(store.connection().scalar(QStringLiteral("SELECT count(*) FROM sample_chunks WHERE run_id = ?"), {qlonglong(id)}).toInt(), 40);
        writer.finishRun(id, PilotSummary {});
        QVERIFY(writer.flush());
        QCOMPARE(store.connection().scalar(QStringLiteral("SELECT count(*) FROM sample_chunks WHERE run_id = ?"), {qlonglong(id)}).toInt(), 1);
        const auto samples = store.sampleList(id);
        QCOMPARE(samples.size(), size_t(40));
        for (int64_t step = 1; step <= 40; ++step)
            QVERIFY(test::sameSample(samples[size_t(step - 1)], test::sampleAt(step)));
    }

    void fullDiskStopsTheWriter()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter::Options options;
        options.maxPageCount = 40; // 640 KiB with 16 KiB pages: a few thousand samples
        HistoryWriter writer(path, options);
        std::string reported;
        int calls = 0;
        writer.setErrorCallback([&](const std::string &message) { reported = message; ++calls; });
        const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("m"), QStringLiteral("cpu"), 64));
        QVERIFY(writer.flush());
        int64_t step = 1;
        for (; step <= 200000 && !writer.failed(); ++step) {
            writer.appendSample(id, test::sampleAt(step));
            if (step % 1000 == 0)
                writer.flush();
        }
        QVERIFY(!writer.flush());
        QVERIFY(writer.failed());
        QCOMPARE(calls, 1);
        QCOMPARE(writer.lastError(), reported);
        QVERIFY2(QString::fromStdString(reported).contains(QStringLiteral("is full")), reported.c_str());
        QVERIFY2(QString::fromStdString(reported).contains(path), reported.c_str());
        QVERIFY(!writer.appendSample(id, test::sampleAt(step)));
        QVERIFY(!writer.finishRun(id, PilotSummary {}));
        QVERIFY_THROWS_EXCEPTION(PilotBenchError, writer.beginRun(test::pilotStart(QStringLiteral("m"), QStringLiteral("cpu"), 64)));

        HistoryStore store(path); // still opens (quick_check passes) and holds the committed batches
        const int64_t kept = store.sampleCount(id);
        QVERIFY(kept > 0 && kept < step);
        QCOMPARE(kept % 1000, int64_t(0)); // whole flushed batches only
        // finishRun on the failed writer closed the run on a fresh connection (this one has no page
        // limit): failed, saying why and how much was kept, never left running.
        const RunRecord run = store.run(id);
        QCOMPARE(run.status, QStringLiteral("done"));
        QCOMPARE(run.verdict, QStringLiteral("failed"));
        QVERIFY2(run.summary.value(QStringLiteral("message")).toString().startsWith(QStringLiteral("not fully recorded (")), qPrintable(run.summary.value(QStringLiteral("message")).toString()));
        QCOMPARE(run.summary.value(QStringLiteral("recorded_steps")).toInteger(), kept);
    }

    void readerSeesGrowingRunWhileWriting()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter::Options options;
        options.batchIntervalMs = 20;
        HistoryWriter writer(path, options);
        const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("m"), QStringLiteral("cpu"), 64));
        std::atomic<bool> writing {true};
        std::vector<int64_t> counts;
        std::string readerError;
        std::thread reader([&] {
            try {
                HistoryStore store(path); // its own connection, on its own thread
                while (writing) {
                    counts.push_back(store.sampleCount(id));
                    const SampleSeries s = store.samples(id);
                    if (s.size() < size_t(counts.back()) || (s.size() > 0 && s.step.back() != double(s.size())))
                        throw std::runtime_error("inconsistent read");
                    store.listRuns();
                }
                counts.push_back(store.sampleCount(id));
            } catch (const std::exception &e) {
                readerError = e.what();
            }
        });
        const int64_t total = 300000;
        for (int64_t step = 1; step <= total; ++step) {
            writer.appendSample(id, test::sampleAt(step));
            if (step % 20000 == 0)
                QThread::msleep(15);
        }
        QVERIFY(writer.flush());
        writing = false;
        reader.join();
        QVERIFY2(readerError.empty(), readerError.c_str());
        QVERIFY(counts.size() >= 3);
        for (size_t i = 1; i < counts.size(); ++i)
            QVERIFY(counts[i] >= counts[i - 1]);
        QCOMPARE(counts.back(), total);
        QVERIFY(counts.front() < total);
    }

    void killedWriterLeavesCommittedData()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        QProcess child;
        child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("--writer-loop"), path});
        QVERIFY(child.waitForStarted());
        int64_t runId = 0;
        int64_t committed = 0;
        QByteArray pending;
        while (committed < 30000) {
            QVERIFY2(child.waitForReadyRead(20000), "the writer child printed nothing");
            pending += child.readAllStandardOutput();
            qsizetype nl;
            while ((nl = pending.indexOf('\n')) >= 0) {
                const QList<QByteArray> words = pending.left(nl).split(' ');
                pending.remove(0, nl + 1);
                if (words.size() == 2 && words[0] == "run")
                    runId = words[1].toLongLong();
                if (words.size() == 2 && words[0] == "committed")
                    committed = words[1].toLongLong();
            }
        }
        const qint64 childPid = child.processId();
        child.kill(); // SIGKILL: no destructor, no checkpoint, WAL left behind
        QVERIFY(child.waitForFinished());
        QCOMPARE(child.exitStatus(), QProcess::CrashExit);
        QVERIFY(QFileInfo::exists(path + QStringLiteral("-wal")));

        HistoryStore store(path);
        const RunRecord run = store.run(runId);
        // Its process is gone, so opening the history finds it interrupted, with the samples it
        // committed kept.
        QCOMPARE(run.status, QStringLiteral("interrupted"));
        QCOMPARE(run.verdict, QStringLiteral("interrupted"));
        QVERIFY(run.summary.value(QStringLiteral("message")).toString().contains(QStringLiteral("process %1 ").arg(childPid)));
        QVERIFY(run.sampleCount >= committed);
        const auto samples = store.sampleList(runId);
        for (size_t i = 0; i < samples.size(); ++i)
            QVERIFY(test::sameSample(samples[i], test::sampleAt(int64_t(i) + 1)));
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA integrity_check")).toString(), QStringLiteral("ok"));
    }
};

// The child side of killedWriterLeavesCommittedData: writes forever, reporting what is committed.
static int writerLoop(const QString &path)
{
    HistoryWriter writer(path);
    const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("killed"), QStringLiteral("cpu"), 64));
    std::printf("run %lld\n", static_cast<long long>(id));
    std::fflush(stdout);
    for (int64_t step = 1;; ++step) {
        writer.appendSample(id, test::sampleAt(step));
        if (step % 5000 == 0 && writer.flush()) {
            std::printf("committed %lld\n", static_cast<long long>(step));
            std::fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    if (argc == 3 && qstrcmp(argv[1], "--writer-loop") == 0)
        return writerLoop(QString::fromLocal8Bit(argv[2]));
    TestHistoryWriter test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_history_writer.moc"
