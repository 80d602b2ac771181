// The rental window's non-training hours from measured pilot phases, worked by hand.
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
        pilot.checkpointWriteMs = 20000;   // 20 s
        pilot.checkpointBytes = 16000000000; // 16 GB
        pb::JobSchedule job;
        job.jobSteps = 10500;
        job.validationEverySteps = 1000;   // floor(10500 / 1000) = 10 passes
        job.checkpointEverySteps = 2000;   // floor(10500 / 2000) = 5 writes
        job.validationTimeScale = 0.5;     // a card twice as fast: 15 s per pass
        job.uploadGBps = 0.5;              // 16e9 / 0.5e9 = 32 s upload
        const auto w = pb::rentalWindow(pilot, job);
        QCOMPARE(w.validationPasses, qint64(10));
        QCOMPARE(w.checkpointWrites, qint64(5));
        QVERIFY(qAbs(w.window.startupHours - 90.0 / 3600.0) < 1e-12);          // 0.025 h
        QVERIFY(qAbs(w.window.validationHours - 150.0 / 3600.0) < 1e-12);      // 10 x 15 s = 150 s
        QVERIFY(qAbs(w.window.checkpointHours - 260.0 / 3600.0) < 1e-12);      // 5 x (20 + 32) s = 260 s
        QVERIFY(qAbs(w.window.exportHours - 52.0 / 3600.0) < 1e-12);           // one more: 52 s
        QCOMPARE(w.assumptions.size(), size_t(3));
        QVERIFY(QString::fromStdString(w.assumptions[2]).contains(QStringLiteral("0.50 GB/s")));
    }

    void withoutValidationOrPeriodicCheckpoints()
    {
        pb::PilotPhaseTimes pilot;
        pilot.setupMs = 3600000;           // 1 h
        pilot.checkpointWriteMs = 0;
        pilot.checkpointBytes = 1000000000; // 1 GB at the default 1 GB/s: 1 s export
        pb::JobSchedule job;
        job.jobSteps = 500;
        const auto w = pb::rentalWindow(pilot, job);
        QCOMPARE(w.validationPasses, qint64(0));
        QCOMPARE(w.checkpointWrites, qint64(0));
        QCOMPARE(w.window.startupHours, 1.0);
        QCOMPARE(w.window.validationHours, 0.0);
        QCOMPARE(w.window.checkpointHours, 0.0);
        QVERIFY(qAbs(w.window.exportHours - 1.0 / 3600.0) < 1e-12);
    }

    void refusals_data()
    {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("where");
        QTest::newRow("negative setup") << 0 << "pilot.setup_ms";
        QTest::newRow("negative steps") << 1 << "job.steps";
        QTest::newRow("zero upload") << 2 << "upload_gbps";
        QTest::newRow("zero scale") << 3 << "validation_time_scale";
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
