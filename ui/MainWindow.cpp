#include "MainWindow.h"
#include "help/UserGuideDialog.h"

#include "cards/CatalogEditor.h"
#include "catalog/CatalogJson.h"
#include "workflow/CatalogSource.h"
#include "compare/CompareView.h"
#include "config/ConfigView.h"
#include "config/RunConfigJson.h"
#include "document/CurrentRun.h"
#include "engine/Environment.h"
#include "history/HistoryStore.h"
#include "history/HistoryView.h"
#include "log/LogPanel.h"
#include "monitor/DashboardView.h"
#include "stages/RestoreCheckRunner.h"
#include "stages/ScaleRunner.h"
#include "stages/StagedPilotView.h"
#include "util/AppPaths.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileInfo>
#include <QGuiApplication>
#include <QScreen>
#include <QJsonDocument>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QShortcut>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>
#include <spdlog/spdlog.h>

#include <exception>

namespace pb::ui {
namespace {

QString modelName(const RunConfig &config)
{
    return QString::fromStdString(config.model.preset.empty() ? config.model.family : config.model.preset);
}

} // namespace

MainWindow::MainWindow(const QString &databasePath, QWidget *parent)
    : QMainWindow(parent), m_databasePath(databasePath), m_tabs(new QTabWidget(this))
{
    setWindowTitle(QStringLiteral("PilotBench"));
    setObjectName(QStringLiteral("mainWindow"));
    m_tabs->setObjectName(QStringLiteral("mainTabs"));
    m_tabs->setDocumentMode(true);
    setCentralWidget(m_tabs);

    m_config = new ConfigView(m_tabs);
    m_config->setHistoryDatabase(m_databasePath);
    m_dashboard = new DashboardView(m_databasePath, m_tabs);
    m_history = new HistoryView(m_databasePath, m_tabs);
    m_stages = new StagedPilotView(m_tabs);
    m_stages->setStore(m_history->store());
    m_compare = new CompareView(m_tabs);
    m_compare->setObjectName(QStringLiteral("compareSlot"));
    m_compare->setHistoryPath(m_databasePath);
    std::string catalogProblem;
    m_catalog = activeCatalogOrBuiltIn(&catalogProblem);
    m_compare->setCatalog(m_catalog);
    m_stages->setCatalog(m_catalog);
    m_compareSlot = m_compare;
    m_tabs->addTab(m_config, tr("Configuration"));
    m_tabs->addTab(m_dashboard, tr("Dashboard"));
    m_tabs->addTab(m_history, tr("History"));
    m_tabs->addTab(m_stages, tr("Staged pilot"));
    m_tabs->addTab(m_compareSlot, tr("Compare"));

    m_log = new LogPanel(this);
    m_logDock = new QDockWidget(tr("Log"), this);
    m_logDock->setObjectName(QStringLiteral("logDock"));
    m_logDock->setWidget(m_log);
    m_logDock->setFeatures(QDockWidget::DockWidgetClosable | QDockWidget::DockWidgetMovable);
    addDockWidget(Qt::BottomDockWidgetArea, m_logDock);
    resizeDocks({m_logDock}, {70}, Qt::Vertical);

    auto showStatus = [this](const QString &message) { statusBar()->showMessage(message, 8000); };
    connect(m_config, &ConfigView::statusMessage, this, showStatus);
    connect(m_dashboard, &DashboardView::statusMessage, this, showStatus);
    connect(m_history, &HistoryView::statusMessage, this, showStatus);
    connect(m_config, &ConfigView::configChanged, this, &MainWindow::onConfigChanged);
    connect(m_config, &ConfigView::runPilotRequested, this, &MainWindow::runPilot);
    connect(m_dashboard, &DashboardView::runFinished, m_history, &HistoryView::markStale);
    connect(m_dashboard, &DashboardView::runFinished, m_config, &ConfigView::reloadCalibration);
    connect(m_dashboard, &DashboardView::runFinished, m_stages, &StagedPilotView::markStale);
    // The comparison reads the newest pilot of the config: recomputed when its tab is shown after
    // the config or the history changed, never on every keystroke in the form.
    connect(m_dashboard, &DashboardView::runFinished, this, [this] { m_compareStale = true; });
    connect(m_tabs, &QTabWidget::currentChanged, this, [this] { updateCompare(); });
    connect(m_history, &HistoryView::historyChanged, m_stages, &StagedPilotView::markStale);
    connect(m_stages, &StagedPilotView::showBudgetRequested, this, [this] { m_tabs->setCurrentWidget(m_config); });
    connect(m_stages, &StagedPilotView::runPilotRequested, this, &MainWindow::runPilot);
    m_scaleStep = new ScaleRunner(this);
    connect(m_stages, &StagedPilotView::scaleStepRequested, this, &MainWindow::runScaleStep);
    connect(m_stages, &StagedPilotView::scaleCancelRequested, m_scaleStep, &ScaleRunner::cancel);
    connect(m_scaleStep, &ScaleRunner::progress, m_stages, &StagedPilotView::setScaleProgress);
    connect(m_scaleStep, &ScaleRunner::finished, this, [this](qint64 runId, int code, const QString &message) {
        m_stages->setScaleStepRunning(false);
        statusBar()->showMessage(tr("Scaling step %1%2: %3")
                                     .arg(code == 0 ? tr("done") : code == 4 ? tr("cancelled") : tr("failed"), runId > 0 ? tr(" (run %1)").arg(runId) : QString(), message),
                                 15000);
        m_history->markStale();
        m_stages->markStale();
        m_compareStale = true;
    });
    m_restoreCheck = new RestoreCheckRunner(this);
    connect(m_stages, &StagedPilotView::restoreCheckRequested, this, &MainWindow::runRestoreCheck);
    connect(m_restoreCheck, &RestoreCheckRunner::finished, this, [this](qint64 runId, bool pass, const QString &message) {
        m_stages->setRestoreCheckRunning(false);
        statusBar()->showMessage(tr("Restore check %1%2: %3").arg(pass ? tr("passed") : tr("failed"), runId > 0 ? tr(" (run %1)").arg(runId) : QString(), message), 15000);
        m_history->markStale();
        m_stages->markStale();
    });
    connect(m_stages, &StagedPilotView::compareRequested, this, [this] { m_tabs->setCurrentWidget(m_compareSlot); });
    connect(m_compare, &CompareView::decisionRecorded, this, [this](qint64 runId) {
        m_history->markStale();
        m_stages->markStale();
        statusBar()->showMessage(tr("Decision recorded as run %1").arg(runId), 8000);
    });

    // One current run for the window: History's selection or the run started here.
    m_current = new CurrentRun(this);
    connect(m_history, &HistoryView::runOpened, m_current, &CurrentRun::select);
    connect(m_dashboard, &DashboardView::runStarted, m_current, &CurrentRun::liveStarted);
    connect(m_dashboard, &DashboardView::runFinished, m_current, &CurrentRun::liveFinished);
    connect(m_current, &CurrentRun::changed, m_history, &HistoryView::selectRun);
    connect(m_current, &CurrentRun::changed, m_dashboard, &DashboardView::showRun);
    connect(m_current, &CurrentRun::changed, m_stages, &StagedPilotView::setCurrentRun);
    connect(m_stages, &StagedPilotView::loadRunConfigRequested, this, &MainWindow::loadRunConfig);

    buildMenus();
    m_deviceLabel = new QLabel(this);
    m_deviceLabel->setObjectName(QStringLiteral("deviceLabel"));
    const bool cuda = cudaAvailable();
    m_deviceLabel->setText(cuda ? tr("Device: CUDA, %1 GPU(s)").arg(cudaDeviceCount()) : tr("Device: CPU only (no CUDA in this build or host)"));
    statusBar()->addPermanentWidget(m_deviceLabel);
    auto *dbLabel = new QLabel(tr("History: %1").arg(m_databasePath), this);
    dbLabel->setToolTip(m_databasePath);
    statusBar()->addPermanentWidget(dbLabel);
    restoreState();
    onConfigChanged();
}

MainWindow::~MainWindow() = default;

void MainWindow::setCompareView(QWidget *view)
{
    const int index = m_tabs->indexOf(m_compareSlot);
    m_tabs->removeTab(index);
    m_compareSlot->deleteLater();
    m_compareSlot = view;
    m_compare = qobject_cast<CompareView *>(view);
    m_tabs->insertTab(index, view, tr("Compare"));
}

void MainWindow::editCatalog()
{
    CatalogEditor editor(m_catalog, this);
    if (editor.exec() != QDialog::Accepted)
        return;
    try {
        saveUserCatalog(editor.catalog());
    } catch (const std::exception &e) {
        QMessageBox::warning(this, tr("Catalog"), QString::fromUtf8(e.what()));
        return;
    }
    m_catalog = activeCatalogOrBuiltIn(nullptr); // as every other command will read it
    if (m_compare)
        m_compare->setCatalog(m_catalog);
    m_stages->setCatalog(m_catalog);
    m_compareStale = true;
    updateCompare();
}

void MainWindow::updateCompare()
{
    if (!m_compare || m_tabs->currentWidget() != m_compare || !m_compareStale || !m_config->isValid())
        return;
    m_compareStale = false;
    m_compare->setConfig(m_config->config());
}

void MainWindow::onConfigChanged()
{
    const RunConfig config = m_config->config();
    m_dashboard->setConfig(config, m_config->isValid());
    m_stages->setModel(modelName(config));
    m_stages->setConfigHash(m_config->isValid() ? configHash(config) : std::string());
    m_compareStale = true;
    updateCompare();
}

void MainWindow::loadRunConfig(qint64 runId)
{
    try {
        const RunRecord r = m_history->store()->run(runId);
        if (m_config->loadConfigOfRun(runConfigFromJson(r.config), tr("run %1").arg(runId)))
            statusBar()->showMessage(tr("The config of run %1 is in the form").arg(runId), 8000);
    } catch (const std::exception &e) {
        QMessageBox::warning(this, tr("Load the config of run %1").arg(runId), QString::fromUtf8(e.what()));
    }
}

void MainWindow::runPilot()
{
    if (m_dashboard->isRunning()) {
        m_tabs->setCurrentWidget(m_dashboard);
        return;
    }
    if (!m_config->isValid()) {
        m_tabs->setCurrentWidget(m_config);
        statusBar()->showMessage(tr("Fix the fields in red before running a pilot."), 8000);
        return;
    }
    m_tabs->setCurrentWidget(m_dashboard);
    m_dashboard->startPilot();
}

void MainWindow::runRestoreCheck()
{
    if (!m_config->isValid()) {
        m_tabs->setCurrentWidget(m_config);
        statusBar()->showMessage(tr("Fix the fields in red before running the restore check."), 8000);
        return;
    }
    if (!QFileInfo::exists(m_restoreCheck->cliPath())) {
        QMessageBox::warning(this, tr("Restore check"), tr("The restore check restores in a fresh pilotbench-cli process, and %1 does not exist.").arg(m_restoreCheck->cliPath()));
        return;
    }
    if (m_restoreCheck->start(m_config->config(), m_databasePath, appDataDir() + QStringLiteral("/checkpoints"))) {
        m_stages->setRestoreCheckRunning(true);
        statusBar()->showMessage(tr("Restore check running: 4 steps, checkpoint, fresh-process restore, 4 more steps…"));
    }
}

void MainWindow::runScaleStep(int gpus, ParallelStrategy strategy)
{
    if (!m_config->isValid()) {
        m_tabs->setCurrentWidget(m_config);
        statusBar()->showMessage(tr("Fix the fields in red before running the scaling step."), 8000);
        return;
    }
    if (!QFileInfo::exists(m_scaleStep->cliPath())) {
        QMessageBox::warning(this, tr("Scaling step"), tr("The scaling step runs in a pilotbench-cli worker process, and %1 does not exist.").arg(m_scaleStep->cliPath()));
        return;
    }
    // Ranks go on GPUs where the host has enough of them, else they share the CPU.
    const QString device = cudaDeviceCount() >= gpus ? QStringLiteral("cuda") : QStringLiteral("cpu");
    if (m_scaleStep->start(m_config->config(), m_databasePath, gpus, strategy, device)) {
        m_stages->setScaleStepRunning(true);
        statusBar()->showMessage(tr("Scaling step running: baseline, then %1 %2 ranks on %3…").arg(gpus).arg(QString::fromLatin1(toString(strategy)), device));
    }
}

void MainWindow::cancelPilot()
{
    m_dashboard->cancelPilot();
    if (m_scaleStep->isRunning())
        m_scaleStep->cancel();
    if (m_restoreCheck->isRunning())
        m_restoreCheck->cancel();
}

void MainWindow::buildMenus()
{
    auto *file = menuBar()->addMenu(tr("&File"));
    auto *open = file->addAction(tr("&Open config…"), m_config, &ConfigView::openDialog);
    open->setShortcut(QKeySequence::Open);
    auto *save = file->addAction(tr("&Save config…"), m_config, &ConfigView::saveDialog);
    save->setShortcut(QKeySequence::Save);
    file->addAction(tr("&Import Hugging Face model…"), m_config, &ConfigView::importHfDialog);
    file->addSeparator();
    auto *quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto *pilot = menuBar()->addMenu(tr("&Pilot"));
    auto *run = pilot->addAction(tr("&Run pilot"), this, &MainWindow::runPilot);
    run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    auto *cancel = pilot->addAction(tr("&Cancel pilot"), this, &MainWindow::cancelPilot);
    cancel->setShortcut(QKeySequence(Qt::Key_Escape));
    cancel->setShortcutContext(Qt::WindowShortcut);

    auto *catalog = menuBar()->addMenu(tr("C&atalog"));
    catalog->addAction(tr("&Edit or import the card catalog…"), this, &MainWindow::editCatalog);

    auto *view = menuBar()->addMenu(tr("&View"));
    const QString names[] {tr("&Configuration"), tr("&Dashboard"), tr("&History"), tr("&Staged pilot"), tr("C&ompare")};
    for (int i = 0; i < 5; ++i) {
        auto *a = view->addAction(names[i], this, [this, i] { m_tabs->setCurrentIndex(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
    }
    view->addSeparator();
    auto *log = m_logDock->toggleViewAction();
    log->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    view->addAction(log);

    auto *help = menuBar()->addMenu(tr("&Help"));
    auto *guide = help->addAction(tr("&User guide"), this, [this] {
        // The page of the tab in front; the dialog is kept, so it opens where it was left otherwise.
        static const char *pages[] {"configuration", "dashboard", "history", "staged", "compare"};
        if (!m_guide)
            m_guide = new UserGuideDialog(this);
        const int tab = m_tabs->currentIndex();
        m_guide->show();
        m_guide->showPage(QString::fromLatin1(tab >= 0 && tab < 5 ? pages[tab] : "method"));
        m_guide->raise();
    });
    guide->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About PilotBench"), this, [this] {
        QMessageBox::about(this, tr("About PilotBench"), QString::fromStdString(buildInfoText()).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    });
}

void MainWindow::restoreState()
{
    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
        resize(QGuiApplication::primaryScreen()->availableSize().boundedTo(QSize(1440, 900)));
    QMainWindow::restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    const QByteArray last = settings.value(QStringLiteral("config/last")).toByteArray();
    if (!last.isEmpty()) {
        try {
            m_config->setConfig(runConfigFromJson(QJsonDocument::fromJson(last).object()));
        } catch (const std::exception &e) {
            // A remembered config that no longer validates (an older schema, say) is dropped, not fatal.
            spdlog::warn("last config not restored: {}", e.what());
        }
    }
    m_tabs->setCurrentIndex(settings.value(QStringLiteral("window/tab"), 0).toInt());
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    if (m_dashboard->isRunning()) {
        // The controller's destructor cancels and waits; the engine stops within one micro-batch.
        m_dashboard->cancelPilot();
    }
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/tab"), m_tabs->currentIndex());
    settings.setValue(QStringLiteral("config/last"), QJsonDocument(toJson(m_config->config())).toJson(QJsonDocument::Compact));
    event->accept();
}

} // namespace pb::ui
