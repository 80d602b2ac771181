// A tiny CPU pilot driven from the GUI: samples arrive in the charts while it runs, the run lands in
// the history with every step recorded; a long pilot cancelled after its first samples ends
// cancelled, keeps what it measured, and the application keeps working.
#include "MainWindow.h"
#include "charts/RunCharts.h"
#include "config/ConfigView.h"
#include "history/HistoryStore.h"
#include "history/HistoryView.h"
#include "history/RunTableModel.h"
#include "monitor/DashboardView.h"

#include <QLineSeries>
#include <QMessageBox>
#include <QProgressBar>
#include <QSettings>
#include <QTemporaryDir>
#include <QTabBar>
#include <QtTest>

using namespace pb;
using namespace pb::ui;

// The dashboard's "start a pilot that does not fit?" question answered with `answer`, each
// question's text kept in `asked`.
static void answerOversizedPilots(DashboardView *dash, QStringList &asked, bool answer)
{
    dash->setOversizedPilotConfirmation([&asked, answer](const QString &why) {
        asked << why;
        return answer;
    });
}

class TestPilotDashboard final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_pilot_dashboard"));
        QSettings().clear();
        QVERIFY(m_dir.isValid());
    }

    void tinyPilotFillsChartsAndHistory()
    {
        const QString db = m_dir.filePath(QStringLiteral("run.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("tiny"));
        DashboardView *dash = window.dashboard();
        dash->setSteps(6, 2);
        QSignalSpy finished(dash, &DashboardView::runFinished);
        window.runPilot();
        QVERIFY(dash->isRunning());
        QCOMPARE(window.tabs()->currentWidget(), dash);
        // A live run owns the dashboard: the other mode cannot come in front of it.
        QVERIFY(!dash->findChild<QTabBar *>(QStringLiteral("dashboardModes"))->isTabEnabled(1));
        QVERIFY(dash->chartsSubject().startsWith(QStringLiteral("Charts: the pilot of tiny now running")));
        // Samples reach the chart while the pilot is still going or by its end.
        QTRY_VERIFY_WITH_TIMEOUT(dash->charts()->stepTimeSeries()->count() > 0, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 120000);
        QCOMPARE(finished.count(), 1);
        QCOMPARE(dash->lastVerdict(), QStringLiteral("fits"));
        QCOMPARE(dash->charts()->sampleCount(), size_t(8));        // 2 warm-up + 6 measured
        QCOMPARE(dash->charts()->measuredStepTimesMs().size(), size_t(6));
        QCOMPARE(dash->charts()->stepTimeSeries()->count(), 8);
        QCOMPARE(dash->charts()->allocatedSeries()->count(), 8);
        // A CPU pilot's few MiB of tensors under a process of some 200 MiB: "device used" takes its
        // own axis, so the tensors' line is not flat on the floor.
        QVERIFY(dash->charts()->deviceOnOwnAxis());
        QCOMPARE(dash->findChild<QProgressBar *>(QStringLiteral("pilotProgress"))->value(), 8);

        const int64_t runId = dash->lastRunId();
        QVERIFY(runId > 0);
        // The charts say whose they are; the other mode shows none of them, and coming back
        // reads this run's samples back from the history.
        QCOMPARE(dash->chartsSubject(), QStringLiteral("Charts: run %1, pilot of tiny, fits").arg(runId));
        dash->setMode(DashboardView::Mode::Command);
        QCOMPARE(dash->charts()->sampleCount(), size_t(0));
        QVERIFY(dash->chartsSubject().startsWith(QStringLiteral("No command watched in this window yet")));
        dash->setMode(DashboardView::Mode::Pilot);
        QCOMPARE(dash->charts()->sampleCount(), size_t(8));
        QCOMPARE(dash->chartsSubject(), QStringLiteral("Charts: run %1, pilot of tiny, fits").arg(runId));
        const RunRecord run = window.history()->store()->run(runId);
        QCOMPARE(run.kind, QStringLiteral("pilot"));
        QCOMPARE(run.verdict, QStringLiteral("fits"));
        QCOMPARE(run.model, QStringLiteral("tiny"));
        QCOMPARE(run.sampleCount, int64_t(8));
        QCOMPARE(run.summary.value(QStringLiteral("measured_steps")).toInt(), 6);
        // The history table refreshes when it is next shown.
        QCOMPARE(window.history()->model()->rowOfRun(runId), -1);
        window.show();
        window.tabs()->setCurrentWidget(window.history());
        QTRY_VERIFY(window.history()->model()->rowOfRun(runId) >= 0);
    }

    void cancelStopsTheRun()
    {
        const QString db = m_dir.filePath(QStringLiteral("cancel.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("tiny"));
        DashboardView *dash = window.dashboard();
        dash->setSteps(100000, 1);
        QVERIFY(dash->startPilot());
        QVERIFY(!dash->startPilot()); // one pilot at a time
        window.show();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        QTRY_VERIFY_WITH_TIMEOUT(dash->charts()->sampleCount() >= 2, 60000);
        QTest::keyClick(&window, Qt::Key_Escape);
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 60000);
        QCOMPARE(dash->lastVerdict(), QStringLiteral("cancelled"));
        const RunRecord run = window.history()->store()->run(dash->lastRunId());
        QCOMPARE(run.verdict, QStringLiteral("cancelled"));
        QVERIFY(run.sampleCount >= 2);
        QVERIFY(run.sampleCount < 100001);
        QCOMPARE(static_cast<size_t>(run.sampleCount), dash->charts()->sampleCount());

        // The application keeps working: a second, short pilot runs to completion.
        dash->setSteps(2, 0);
        QVERIFY(dash->startPilot());
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 60000);
        QCOMPARE(dash->lastVerdict(), QStringLiteral("fits"));
    }

    void engineRefusalIsShownNotFatal()
    {
        // A device the engine cannot use makes it throw; the dashboard shows the message and the
        // run is recorded as failed, never left "running".
        const QString db = m_dir.filePath(QStringLiteral("fail.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("tiny"));
        RunConfig config = window.configView()->config();
        config.data.kind = DataKind::TokenFile;
        config.data.path = m_dir.filePath(QStringLiteral("does-not-exist.bin")).toStdString();
        DashboardView *dash = window.dashboard();
        dash->setConfig(config, true);
        dash->setSteps(2, 0);
        QVERIFY(dash->startPilot());
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 60000);
        // The engine refuses the missing token file by throwing: shown as a message, not fatal.
        QCOMPARE(dash->lastVerdict(), QStringLiteral("error"));
        auto *box = dash->findChild<QMessageBox *>();
        QVERIFY(box);
        QVERIFY2(box->text().contains(QStringLiteral("does-not-exist.bin")), qPrintable(box->text()));
        const auto runs = window.history()->store()->listRuns();
        QCOMPARE(runs.size(), size_t(1));
        QCOMPARE(runs.front().status, QStringLiteral("done"));
        QCOMPARE(runs.front().verdict, QStringLiteral("failed"));
    }

    // A pilot whose estimated peak exceeds what the CPU has available (llama-3.1-70b: about a
    // terabyte) asks first and says why; declined, nothing starts and nothing is recorded. A tiny
    // pilot is not asked about.
    void oversizedPilotAsksFirst()
    {
        const QString db = m_dir.filePath(QStringLiteral("oversized.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("llama-3.1-70b"));
        DashboardView *dash = window.dashboard();
        dash->setSteps(1, 0);
        QStringList asked;
        answerOversizedPilots(dash, asked, false);
        QVERIFY(!dash->startPilot());
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked.first().contains(QStringLiteral("estimated peak")) && asked.first().contains(QStringLiteral("available")), qPrintable(asked.first()));
        QVERIFY(!dash->isRunning());
        QVERIFY(window.history()->store()->listRuns().empty());

        window.configView()->loadPreset(QStringLiteral("tiny"));
        dash->setSteps(1, 0);
        QVERIFY(dash->startPilot());
        QCOMPARE(asked.size(), 1);
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 60000);
        QCOMPARE(dash->lastVerdict(), QStringLiteral("fits"));
    }

    // Started anyway on a host too small for it (2 MB stood in by PILOTBENCH_TEST_MEM_AVAILABLE): the
    // question says how it will end, and it ends so, as does-not-fit and recorded, not by paging.
    void acceptedOversizedPilotEndsAsDoesNotFit()
    {
        const QString db = m_dir.filePath(QStringLiteral("accepted.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("tiny"));
        DashboardView *dash = window.dashboard();
        dash->setSteps(2, 0);
        QStringList asked;
        answerOversizedPilots(dash, asked, true);
        qputenv("PILOTBENCH_TEST_MEM_AVAILABLE", "2000000");
        const bool started = dash->startPilot();
        qunsetenv("PILOTBENCH_TEST_MEM_AVAILABLE");
        QVERIFY(started);
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked.first().contains(QStringLiteral("stops as does-not-fit once its tensors reach 75%")), qPrintable(asked.first()));
        QTRY_VERIFY_WITH_TIMEOUT(!dash->isRunning(), 60000);
        QCOMPARE(dash->lastVerdict(), QStringLiteral("does-not-fit"));
        QCOMPARE(window.history()->store()->listRuns().size(), size_t(1));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestPilotDashboard)
#include "tst_pilot_dashboard.moc"
