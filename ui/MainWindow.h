#pragma once
// The workbench window: Configuration, Dashboard, History, Staged pilot and the Compare slot as
// tabs, the log as a dock, the detected device in the status bar, shortcuts for the common actions,
// and the window state and last config remembered between sessions.
#include "catalog/Catalog.h"

#include "estimate/MemoryEstimate.h"

#include <QMainWindow>

class QDockWidget;
class QLabel;
class QTabWidget;

namespace pb::ui {

class CompareView;
class ConfigView;
class CurrentRun;
class DashboardView;
class HistoryView;
class LogPanel;
class RestoreCheckRunner;
class ScaleRunner;
class StagedPilotView;
class UserGuideDialog;

class MainWindow final : public QMainWindow {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MainWindow)
public:
    // `databasePath`: the history database (the --db option, else pb::defaultDatabasePath()).
    explicit MainWindow(const QString &databasePath, QWidget *parent = nullptr);
    ~MainWindow() override;
    QTabWidget *tabs() const { return m_tabs; }
    ConfigView *configView() const { return m_config; }
    DashboardView *dashboard() const { return m_dashboard; }
    HistoryView *history() const { return m_history; }
    StagedPilotView *stages() const { return m_stages; }
    RestoreCheckRunner *restoreCheck() const { return m_restoreCheck; }
    ScaleRunner *scaleStep() const { return m_scaleStep; }
    CurrentRun *currentRun() const { return m_current; }
    // The Compare tab holds ui/compare's CompareView; this replaces it (takes ownership).
    void setCompareView(QWidget *view);

public Q_SLOTS:
    void runPilot();
    void runRestoreCheck();
    void runScaleStep(int gpus, pb::ParallelStrategy strategy);
    void cancelPilot();
    // Puts the config `runId` ran with in the form (asking first when the form has edits).
    void loadRunConfig(qint64 runId);

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void buildMenus();
    void restoreState();
    void onConfigChanged();
    void updateCompare();
    void editCatalog();
    QString m_databasePath;
    Catalog m_catalog;                  // the built-in catalog, or the one the user edited/imported
    QTabWidget *m_tabs = nullptr;
    QLabel *m_deviceLabel = nullptr;
    ConfigView *m_config = nullptr;
    DashboardView *m_dashboard = nullptr;
    HistoryView *m_history = nullptr;
    StagedPilotView *m_stages = nullptr;
    UserGuideDialog *m_guide = nullptr;       // made on first use
    QWidget *m_compareSlot = nullptr;
    CompareView *m_compare = nullptr;   // the Compare tab, unless setCompareView replaced it
    bool m_compareStale = true;
    LogPanel *m_log = nullptr;
    RestoreCheckRunner *m_restoreCheck = nullptr;
    ScaleRunner *m_scaleStep = nullptr;
    QDockWidget *m_logDock = nullptr;
    CurrentRun *m_current = nullptr;
};

} // namespace pb::ui
