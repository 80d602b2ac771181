// Calibration residuals round-trip, with and without a run and a framework figure.
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

class TestHistoryEvidence : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void evidenceRoundTrips()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        int64_t baseline = 0;
        {
            HistoryWriter writer(path);
            baseline = writer.beginRun(test::pilotStart(QStringLiteral("llama-8b"), QStringLiteral("cuda:0"), 2048));
        }
        HistoryStore store(path);

        addCalibrationResidual(store, {0, baseline, {}, QStringLiteral("cuda"), QStringLiteral("2.3.0"), QStringLiteral("H100"), "abc", 70000000000LL,
                                       72500000000LL, 796917760LL});
        addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cpu"), QStringLiteral("2.3.0"), QStringLiteral("cpu"), "abc", 100, 90, {}});
        const auto cuda = calibrationResiduals(store, QStringLiteral("cuda"));
        QCOMPARE(cuda.size(), size_t(1));
        QCOMPARE(cuda[0].measuredPeakBytes - cuda[0].predictedPeakBytes, 2500000000LL);
        QCOMPARE(cuda[0].runId, std::optional<int64_t>(baseline));
        QCOMPARE(cuda[0].frameworkBytes, std::optional<int64_t>(796917760LL));
        const auto all = calibrationResiduals(store);
        QCOMPARE(all.size(), size_t(2));
        QVERIFY(!all[1].frameworkBytes); // NULL stays unknown, not 0
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, addCalibrationResidual(store, {0, 999, {}, {}, {}, {}, "", 0, 0, {}}));

    }

    // The pilot's path: the writer thread stores the residual after the run it belongs to.
    void writerStoresCalibrationWithFrameworkBytes()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("h.sqlite"));
        int64_t runId = 0;
        {
            HistoryWriter writer(path);
            runId = writer.beginRun(test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cuda:0"), 128));
            CalibrationRecord r;
            r.runId = runId;
            r.backend = QStringLiteral("cuda");
            r.torchVersion = QStringLiteral("2.11.0");
            r.device = QStringLiteral("NVIDIA H200");
            r.configHash = "cafe";
            r.predictedPeakBytes = 1000000;
            r.measuredPeakBytes = 1100000;
            r.frameworkBytes = 760LL * 1024 * 1024;
            QVERIFY(writer.appendCalibration(r));
            CalibrationRecord orphan = r;
            orphan.runId = runId + 1; // not in the file: dropped, like the writer's other records
            QVERIFY(writer.appendCalibration(orphan));
            QVERIFY(writer.flush());
        }
        HistoryStore store(path);
        const auto stored = calibrationResiduals(store, QStringLiteral("cuda"), QStringLiteral("NVIDIA H200"));
        QCOMPARE(stored.size(), size_t(1));
        QCOMPARE(stored[0].runId, std::optional<int64_t>(runId));
        QCOMPARE(stored[0].torchVersion, QStringLiteral("2.11.0"));
        QCOMPARE(stored[0].configHash, std::string("cafe"));
        QCOMPARE(stored[0].predictedPeakBytes, int64_t(1000000));
        QCOMPARE(stored[0].measuredPeakBytes, int64_t(1100000));
        QCOMPARE(stored[0].frameworkBytes, std::optional<int64_t>(760LL * 1024 * 1024));
        QVERIFY(stored[0].createdAt.isValid());
    }
};

QTEST_GUILESS_MAIN(TestHistoryEvidence)
#include "tst_history_evidence.moc"
