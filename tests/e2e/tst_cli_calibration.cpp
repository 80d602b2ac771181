// Calibration as a user meets it: a pilot that fits stores its residual, `estimate` applies it
// (raw and calibrated figures side by side), --no-calibration ignores it, and a catalog card takes
// only residuals measured on a device the catalog recognises as that card.
#include "e2e/CliProcess.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryStore.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

namespace {

QJsonObject lastJsonLine(const QByteArray &out)
{
    const QList<QByteArray> lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last()).object();
}

QJsonObject onlyEstimate(const QStringList &args)
{
    const auto r = pbtest::runCliBytes(QStringList {QStringLiteral("estimate"), QStringLiteral("--json")} + args);
    if (r.exitCode != 0) {
        qWarning("estimate failed: %s", r.err.constData());
        return {};
    }
    const QJsonArray entries = QJsonDocument::fromJson(r.out).object().value(QStringLiteral("estimates")).toArray();
    return entries.size() == 1 ? entries.at(0).toObject() : QJsonObject {};
}

} // namespace

class TestCliCalibration final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void pilotResidualCalibratesTheLocalEstimate()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.sqlite"));
        const auto pilot = pbtest::runCliBytes({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"),
                                                QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--jsonl"),
                                                QStringLiteral("--db"), db});
        QVERIFY2(pilot.exitCode == 0, pilot.err.constData());
        const QJsonObject summary = lastJsonLine(pilot.out);
        QCOMPARE(summary.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        const double measured = summary.value(QStringLiteral("peak_allocated_bytes")).toDouble();
        QVERIFY(measured > 0);

        const QStringList estimateArgs {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--device"), QStringLiteral("cpu"),
                                        QStringLiteral("--db"), db};
        const QJsonObject e = onlyEstimate(estimateArgs);
        QCOMPARE(e.value(QStringLiteral("calibration_samples")).toInt(), 1);
        const double predicted = e.value(QStringLiteral("peak_allocated_bytes")).toDouble();
        QVERIFY(predicted > 0);
        QVERIFY2(std::abs(e.value(QStringLiteral("calibration_ratio")).toDouble() - measured / predicted) < 1e-6,
                 qPrintable(QStringLiteral("ratio %1, measured %2 / predicted %3").arg(e.value(QStringLiteral("calibration_ratio")).toDouble()).arg(measured).arg(predicted)));
        // Raw and calibrated side by side: one residual's ratio takes the raw peak to the measured
        // one; on CPU there is no workspace or context to add.
        QCOMPARE(e.value(QStringLiteral("calibrated_peak_allocated_bytes")).toDouble(), measured);
        QCOMPARE(e.value(QStringLiteral("calibrated_total_bytes")).toDouble(), e.value(QStringLiteral("calibrated_peak_allocated_bytes")).toDouble());
        QVERIFY(e.contains(QStringLiteral("total_bytes")));

        // The stored residual is that pilot's, against this very estimate.
        {
            pb::HistoryStore store(db);
            const auto stored = pb::calibrationResiduals(store);
            QCOMPARE(stored.size(), size_t(1));
            QCOMPARE(stored[0].runId, std::optional<int64_t>(int64_t(summary.value(QStringLiteral("run_id")).toDouble())));
            QCOMPARE(stored[0].backend, QStringLiteral("cpu"));
            QCOMPARE(double(stored[0].predictedPeakBytes), predicted);
            QCOMPARE(double(stored[0].measuredPeakBytes), measured);
            QCOMPARE(stored[0].frameworkBytes, std::optional<int64_t>(0));
        }

        const QJsonObject plain = onlyEstimate(estimateArgs + QStringList {QStringLiteral("--no-calibration")});
        QCOMPARE(plain.value(QStringLiteral("calibration_samples")).toInt(), 0);
        QCOMPARE(plain.value(QStringLiteral("calibration_ratio")).toDouble(), 1.0);
        QVERIFY(!plain.contains(QStringLiteral("calibrated_total_bytes")));
        QCOMPARE(plain.value(QStringLiteral("peak_allocated_bytes")).toDouble(), predicted);

        const auto text = pbtest::runCli(QStringList {QStringLiteral("estimate")} + estimateArgs);
        QCOMPARE(text.code, 0);
        QVERIFY2(text.out.contains(QStringLiteral("calibrated x")) && text.out.contains(QStringLiteral("from 1 pilot(s)")), qPrintable(text.out));
    }

    void cardTakesResidualsOfItsOwnDevice()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.sqlite"));
        {
            pb::HistoryStore store(db);
            // What a pilot on an H200 stores (the device reports "NVIDIA H200"), and one from an A100.
            pb::addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cuda"), QStringLiteral("2.11.0"), QStringLiteral("NVIDIA H200"),
                                               "h", 1000, 1100, 700LL * 1024 * 1024});
            pb::addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cuda"), QStringLiteral("2.11.0"), QStringLiteral("NVIDIA A100-SXM4-80GB"),
                                               "h", 1000, 3000, 1});
        }
        const QStringList base {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db, QStringLiteral("--card")};
        const QJsonObject h200 = onlyEstimate(base + QStringList {QStringLiteral("h200-141gb")});
        QCOMPARE(h200.value(QStringLiteral("calibration_samples")).toInt(), 1);
        QCOMPARE(h200.value(QStringLiteral("calibration_ratio")).toDouble(), 1.1);
        QCOMPARE(h200.value(QStringLiteral("breakdown")).toObject().value(QStringLiteral("framework")).toDouble(), 700.0 * 1024 * 1024);
        QVERIFY(h200.contains(QStringLiteral("calibrated_total_bytes")));

        const QJsonObject h100 = onlyEstimate(base + QStringList {QStringLiteral("h100-sxm-80gb")});
        QCOMPARE(h100.value(QStringLiteral("calibration_samples")).toInt(), 0);
        QCOMPARE(h100.value(QStringLiteral("breakdown")).toObject().value(QStringLiteral("framework")).toDouble(), 760.0 * 1024 * 1024);
    }

    void missingDatabaseMeansNoCalibrationAndNoFile()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("absent.sqlite"));
        const QJsonObject e = onlyEstimate({QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--device"), QStringLiteral("cpu"),
                                            QStringLiteral("--db"), db});
        QCOMPARE(e.value(QStringLiteral("calibration_samples")).toInt(), 0);
        QVERIFY(!QFileInfo::exists(db));
    }
};

QTEST_GUILESS_MAIN(TestCliCalibration)
#include "tst_cli_calibration.moc"
