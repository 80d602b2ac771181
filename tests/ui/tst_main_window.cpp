// The window around the views: the tabs (with the Compare slot another view fills), shortcuts,
// the last config remembered through QSettings, Hugging Face import into the form, the log panel
// and the device in the status bar.
#include "MainWindow.h"
#include "compare/CompareView.h"
#include "config/ConfigView.h"
#include "config/MemoryBudgetWidget.h"
#include "estimate/CardCapacities.h"
#include "log/LogPanel.h"
#include "log/Logging.h"
#include "history/HistoryStore.h"
#include "history/HistoryView.h"
#include "stages/RestoreCheckRunner.h"
#include "stages/StagedPilotView.h"

#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QScrollBar>
#include <QAction>
#include <QTemporaryDir>
#include <QtTest>
#include <spdlog/spdlog.h>

using namespace pb;
using namespace pb::ui;

class TestMainWindow final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_main_window"));
        QSettings().clear();
        QVERIFY(m_dir.isValid());
        m_db = m_dir.filePath(QStringLiteral("h.db"));
    }

    // Help > User guide (F1) opens the guide compiled into the binary: the staged method and a page
    // for every tab, each tab's page named as the tab is.
    void userGuideFromTheHelpMenu()
    {
        MainWindow window(m_db);
        window.tabs()->setCurrentIndex(4);
        QAction *guide = nullptr;
        for (QAction *a : window.findChildren<QAction *>())
            if (a->text() == QStringLiteral("&User guide"))
                guide = a;
        QVERIFY(guide);
        QCOMPARE(guide->shortcut(), QKeySequence(QKeySequence::HelpContents));
        guide->trigger();
        auto *browser = window.findChild<QTextBrowser *>(QStringLiteral("userGuide"));
        QVERIFY(browser && browser->isVisible());
        const QString text = browser->toPlainText();
        QVERIFY2(text.contains(QStringLiteral("The staged method")), qPrintable(text.left(200)));
        for (int i = 0; i < window.tabs()->count(); ++i)
            QVERIFY2(text.contains(window.tabs()->tabText(i) + QLatin1Char('\n')), qPrintable(window.tabs()->tabText(i)));
        QVERIFY(browser->verticalScrollBar()->value() > 0); // opened at the Compare page, not the top
    }

    // Nothing a tab shows is cut off at 1280 x 800 with the default preset: every visible label's
    // text fits its width (each line), or its height where it wraps. The Compare tab after its
    // comparison is in.
    void noLabelClippedAt1280x800()
    {
        MainWindow window(m_db);
        window.resize(1280, 800);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QStringList clipped;
        for (int tab = 0; tab < window.tabs()->count(); ++tab) {
            window.tabs()->setCurrentIndex(tab);
            if (auto *compare = qobject_cast<CompareView *>(window.tabs()->currentWidget()))
                QTRY_VERIFY_WITH_TIMEOUT(!compare->busy() && compare->comparison().has_value(), 30000);
            QCoreApplication::processEvents();
            for (QLabel *label : window.tabs()->currentWidget()->findChildren<QLabel *>()) {
                if (!label->isVisibleTo(&window) || label->text().isEmpty() || Qt::mightBeRichText(label->text()))
                    continue;
                const QRect r = label->contentsRect();
                bool fits = true;
                if (label->wordWrap()) {
                    fits = label->heightForWidth(label->width()) <= label->height() + 1;
                } else {
                    for (const QString &line : label->text().split(QLatin1Char('\n')))
                        fits = fits && label->fontMetrics().horizontalAdvance(line) <= r.width() + 1;
                }
                if (!fits)
                    clipped << QStringLiteral("%1: '%2' in %3x%4").arg(window.tabs()->tabText(tab), label->text().left(60)).arg(r.width()).arg(r.height());
            }
        }
        QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QStringLiteral("\n"))));
    }

    void tabsAndCompareSlot()
    {
        MainWindow window(m_db);
        QStringList names;
        for (int i = 0; i < window.tabs()->count(); ++i)
            names << window.tabs()->tabText(i);
        QCOMPARE(names, QStringList({QStringLiteral("Configuration"), QStringLiteral("Dashboard"), QStringLiteral("History"), QStringLiteral("Staged pilot"),
                                     QStringLiteral("Compare")}));
        QVERIFY(qobject_cast<CompareView *>(window.tabs()->widget(4)));
        auto *compare = new QLabel(QStringLiteral("comparison"));
        window.setCompareView(compare);
        QCOMPARE(window.tabs()->widget(4), compare);
        QCOMPARE(window.tabs()->tabText(4), QStringLiteral("Compare"));
        auto *device = window.statusBar()->findChild<QLabel *>(QStringLiteral("deviceLabel"));
        QVERIFY(device->text().startsWith(QStringLiteral("Device: ")));
    }

    void shortcutsSwitchTabs()
    {
        MainWindow window(m_db);
        window.show();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
        QCOMPARE(window.tabs()->currentIndex(), 2);
        QTest::keyClick(&window, Qt::Key_1, Qt::ControlModifier);
        QCOMPARE(window.tabs()->currentIndex(), 0);
    }

    void lastConfigRemembered()
    {
        {
            MainWindow window(m_db);
            window.configView()->loadPreset(QStringLiteral("tiny"));
            window.configView()->findChild<QSpinBox *>(QStringLiteral("train.seq_len"))->setValue(96);
            window.tabs()->setCurrentIndex(2);
            QVERIFY(window.close());
        }
        MainWindow again(m_db);
        QCOMPARE(again.configView()->config().train.seqLen, int64_t(96));
        QCOMPARE(again.configView()->config().model.preset, std::string("tiny"));
        QCOMPARE(again.tabs()->currentIndex(), 2);
    }

    void importHuggingFaceFolder()
    {
        MainWindow window(m_db);
        QString error;
        QVERIFY2(window.configView()->importHf(QStringLiteral(PB_TEST_DATA_DIR "/hf/llama-3.1-8b"), &error), qPrintable(error));
        QCOMPARE(window.configView()->findChild<QSpinBox *>(QStringLiteral("model.hidden_size"))->value(), 4096);
        QCOMPARE(window.configView()->findChild<QSpinBox *>(QStringLiteral("model.layers"))->value(), 32);
        QCOMPARE(window.configView()->findChild<QSpinBox *>(QStringLiteral("model.kv_heads"))->value(), 8);
        QCOMPARE(window.configView()->budget()->budgets().size(), pb::cardCapacities().size());
        QVERIFY(!window.configView()->importHf(m_dir.filePath(QStringLiteral("no-such-model")), &error));
        QVERIFY(!error.isEmpty());
    }

    void restoreCheckFromStagedView()
    {
        if (!QFileInfo(QStringLiteral(PB_CLI_PATH)).isExecutable())
            QSKIP("pilotbench-cli is not built; the restore check restores in a fresh CLI process");
        const QString db = m_dir.filePath(QStringLiteral("restore.db"));
        MainWindow window(db);
        window.configView()->loadPreset(QStringLiteral("tiny"));
        window.restoreCheck()->setCliPath(QStringLiteral(PB_CLI_PATH));
        window.restoreCheck()->setSteps(2, 2);
        QSignalSpy finished(window.restoreCheck(), &RestoreCheckRunner::finished);
        auto *button = window.stages()->findChild<QPushButton *>(QStringLiteral("restoreCheckButton"));
        button->click();
        QVERIFY(!button->isEnabled());
        QVERIFY(finished.wait(180000));
        const qint64 runId = finished.at(0).at(0).toLongLong();
        QVERIFY2(finished.at(0).at(1).toBool(), qPrintable(finished.at(0).at(2).toString()));
        QVERIFY(button->isEnabled());
        const RunRecord run = window.history()->store()->run(runId);
        QCOMPARE(run.kind, QStringLiteral("restore-check"));
        QCOMPARE(run.verdict, QStringLiteral("fits"));
        window.stages()->refresh();
        QCOMPARE(window.stages()->stage(2).state, StageState::Passed);
        QCOMPARE(window.stages()->stage(2).runId, int64_t(runId));
        QCOMPARE(window.stages()->stage(0).state, StageState::Missing); // no pilot in this database
    }

    void logPanelShowsRecentLines()
    {
        LoggingOptions options;
        options.console = false;
        options.filePath = m_dir.filePath(QStringLiteral("test.log")).toStdString();
        QVERIFY(initLogging(options));
        LogPanel panel;
        spdlog::info("log-panel-marker {}", 42);
        panel.refresh();
        QVERIFY2(panel.text()->toPlainText().contains(QStringLiteral("log-panel-marker 42")), qPrintable(panel.text()->toPlainText()));
    }

private:
    QTemporaryDir m_dir;
    QString m_db;
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
