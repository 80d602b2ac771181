// The dashboard's "Your command" mode over the core's watch: a command printing tqdm progress runs
// to the end with its steps in the charts, its output in the view (progress updating in place) and
// a run of kind "watch" in the history; a cancel stops the whole process tree within seconds; a
// missing program is refused by name with nothing recorded; the fields are remembered.
#include "charts/RunCharts.h"
#include "history/HistoryStore.h"
#include "monitor/DashboardView.h"
#include "monitor/WatchController.h"
#include "monitor/WatchPanel.h"

#include <QCheckBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QUuid>
#include <QtTest>

#include <csignal>

using namespace pb;
using namespace pb::ui;

namespace {

// PIDs of our processes whose environment holds `marker` (a zombie's environment reads empty).
QList<qint64> processesWithMarker(const QByteArray &marker)
{
    QList<qint64> found;
    const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString &entry : entries) {
        bool ok = false;
        const qint64 pid = entry.toLongLong(&ok);
        if (!ok)
            continue;
        QFile environ(QStringLiteral("/proc/%1/environ").arg(pid));
        if (environ.open(QIODevice::ReadOnly) && environ.readAll().contains(marker))
            found << pid;
    }
    return found;
}

} // namespace

class TestWatchPanel final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_watch_panel"));
        // The fields are remembered in QSettings: keep them out of the user's own.
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
        QSettings().clear();
    }

    void progressLinesRunToTheEnd()
    {
        const QString script = m_dir.filePath(QStringLiteral("progress.sh"));
        QFile file(script);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("#!/bin/sh\n"
                   "i=1\n"
                   "while [ $i -le 12 ]; do\n"
                   "  printf ' %d/12 [00:0%d<00:01,  8.00it/s]\\r' $i $((i % 10)) >&2\n"
                   "  sleep 0.1\n"
                   "  i=$((i + 1))\n"
                   "done\n"
                   "printf '\\n' >&2\n"
                   "echo 'training done'\n");
        file.close();
        QVERIFY(file.setPermissions(file.permissions() | QFileDevice::ExeOwner));

        const QString db = m_dir.filePath(QStringLiteral("progress.db"));
        DashboardView dash(db);
        WatchPanel *panel = dash.watchPanel();
        panel->commandEdit()->setText(QStringLiteral("\"%1\"").arg(script));
        panel->folderEdit()->setText(m_dir.path());
        QVERIFY2(panel->problem().isEmpty(), qPrintable(panel->problem()));
        QVERIFY(panel->startButton()->isEnabled());
        QSignalSpy started(&dash, &DashboardView::runStarted);
        QSignalSpy finished(&dash, &DashboardView::runFinished);
        QSignalSpy watchFinished(dash.watchController(), &WatchController::runFinished);

        panel->startButton()->click();
        QVERIFY(dash.isRunning());
        QCOMPARE(dash.mode(), DashboardView::Mode::Command);
        QVERIFY(!panel->startButton()->isEnabled());
        QVERIFY(!dash.startWatch()); // one run at a time
        QVERIFY(!dash.startPilot());
        QTRY_VERIFY_WITH_TIMEOUT(!dash.isRunning(), 120000);

        QCOMPARE(started.count(), 1);
        QCOMPARE(finished.count(), 1);
        QCOMPARE(watchFinished.count(), 1);
        const QList<QVariant> args = watchFinished.takeFirst();
        const auto summary = qvariant_cast<PilotSummary>(args.at(1));
        QCOMPARE(summary.verdict, Verdict::Fits);
        QCOMPARE(args.at(2).toString(), QStringLiteral("log-lines"));
        QCOMPARE(dash.lastVerdict(), QStringLiteral("fits"));
        QCOMPARE(finished.first().first().toLongLong(), dash.lastRunId());

        // The counter moved from 1 to 12: eleven steps, all of them charted.
        const size_t charted = dash.charts()->sampleCount();
        QVERIFY2(charted >= 10 && charted <= 12, qPrintable(QString::number(charted)));
        QCOMPARE(static_cast<size_t>(dash.charts()->stepTimeSeries()->count()), charted);

        // Progress updates replaced each other rather than piling up as lines.
        const QString text = panel->outputView()->toPlainText();
        QVERIFY2(text.contains(QStringLiteral("12/12 [")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("training done")), qPrintable(text));
        QVERIFY2(!text.contains(QStringLiteral(" 5/12 [")), qPrintable(text));
        QVERIFY2(panel->verdictLabel()->text().contains(QStringLiteral("fits")), qPrintable(panel->verdictLabel()->text()));
        QVERIFY2(panel->figuresLabel()->text().contains(QStringLiteral("log-lines")), qPrintable(panel->figuresLabel()->text()));
        QVERIFY(panel->startButton()->isEnabled());

        HistoryStore store(db);
        const RunRecord run = store.run(dash.lastRunId());
        QCOMPARE(run.kind, QStringLiteral("watch"));
        QCOMPARE(run.verdict, QStringLiteral("fits"));
        QCOMPARE(run.status, QStringLiteral("done"));
        QCOMPARE(static_cast<size_t>(run.sampleCount), charted);
        QCOMPARE(run.summary.value(QStringLiteral("step_source")).toString(), QStringLiteral("log-lines"));
    }

    void cancelStopsTheWholeTree()
    {
        const QByteArray marker = "PB_WATCH_TEST_MARKER=" + QUuid::createUuid().toByteArray(QUuid::WithoutBraces);
        const QString db = m_dir.filePath(QStringLiteral("cancel.db"));
        DashboardView dash(db);
        WatchPanel *panel = dash.watchPanel();
        panel->commandEdit()->setText(QStringLiteral("sh -c \"sleep 30 & sleep 30\""));
        panel->folderEdit()->clear();
        panel->environmentEdit()->setPlainText(QString::fromLatin1(marker));
        QVERIFY2(panel->problem().isEmpty(), qPrintable(panel->problem()));
        QVERIFY(dash.startWatch());
        // The shell and its sleeps, found by the marker in their environment.
        QTRY_VERIFY_WITH_TIMEOUT(processesWithMarker(marker).size() >= 2, 30000);
        QVERIFY(panel->cancelButton()->isEnabled());

        panel->cancelButton()->click();
        QTRY_VERIFY_WITH_TIMEOUT(!dash.isRunning(), 30000);
        QCOMPARE(dash.lastVerdict(), QStringLiteral("cancelled"));
        QTRY_VERIFY_WITH_TIMEOUT(processesWithMarker(marker).isEmpty(), 5000);
        QVERIFY2(panel->verdictLabel()->text().contains(QStringLiteral("cancelled")), qPrintable(panel->verdictLabel()->text()));

        HistoryStore store(db);
        const RunRecord run = store.run(dash.lastRunId());
        QCOMPARE(run.kind, QStringLiteral("watch"));
        QCOMPARE(run.verdict, QStringLiteral("cancelled"));
    }

    // A command that daemonises a child (setsid) and exits at once: what it left behind is found
    // (re-parented to this process, a child subreaper) and stopped before the run is recorded.
    void daemonisedChildEndsWithTheRun()
    {
        const QByteArray marker = "PB_WATCH_TEST_MARKER=" + QUuid::createUuid().toByteArray(QUuid::WithoutBraces);
        DashboardView dash(m_dir.filePath(QStringLiteral("daemon.db")));
        WatchPanel *panel = dash.watchPanel();
        panel->commandEdit()->setText(QStringLiteral("sh -c \"setsid sh -c 'sleep 300; :' & exit 0\""));
        panel->folderEdit()->clear();
        panel->environmentEdit()->setPlainText(QString::fromLatin1(marker));
        QVERIFY2(panel->problem().isEmpty(), qPrintable(panel->problem()));
        QVERIFY(dash.startWatch());
        QTRY_VERIFY_WITH_TIMEOUT(!dash.isRunning(), 60000);
        const QList<qint64> left = processesWithMarker(marker);
        for (qint64 pid : left)
            ::kill(static_cast<pid_t>(pid), SIGKILL);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("%1 process(es) outlived the watched command").arg(left.size())));
    }

    void missingProgramIsRefusedByName()
    {
        const QString db = m_dir.filePath(QStringLiteral("missing.db"));
        DashboardView dash(db);
        WatchPanel *panel = dash.watchPanel();
        panel->commandEdit()->setText(QStringLiteral("no-such-trainer-pbxyz --epochs 1"));
        panel->environmentEdit()->clear();
        QSignalSpy failed(dash.watchController(), &WatchController::runFailed);
        QSignalSpy finished(&dash, &DashboardView::runFinished);
        QVERIFY(dash.startWatch());
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        QVERIFY(!dash.isRunning());
        const QString message = failed.first().first().toString();
        QVERIFY2(message.contains(QStringLiteral("no-such-trainer-pbxyz")), qPrintable(message));
        QVERIFY2(panel->verdictLabel()->text().contains(QStringLiteral("no-such-trainer-pbxyz")), qPrintable(panel->verdictLabel()->text()));
        QCOMPARE(dash.lastVerdict(), QStringLiteral("error"));
        QCOMPARE(finished.count(), 0);
        if (QFile::exists(db))
            QVERIFY(HistoryStore(db).listRuns().empty());
        QVERIFY(panel->startButton()->isEnabled()); // the dashboard takes the next run
    }

    // A terminal's view of \r: the progress line is rewritten in place, across reads, and kept
    // when the line ends or the other stream prints.
    void outputViewUpdatesProgressInPlace()
    {
        WatchPanel panel;
        panel.runStarting();
        panel.appendOutput(QStringLiteral("epoch 1\n 1/3 [00:00<"), true);
        panel.appendOutput(QStringLiteral("00:02]\r 2/3 [00:01<00:01]\r"), true);
        panel.appendOutput(QStringLiteral("a print\n"), false);
        panel.appendOutput(QStringLiteral("\r\x1b[32m 3/3 [00:02<00:00]\x1b[0m\r\n"), true);
        panel.showNotice(QStringLiteral("a notice"));
        panel.appendOutput(QStringLiteral("done"), false);
        QCOMPARE(panel.outputView()->toPlainText(),
                 QStringLiteral("epoch 1\n 2/3 [00:01<00:01]\na print\n 3/3 [00:02<00:00]\npilotbench: a notice\ndone"));
    }

    void badEnvironmentLineDisablesStart()
    {
        WatchPanel panel;
        panel.commandEdit()->setText(QStringLiteral("python3 train.py"));
        panel.folderEdit()->clear();
        panel.devicesEdit()->clear();
        panel.environmentEdit()->setPlainText(QStringLiteral("A=1\n# a comment\nnot an assignment\nB="));
        QVERIFY(!panel.startButton()->isEnabled());
        QVERIFY2(panel.problem().contains(QStringLiteral("line 3")), qPrintable(panel.problem()));
        QCOMPARE(panel.environmentEdit()->extraSelections().size(), 1);
        QCOMPARE(panel.environmentEdit()->extraSelections().first().cursor.block().blockNumber(), 2);
        QString why;
        QVERIFY(!panel.request(&why));
        QCOMPARE(why, panel.problem());

        panel.environmentEdit()->setPlainText(QStringLiteral("A=1\n# a comment\nB=two words"));
        panel.devicesEdit()->setText(QStringLiteral("0,1"));
        QVERIFY2(panel.problem().isEmpty(), qPrintable(panel.problem()));
        QVERIFY(panel.startButton()->isEnabled());
        QVERIFY(panel.environmentEdit()->extraSelections().isEmpty());
        const auto request = panel.request();
        QVERIFY(request);
        QCOMPARE(request->options.command, QStringList({QStringLiteral("python3"), QStringLiteral("train.py")}));
        QCOMPARE(request->options.environment,
                 QStringList({QStringLiteral("A=1"), QStringLiteral("B=two words"), QStringLiteral("CUDA_VISIBLE_DEVICES=0,1")}));
        QVERIFY(!request->config);

        // The config is passed only when asked for, and only a valid one.
        panel.useConfigBox()->setChecked(true);
        QVERIFY(!panel.startButton()->isEnabled());
        RunConfig config;
        config.name = "mine";
        panel.setConfig(config, true);
        QVERIFY(panel.startButton()->isEnabled());
        QCOMPARE(panel.request()->config->name, std::string("mine"));
        panel.useConfigBox()->setChecked(false);
        panel.folderEdit()->setText(m_dir.filePath(QStringLiteral("no-such-folder")));
        QVERIFY(!panel.startButton()->isEnabled());
        QVERIFY(panel.problem().contains(QStringLiteral("no-such-folder")));
    }

    void fieldsAreRemembered()
    {
        const QString command = QStringLiteral("torchrun --nproc_per_node 2 \"my train.py\" --bf16");
        const QString environment = QStringLiteral("HF_HOME=/data/hf\nNCCL_DEBUG=INFO");
        {
            WatchPanel panel;
            panel.commandEdit()->setText(command);
            panel.folderEdit()->setText(m_dir.path());
            panel.environmentEdit()->setPlainText(environment);
            panel.devicesEdit()->setText(QStringLiteral("2,3"));
        }
        WatchPanel again;
        QCOMPARE(again.commandEdit()->text(), command);
        QCOMPARE(again.folderEdit()->text(), m_dir.path());
        QCOMPARE(again.environmentEdit()->toPlainText(), environment);
        QCOMPARE(again.devicesEdit()->text(), QStringLiteral("2,3"));
        QCOMPARE(again.request()->options.command.at(3), QStringLiteral("my train.py"));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestWatchPanel)
#include "tst_watch_panel.moc"
