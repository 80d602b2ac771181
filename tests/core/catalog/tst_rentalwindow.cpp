// The rental window's non-training hours from measured pilot phases, worked by hand. Checkpoints
// come as a measured write rate times the planned job's checkpoint size.
#include "catalog/RentalWindow.h"
#include "util/Errors.h"

#include <QtTest>

class TestRentalWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void scaledToTheJob()
    {
        pb::PilotPhaseTimes pilot;
        pilot.setupMs = 90000;             // 1.5 min
        pilot.validationPassMs = 30000;    // 30 s per pass on the pilot card
        pilot.checkpointWriteBytesPerSecond = 0.8e9; // the pilot wrote at 0.8 GB/s
        pb::JobSchedule job;
        job.jobSteps = 10500;
        job.validationEverySteps = 1000;   // floor(10500 / 1000) = 10 passes
        job.checkpointEverySteps = 2000;   // floor(10500 / 2000) = 5 writes
        job.validationTimeScale = 0.5;     // a card twice as fast: 15 s per pass
        job.uploadGBps = 0.5;              // 16e9 / 0.5e9 = 32 s upload
        job.checkpointBytes = 16000000000; // 16 GB: 16e9 / 0.8e9 = 20 s to write
        const auto w = pb::rentalWindow(pilot, job);
        QCOMPARE(w.validationPasses, qint64(10));
        QCOMPARE(w.checkpointWrites, qint64(5));
        QVERIFY(qAbs(w.checkpointWriteMs - 20000.0) < 1e-6);
        QVERIFY(qAbs(w.checkpointUploadMs - 32000.0) < 1e-6);
        QVERIFY(qAbs(w.window.startupHours - 90.0 / 3600.0) < 1e-12);          // 0.025 h
        QVERIFY(qAbs(w.window.validationHours - 150.0 / 3600.0) < 1e-12);      // 10 x 15 s = 150 s
        QVERIFY(qAbs(w.window.checkpointHours - 260.0 / 3600.0) < 1e-12);      // 5 x (20 + 32) s = 260 s
        QVERIFY(qAbs(w.window.exportHours - 52.0 / 3600.0) < 1e-12);           // one more: 52 s
        QCOMPARE(w.assumptions.size(), size_t(4));
        const QString write = QString::fromStdString(w.assumptions[2]);
        QVERIFY2(write.contains(QStringLiteral("20.0 s to write at the pilot's measured 0.80 GB/s")), qPrintable(write));
        QVERIFY2(write.contains(QStringLiteral("one host")), qPrintable(write));
        QVERIFY(QString::fromStdString(w.assumptions[3]).contains(QStringLiteral("0.50 GB/s")));
    }

    // The same measured rate on the pilot's model and on a planned model 500,000 times larger:
    // the time per checkpoint follows the planned bytes, not what the pilot wrote.
    void checkpointHoursFollowThePlannedBytes_data()
    {
        QTest::addColumn<qint64>("bytes");
        QTest::addColumn<double>("secondsPerCheckpoint"); // bytes / 2 GB/s write + bytes / 1 GB/s upload
        QTest::newRow("preset:tiny, 1.5 MB") << qint64(1502976) << 0.002254464;   // 0.000751488 + 0.001502976
        QTest::newRow("16 GB") << qint64(16000000000) << 24.0;                     // 8 + 16
        QTest::newRow("8B full AdamW fp32 masters, 96 GB") << qint64(96000000000) << 144.0; // 48 + 96
        QTest::newRow("70B full AdamW, 840 GB") << qint64(840000000000) << 1260.0;  // 420 + 840
    }
    void checkpointHoursFollowThePlannedBytes()
    {
        QFETCH(qint64, bytes);
        QFETCH(double, secondsPerCheckpoint);
        pb::PilotPhaseTimes pilot;
        pilot.checkpointWriteBytesPerSecond = 2e9;
        pb::JobSchedule job;
        job.jobSteps = 10000;
        job.checkpointEverySteps = 1000;   // 10 periodic writes and the export
        job.uploadGBps = 1.0;
        job.checkpointBytes = bytes;
        const auto w = pb::rentalWindow(pilot, job);
        QCOMPARE(w.checkpointWrites, qint64(10));
        QVERIFY(qAbs(w.checkpointWriteMs - static_cast<double>(bytes) / 2e9 * 1000.0) < 1e-6);
        QVERIFY(qAbs(w.window.checkpointHours - 10.0 * secondsPerCheckpoint / 3600.0) < 1e-12 * (1.0 + secondsPerCheckpoint));
        QVERIFY(qAbs(w.window.exportHours - secondsPerCheckpoint / 3600.0) < 1e-12 * (1.0 + secondsPerCheckpoint));
        // Linear: hours per byte are the same on every row.
        QVERIFY(qAbs(w.window.checkpointHours / static_cast<double>(bytes) - 10.0 * 1.5e-9 / 3600.0) < 1e-21);
    }

    void withoutAMeasuredWrite()
    {
        // No checkpoint measured in the pilot: no rate to scale, so no checkpoint time at all,
        // however large the planned checkpoint.
        pb::PilotPhaseTimes pilot;
        pilot.setupMs = 3600000;           // 1 h
        pilot.checkpointRestoreBytesPerSecond = 4e9; // a restore rate alone times no write
        pb::JobSchedule job;
        job.jobSteps = 500;
        job.checkpointEverySteps = 100;
        job.checkpointBytes = 1000000000;
        const auto w = pb::rentalWindow(pilot, job);
        QCOMPARE(w.validationPasses, qint64(0));
        QCOMPARE(w.checkpointWrites, qint64(5));
        QCOMPARE(w.window.startupHours, 1.0);
        QCOMPARE(w.window.validationHours, 0.0);
        QCOMPARE(w.window.checkpointHours, 0.0);
        QCOMPARE(w.window.exportHours, 0.0);
        QCOMPARE(w.checkpointWriteMs, 0.0);
        QCOMPARE(w.assumptions.size(), size_t(2));
        QVERIFY(QString::fromStdString(w.assumptions.back()).startsWith(QStringLiteral("no checkpoint write was measured")));
    }

    void restoreIsReportedNotBudgeted()
    {
        // The window models no resume: a measured restore and verify rate only add a line.
        pb::PilotPhaseTimes pilot;
        pilot.checkpointWriteBytesPerSecond = 1e9;
        pb::JobSchedule job;
        job.jobSteps = 100;
        job.checkpointEverySteps = 50;     // 2 writes
        job.checkpointBytes = 8000000000;  // 8 s to write, 8 s to upload at 1 GB/s
        const auto without = pb::rentalWindow(pilot, job);
        pilot.checkpointVerifyBytesPerSecond = 2e9;
        pilot.checkpointRestoreBytesPerSecond = 4e9;
        const auto with = pb::rentalWindow(pilot, job);
        QVERIFY(qAbs(with.window.checkpointHours - 32.0 / 3600.0) < 1e-12);
        QCOMPARE(with.window.checkpointHours, without.window.checkpointHours);
        QCOMPARE(with.window.exportHours, without.window.exportHours);
        QCOMPARE(with.assumptions.size(), without.assumptions.size() + 1);
        const QString restore = QString::fromStdString(with.assumptions.back());
        QVERIFY2(restore.contains(QStringLiteral("not budgeted")), qPrintable(restore));
        QVERIFY2(restore.contains(QStringLiteral("2.0 s at the restore check's measured 4.00 GB/s")), qPrintable(restore));
        QVERIFY2(restore.contains(QStringLiteral("4.0 s at 2.00 GB/s")), qPrintable(restore));
    }

    void refusals_data()
    {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("where");
        QTest::newRow("negative setup") << 0 << "pilot.setup_ms";
        QTest::newRow("negative steps") << 1 << "job.steps";
        QTest::newRow("zero upload") << 2 << "upload_gbps";
        QTest::newRow("zero scale") << 3 << "validation_time_scale";
        QTest::newRow("negative write rate") << 4 << "pilot.checkpoint_write_bytes_per_s";
        QTest::newRow("infinite restore rate") << 5 << "pilot.checkpoint_restore_bytes_per_s";
        QTest::newRow("negative checkpoint bytes") << 6 << "job.checkpoint_bytes";
    }
    void refusals()
    {
        QFETCH(int, fault);
        QFETCH(QString, where);
        pb::PilotPhaseTimes pilot;
        pb::JobSchedule job;
        job.jobSteps = 10;
        switch (fault) {
        case 0: pilot.setupMs = -1; break;
        case 1: job.jobSteps = -5; break;
        case 2: job.uploadGBps = 0; break;
        case 3: job.validationTimeScale = 0; break;
        case 4: pilot.checkpointWriteBytesPerSecond = -1; break;
        case 5: pilot.checkpointRestoreBytesPerSecond = std::numeric_limits<double>::infinity(); break;
        case 6: job.checkpointBytes = -1; break;
        }
        try {
            pb::rentalWindow(pilot, job);
            QFAIL("accepted");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), where);
        }
    }
};

QTEST_GUILESS_MAIN(TestRentalWindow)
#include "tst_rentalwindow.moc"
