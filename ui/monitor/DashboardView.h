#pragma once
// The live monitoring dashboard: Start and Cancel, a progress bar with ETA, the figures an engineer
// watches (step time, tokens/s, data stall, MFU, peak memory) and the run's charts, fed by a frame
// timer (<= 30 Hz) that drains the engine's sample buffer.
#include "config/RunConfig.h"
#include "result/PilotTypes.h"

#include <QElapsedTimer>
#include <QString>
#include <QWidget>

#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace pb::ui {

class PilotController;
class RunCharts;
class SampleBuffer;

class DashboardView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DashboardView)
public:
    static constexpr int kFrameIntervalMs = 33; // <= 30 redraws a second

    DashboardView(const QString &databasePath, QWidget *parent = nullptr);
    ~DashboardView() override;
    void setConfig(const RunConfig &config, bool valid);
    void setSteps(int measuredSteps, int warmupSteps);
    bool isRunning() const;
    RunCharts *charts() const { return m_charts; }
    // The verdict of the last finished run ("" before any, "error" when it threw).
    const QString &lastVerdict() const { return m_lastVerdict; }
    int64_t lastRunId() const { return m_lastRunId; }
    // The longest drain-and-update of one frame in the current or last run (painting excluded).
    double longestFrameMs() const { return m_longestFrameMs; }

public Q_SLOTS:
    bool startPilot();
    void cancelPilot();

Q_SIGNALS:
    void runStarted(qint64 runId);
    void runFinished(qint64 runId);
    void statusMessage(const QString &message);

private:
    void drain();
    void updateFigures();
    void onFinished(qint64 runId, const PilotSummary &summary, const QString &historyError);
    void onFailed(const QString &message);
    void setRunningUi(bool running);

    QString m_databasePath;
    RunConfig m_config;
    bool m_configValid = false;
    std::unique_ptr<SampleBuffer> m_buffer;
    PilotController *m_controller = nullptr;
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
