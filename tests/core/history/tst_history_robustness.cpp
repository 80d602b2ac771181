// Issue 35, the history's part at the library level: a lock held by another connection is waited
// for (and a writer that gives up says so, the run then closed on a fresh connection); non-file
// databases are refused; any history, its link or its -wal/-shm/-journal file is refused as an
// output; figures a run did not report (NaN) survive export and import.
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryDatabase.h"
#include "history/HistoryExport.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QElapsedTimer>
#include <QJsonObject>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <future>
#include <limits>
#include <thread>

using namespace pb;

namespace {

// Holds BEGIN IMMEDIATE on `path` from its own thread and connection (as another process would)
// for `holdMs`; `held` is set once the lock is taken.
std::thread holdWriteLock(const QString &path, int holdMs, std::promise<void> &held)
{
    return std::thread([path, holdMs, &held] {
        history::Connection c(path, false);
        c.exec(QStringLiteral("BEGIN IMMEDIATE"));
        held.set_value();
        std::this_thread::sleep_for(std::chrono::milliseconds(holdMs));
        c.exec(QStringLiteral("COMMIT"));
    });
}

bool sameOrBothNan(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

} // namespace

class TestHistoryRobustness : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Held past the 5 s busy timeout of one attempt: the writer tries again and loses nothing.
    void writerWaitsOutAnotherConnectionsLock()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter::Options options;
        options.lockWaitMs = 30000;
        HistoryWriter writer(path, options);
        const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 64));
        std::promise<void> held;
        std::thread locker = holdWriteLock(path, 7000, held);
        held.get_future().wait();
        QElapsedTimer timer;
        timer.start();
        for (int64_t step = 1; step <= 50; ++step)
            QVERIFY(writer.appendSample(id, test::sampleAt(step)));
        PilotSummary summary;
        summary.verdict = Verdict::Fits;
        QVERIFY(writer.finishRun(id, summary));
        const bool flushed = writer.flush();
        const qint64 waitedMs = timer.elapsed();
        locker.join();
        QVERIFY2(flushed, writer.lastError().c_str());
        QVERIFY(!writer.failed());
        QVERIFY2(waitedMs >= 5000, qPrintable(QString::number(waitedMs))); // it did meet the lock, past one busy timeout
        HistoryStore store(path);
        const RunRecord run = store.run(id);
        QCOMPARE(run.status, QStringLiteral("done"));
        QCOMPARE(run.verdict, QStringLiteral("fits"));
        QCOMPARE(run.sampleCount, int64_t(50));
    }

    // With no wait allowed, the writer fails naming the lock; once the lock is gone the run is
    // closed as failed on a fresh connection, with what the history kept of it.
    void writerThatGivesUpSaysSoAndTheRunIsClosedLate()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter::Options options;
        options.lockWaitMs = 0;
        int64_t id = 0;
        {
            HistoryWriter writer(path, options);
            id = writer.beginRun(test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 64));
            for (int64_t step = 1; step <= 3; ++step)
                QVERIFY(writer.appendSample(id, test::sampleAt(step)));
            QVERIFY(writer.flush());
            std::promise<void> held;
            std::thread locker = holdWriteLock(path, 6500, held);
            held.get_future().wait();
            for (int64_t step = 4; step <= 10; ++step)
                writer.appendSample(id, test::sampleAt(step));
            QVERIFY(!writer.flush());
            locker.join();
            QVERIFY(writer.failed());
            QVERIFY2(writer.lastError().find("locked by another process") != std::string::npos, writer.lastError().c_str());
            QVERIFY(!writer.appendSample(id, test::sampleAt(11))); // nothing more is taken once it failed
        }
        const history::LateFinish late = history::finishRunLate(path, id, QStringLiteral("failed"), QJsonObject {{QStringLiteral("verdict"), QStringLiteral("failed")}});
        QVERIFY2(late.error.empty(), late.error.c_str());
        QCOMPARE(late.storedSamples, int64_t(3));
        HistoryStore store(path);
        const RunRecord run = store.run(id);
        QCOMPARE(run.status, QStringLiteral("done"));
        QCOMPARE(run.verdict, QStringLiteral("failed"));
        QCOMPARE(run.sampleCount, int64_t(3));
        QCOMPARE(run.summary.value(QStringLiteral("recorded_steps")).toInt(), 3);
    }

    void nonFileDatabasesAreRefused_data()
    {
        QTest::addColumn<QString>("path");
        QTest::newRow("in memory") << QStringLiteral(":memory:");
        QTest::newRow("memory URI") << QStringLiteral("file:h?mode=memory&cache=shared");
        QTest::newRow("file URI") << QStringLiteral("file:h.sqlite");
        QTest::newRow("empty") << QString();
        QTest::newRow("blank") << QStringLiteral("  ");
    }
    void nonFileDatabasesAreRefused()
    {
        QFETCH(QString, path);
        for (const auto access : {HistoryStore::Access::ReadWrite, HistoryStore::Access::ReadOnlyWhereNeeded}) {
            try {
                HistoryStore store(path, access);
                QFAIL("accepted");
            } catch (const InvalidInputError &e) {
                QCOMPARE(e.where(), std::string("--db"));
            }
        }
        try {
            HistoryWriter writer(path);
            QFAIL("the writer accepted it");
        } catch (const InvalidInputError &e) {
            QCOMPARE(e.where(), std::string("--db"));
        }
    }

    void historiesAreRefusedAsOutputs_data()
    {
        QTest::addColumn<QString>("output"); // relative to the folder that holds h.sqlite
        QTest::addColumn<bool>("refused");
        QTest::newRow("the history") << QStringLiteral("h.sqlite") << true;
        QTest::newRow("a link to it") << QStringLiteral("link.json") << true;
        QTest::newRow("its -wal") << QStringLiteral("h.sqlite-wal") << true;
        QTest::newRow("its -shm") << QStringLiteral("h.sqlite-shm") << true;
        QTest::newRow("its -journal, not there") << QStringLiteral("h.sqlite-journal") << true;
        QTest::newRow("a link to its -wal") << QStringLiteral("walLink.json") << true;
        QTest::newRow("another SQLite file") << QStringLiteral("other.sqlite") << false;
        QTest::newRow("another SQLite file's -wal") << QStringLiteral("other.sqlite-wal") << false;
        QTest::newRow("a new file") << QStringLiteral("new.json") << false;
    }
    void historiesAreRefusedAsOutputs()
    {
        QFETCH(QString, output);
        QFETCH(bool, refused);
        QTemporaryDir dir;
        const QString history = dir.filePath(QStringLiteral("h.sqlite"));
        {
            HistoryWriter writer(history);
            writer.beginRun(test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 64));
        }
        {
            history::Connection other(dir.filePath(QStringLiteral("other.sqlite")), false);
            other.exec(QStringLiteral("CREATE TABLE t (x)"));
        }
        QVERIFY(QFile::link(history, dir.filePath(QStringLiteral("link.json"))));
        QVERIFY(QFile::link(history + QStringLiteral("-wal"), dir.filePath(QStringLiteral("walLink.json"))));
        const QByteArray before = test::fileSha256(history);
        const QString path = dir.filePath(output);
        bool threw = false;
        try {
            checkOutputPath(path, {}, "--out");
        } catch (const InvalidInputError &e) {
            threw = true;
            QCOMPARE(e.where(), std::string("--out"));
            QVERIFY2(e.message().find("PilotBench history") != std::string::npos, e.what());
        }
        QCOMPARE(threw, refused);
        // The last line of defence, whatever the command checked before.
        threw = false;
        try {
            writeFileAtomically(path, QByteArrayLiteral("{}\n"));
        } catch (const InvalidInputError &) {
            threw = true;
        }
        QCOMPARE(threw, refused);
        QCOMPARE(test::fileSha256(history), before);
    }

    // A watched job's probe that reports no loss, learning rate or grad norm (NaN), and a validation
    // without a loss: exported as null, imported back as NaN, every other figure exact.
    void unreportedFiguresSurviveExportAndImport()
    {
        QTemporaryDir dir;
        const QString from = dir.filePath(QStringLiteral("from.sqlite"));
        const double nan = std::numeric_limits<double>::quiet_NaN();
        std::vector<StepSample> written;
        int64_t id = 0;
        {
            HistoryWriter writer(from);
            RunStart start = test::pilotStart(QStringLiteral("command"), QStringLiteral("cpu"), 64);
            start.kind = QStringLiteral("watch");
            start.configJson = QJsonObject {{QStringLiteral("command"), QStringLiteral("python3 train.py")}};
            id = writer.beginRun(start);
            for (int64_t step = 1; step <= 6; ++step) {
                StepSample s = test::sampleAt(step);
                s.gradNorm = nan;
                if (step % 2 == 0)
                    s.learningRate = nan;
                if (step == 3)
                    s.loss = nan;
                written.push_back(s);
                QVERIFY(writer.appendSample(id, s));
            }
            QVERIFY(writer.appendValidation(id, ValidationResult {6, nan, 2, 12.5}));
            PilotSummary summary;
            summary.verdict = Verdict::Fits;
            QVERIFY(writer.finishRun(id, summary));
            QVERIFY(writer.flush());
        }
        const QString file = dir.filePath(QStringLiteral("export.json"));
        {
            HistoryStore store(from);
            writeRunsJson(store, {id}, file);
        }
        HistoryStore into(dir.filePath(QStringLiteral("into.sqlite")));
        const ImportResult result = importRunsJson(into, file);
        QCOMPARE(result.importedRunIds.size(), size_t(1));
        const auto read = into.sampleList(result.importedRunIds.front());
        QCOMPARE(read.size(), written.size());
        for (size_t i = 0; i < read.size(); ++i) {
            QVERIFY(sameOrBothNan(read[i].gradNorm, written[i].gradNorm));
            QVERIFY(sameOrBothNan(read[i].learningRate, written[i].learningRate));
            QVERIFY(sameOrBothNan(read[i].loss, written[i].loss));
            QCOMPARE(read[i].step, written[i].step);
            QCOMPARE(read[i].stepTimeMs, written[i].stepTimeMs);
            QCOMPARE(read[i].tokens, written[i].tokens);
        }
        const auto validations = into.validations(result.importedRunIds.front());
        QCOMPARE(validations.size(), size_t(1));
        QVERIFY(std::isnan(validations[0].loss));
        QCOMPARE(validations[0].durationMs, 12.5);
    }
};

QTEST_GUILESS_MAIN(TestHistoryRobustness)
#include "tst_history_robustness.moc"
