// The window has one current run and every view follows it: History's selection makes a run
// current, and the dashboard (in the mode of the run's kind), the History details and the staged
// checklist then name that run; a run of another config offers its config; a pilot started on the
// dashboard is current when it ends, highlighted in History.
#include "MainWindow.h"
#include "charts/RunCharts.h"
#include "config/ConfigView.h"
#include "config/Presets.h"
#include "config/RunConfigForm.h"
#include "config/RunConfigJson.h"
#include "core/history/HistoryTestUtil.h"
#include "document/CurrentRun.h"
#include "history/HistoryStore.h"
#include "history/HistoryView.h"
#include "history/HistoryWriter.h"
#include "history/RunTableModel.h"
#include "monitor/DashboardView.h"
#include "stages/StagedPilotView.h"

#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;
using namespace pb::ui;

namespace {

int64_t writeRun(HistoryWriter &writer, const QString &kind, const RunConfig &config, int steps)
{
    RunStart start = test::pilotStart(QString::fromStdString(config.model.preset), QStringLiteral("cpu"), static_cast<int>(config.train.seqLen));
    start.kind = kind;
    start.configJson = toJson(config);
    start.configHash = configHash(config);
    const int64_t id = writer.beginRun(start);
    for (int i = 1; i <= steps; ++i)
        writer.appendSample(id, test::sampleAt(i));
    PilotSummary summary;
    summary.verdict = Verdict::Fits;
    summary.measuredSteps = steps;
    writer.finishRun(id, summary);
    writer.flush();
    return id;
}

// The user clicks `runId`'s row in the History table.
void clickRun(MainWindow &window, int64_t runId)
{
    HistoryView *history = window.history();
    const int row = history->model()->rowOfRun(runId);
    QVERIFY(row >= 0);
    history->table()->selectRow(history->proxy()->mapFromSource(history->model()->index(row, 0)).row());
}

QString stageLine(MainWindow &window) { return window.stages()->findChild<QLabel *>(QStringLiteral("currentRunLabel"))->text(); }

} // namespace

class TestCurrentRun final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_current_run"));
        QSettings().clear();
        QVERIFY(m_dir.isValid());
    }

    void selectionDrivesEveryView()
    {
        const QString db = m_dir.filePath(QStringLiteral("select.db"));
        const RunConfig tiny = presetConfig(QStringLiteral("tiny"));
        const RunConfig moe = presetConfig(QStringLiteral("tiny-moe"));
        int64_t pilot = 0, watched = 0, other = 0;
        {
            HistoryWriter writer(db);
            pilot = writeRun(writer, QStringLiteral("pilot"), tiny, 6);
            watched = writeRun(writer, QStringLiteral("watch"), tiny, 5);
            other = writeRun(writer, QStringLiteral("pilot"), moe, 4);
        }
        MainWindow window(db);
        window.configView()->setConfig(tiny);
        window.resize(1280, 800);
        window.show();
        window.tabs()->setCurrentWidget(window.history());

        clickRun(window, pilot);
        QCOMPARE(window.currentRun()->id(), pilot);
        QCOMPARE(window.history()->openedRunId(), pilot);
        QCOMPARE(window.dashboard()->mode(), DashboardView::Mode::Pilot);
        QVERIFY2(window.dashboard()->chartsSubject().startsWith(QStringLiteral("Charts: run %1, pilot of tiny").arg(pilot)), qPrintable(window.dashboard()->chartsSubject()));
        QCOMPARE(window.dashboard()->charts()->sampleCount(), size_t(6));
        QVERIFY2(stageLine(window).contains(QStringLiteral("run %1").arg(pilot)) && stageLine(window).contains(QStringLiteral("counts as evidence")), qPrintable(stageLine(window)));

        // A watched command's run goes to the dashboard's "Your command" mode, with its own samples.
        clickRun(window, watched);
        QCOMPARE(window.currentRun()->id(), watched);
        QCOMPARE(window.dashboard()->mode(), DashboardView::Mode::Command);
        QVERIFY(window.dashboard()->chartsSubject().startsWith(QStringLiteral("Charts: run %1, your command").arg(watched)));
        QCOMPARE(window.dashboard()->charts()->sampleCount(), size_t(5));
        QVERIFY(stageLine(window).contains(QStringLiteral("run %1").arg(watched)));

        // A run of another config: the checklist says so and offers its config, which replaces the
        // form's after the question about edits.
        clickRun(window, other);
        QCOMPARE(window.currentRun()->id(), other);
        QCOMPARE(window.dashboard()->mode(), DashboardView::Mode::Pilot);
        QCOMPARE(window.dashboard()->charts()->sampleCount(), size_t(4));
        QVERIFY(window.dashboard()->chartsSubject().endsWith(QStringLiteral("of another config than the one above")));
        QVERIFY2(stageLine(window).contains(QStringLiteral("another config")), qPrintable(stageLine(window)));
        auto *load = window.stages()->findChild<QPushButton *>(QStringLiteral("loadRunConfigButton"));
        QVERIFY(!load->isHidden());
        RunConfig edited = tiny;
        edited.train.microBatch += 1;
        window.configView()->form()->setConfig(edited);
        QVERIFY(window.configView()->edited());
        QString asked;
        window.configView()->setDiscardConfirmation([&asked](const QString &q) { asked = q; return true; });
        load->click();
        QVERIFY2(asked.contains(QStringLiteral("run %1").arg(other)), qPrintable(asked));
        QCOMPARE(configHash(window.configView()->config()), configHash(moe));
        QVERIFY2(stageLine(window).contains(QStringLiteral("counts as evidence")), qPrintable(stageLine(window)));
        QVERIFY(load->isHidden());
        QCOMPARE(window.dashboard()->chartsSubject(), QStringLiteral("Charts: run %1, pilot of tiny-moe, fits").arg(other));
    }

    // A pilot started here is the current run from its start; when it ends, History highlights it.
    void liveRunBecomesCurrent()
    {
        const QString db = m_dir.filePath(QStringLiteral("live.db"));
        const RunConfig tiny = presetConfig(QStringLiteral("tiny"));
        int64_t earlier = 0;
        {
            HistoryWriter writer(db);
            earlier = writeRun(writer, QStringLiteral("pilot"), tiny, 3);
        }
        MainWindow window(db);
        window.configView()->setConfig(tiny);
        window.show();
        window.tabs()->setCurrentWidget(window.history());
        clickRun(window, earlier);
        QCOMPARE(window.currentRun()->id(), earlier);

        window.dashboard()->setSteps(2, 0);
        window.runPilot();
        QTRY_VERIFY_WITH_TIMEOUT(window.currentRun()->id() > earlier, 60000); // current from its start
        const qint64 live = window.currentRun()->id();
        QTRY_VERIFY_WITH_TIMEOUT(!window.dashboard()->isRunning(), 120000);
        QCOMPARE(window.currentRun()->id(), live);
        // History, read again when it is next shown, highlights and opens it.
        window.tabs()->setCurrentWidget(window.history());
        QCOMPARE(window.history()->selectedRunIds(), std::vector<int64_t> {live});
        QCOMPARE(window.history()->openedRunId(), live);
        QVERIFY(window.dashboard()->chartsSubject().startsWith(QStringLiteral("Charts: run %1").arg(live)));
        // Named with its verdict, not as the running run it was when it started.
        QVERIFY2(stageLine(window).contains(QStringLiteral("run %1").arg(live)) && stageLine(window).contains(QStringLiteral("(fits)")), qPrintable(stageLine(window)));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestCurrentRun)
#include "tst_current_run.moc"
