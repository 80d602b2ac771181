#pragma once
// The live monitoring dashboard in two modes: "Our pilot" (Start and Cancel, a progress bar with
// ETA, the figures an engineer watches: step time, tokens/s, data stall, MFU, peak memory) and "Your
// command" (the user's own training command, WatchPanel). Both feed the same charts through one
// sample buffer drained by a frame timer (<= 30 Hz); one run at a time, either kind.
#include "config/RunConfig.h"
#include "result/PilotTypes.h"

#include <QElapsedTimer>
#include <QString>
#include <QWidget>

#include <functional>

#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QStackedWidget;
class QTabBar;
class QTimer;

namespace pb::ui {

class PilotController;
class RunCharts;
class SampleBuffer;
class WatchController;
class WatchPanel;

class DashboardView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DashboardView)
public:
    static constexpr int kFrameIntervalMs = 33; // <= 30 redraws a second
    enum class Mode { Pilot = 0, Command = 1 };

    DashboardView(const QString &databasePath, QWidget *parent = nullptr);
    ~DashboardView() override;
    void setConfig(const RunConfig &config, bool valid);
    void setSteps(int measuredSteps, int warmupSteps);
    // Our pilot or the user's command.
    bool isRunning() const;
    Mode mode() const;
    void setMode(Mode mode);
    RunCharts *charts() const { return m_charts; }
    WatchPanel *watchPanel() const { return m_watchPanel; }
    WatchController *watchController() const { return m_watch; }
    // The verdict of the last finished run ("" before any, "error" when it threw).
    const QString &lastVerdict() const { return m_lastVerdict; }
    int64_t lastRunId() const { return m_lastRunId; }
    // Whose charts are shown: "Charts: run 7, pilot of tiny, fits" or that the mode has none yet.
    QString chartsSubject() const;
    // The longest drain-and-update of one frame in the current or last run (painting excluded).
    double longestFrameMs() const { return m_longestFrameMs; }
    // Asked before a pilot whose estimated peak exceeds the device's memory, with the reason; true
    // starts it. Unset: a question box. Tests answer without a box.
    void setOversizedPilotConfirmation(std::function<bool(const QString &why)> confirm) { m_confirmOversized = std::move(confirm); }

public Q_SLOTS:
    // The window's current run, recorded earlier: its charts in the mode of its kind (a watched
    // command's under "Your command", any other under "Our pilot"). Ignored while a run is going:
    // a live run owns the dashboard until it ends.
    void showRun(qint64 runId);
    bool startPilot();
    // Cancels whichever run is going, ours or the user's command.
    void cancelPilot();
    // Runs the command of the "Your command" mode; false when its fields have a problem or a run
    // is going. A missing program is reported later, by runFailed on the controller.
    bool startWatch();

Q_SIGNALS:
    // A watched command's run id is known only when it ends: it starts with 0.
    void runStarted(qint64 runId);
    void runFinished(qint64 runId);
    void statusMessage(const QString &message);

private:
    std::function<bool(const QString &)> m_confirmOversized;
    void drain();
    void updateFigures();
    void onFinished(qint64 runId, const PilotSummary &summary, const QString &historyError);
    void onFailed(const QString &message);
    void onWatchFinished(qint64 runId, const PilotSummary &summary, const QString &stepSource, const QString &deviceSource);
    void onWatchFailed(const QString &message);
    void updateRunningUi();
    // The charts of a mode are its own: its last run here (read back from the history) or none.
    void showModeCharts(Mode mode);
    void setChartsLabel(Mode mode, int64_t runId, const QString &what);

    QString m_databasePath;
    // The last run of each mode in this window: its id, what the charts label says of it and the
    // estimate line its charts had.
    struct ModeRun {
        int64_t id = 0;
        QString text;
        std::optional<int64_t> estimate;
        std::string configHash; // of a run shown from the history ("" for one run here)
    };
    // What the charts label says of `run`: its text, and whether it ran another config than the form's.
    QString chartsText(const ModeRun &run) const;
    ModeRun m_modeRun[2];
    QLabel *m_chartsLabel = nullptr;
    RunConfig m_config;
    bool m_configValid = false;
    std::unique_ptr<SampleBuffer> m_buffer;
    PilotController *m_controller = nullptr;
    WatchController *m_watch = nullptr;
    // Which run the buffer is being drained for: its figures are the ones updated.
    Mode m_draining = Mode::Pilot;
    QTabBar *m_modes = nullptr;
    QStackedWidget *m_modeStack = nullptr;
    WatchPanel *m_watchPanel = nullptr;
    RunCharts *m_charts = nullptr;
    QTimer *m_frame = nullptr;
    QElapsedTimer m_elapsed;
    QPushButton *m_start = nullptr, *m_cancel = nullptr;
    QSpinBox *m_steps = nullptr, *m_warmup = nullptr;
    QComboBox *m_device = nullptr;
    QProgressBar *m_progress = nullptr;
    QLabel *m_configLabel = nullptr, *m_phase = nullptr, *m_stepTime = nullptr, *m_tokens = nullptr, *m_stall = nullptr;
    QLabel *m_mfu = nullptr, *m_eta = nullptr, *m_peak = nullptr, *m_verdict = nullptr;

    // Running sums over measured (train-phase) steps for the live figures.
    int64_t m_lastStep = 0, m_totalSteps = 0, m_measured = 0, m_tokensSum = 0, m_peakAllocated = 0;
    double m_stepMsSum = 0, m_dataWaitMsSum = 0, m_recentStepMs = 0;
    Phase m_currentPhase = Phase::Setup;
    QString m_lastVerdict;
    int64_t m_lastRunId = 0;
    double m_longestFrameMs = 0;
    int64_t m_frameCount = 0;
    std::optional<double> m_peakFlops;
};

} // namespace pb::ui
