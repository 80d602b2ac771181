#pragma once
// The four charts of one run: memory over steps (allocated, reserved, device used, the estimate
// dashed), step time over steps with its phases shaded, the step-time histogram with p50/p90/p99,
// and the loss. Holds every sample in columns and shows an LTTB-downsampled view of them, so a
// 1,000,000-step run redraws as quickly as a short one. Used live by the dashboard and for a
// stored run by the history.
#include "result/PilotTypes.h"
#include "history/HistoryTypes.h"

#include <QWidget>

#include <array>
#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace pb::ui {

struct PhaseSpan {
    Phase phase = Phase::Train;
    double fromStep = 0;
    double toStep = 0;
};

class RunCharts final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RunCharts)
public:
    static constexpr size_t kMaxPointsPerSeries = 2000;

    explicit RunCharts(QWidget *parent = nullptr);
    void clear();
    void appendSamples(const std::vector<StepSample> &samples);
    void appendPhases(const std::vector<PhaseMark> &marks);
    // Replaces everything with a stored run and redraws.
    void setRun(const SampleSeries &series, const std::vector<PhaseMark> &marks);
    void setEstimateBytes(std::optional<int64_t> bytes);
    // The last step a live run will reach: the step axes span it from the start, so they do not
    // change (and re-stroke every series) with each new step. 0: the data's own extent.
    void setPlannedLastStep(int64_t step) { m_plannedLastStep = step; m_dirty = true; }
    // Redraws from the columns when something changed since the last refresh. A light refresh
    // (everything = false) redraws memory and step time only: the live dashboard's in-between frames.
    void refresh(bool everything = true);

    // Off on the live dashboard: aliased lines paint several times faster while the engine competes
    // for the CPU; stored runs keep the smoother look.
    void setAntialiasing(bool on);
    size_t sampleCount() const { return m_step.size(); }
    // p50, p90, p99 of the measured steps as last drawn (nearest rank, as the engine reports them).
    const std::array<double, 3> &percentilesMs() const { return m_percentileMs; }
    const std::vector<double> &measuredStepTimesMs() const { return m_measuredMs; }
    QLineSeries *stepTimeSeries() const { return m_stepTime; }
    QLineSeries *allocatedSeries() const { return m_allocated; }
    QLineSeries *lossSeries() const { return m_loss; }
    QChartView *memoryView() const { return m_memoryView; }
    // Whether "device used" has its own (right) axis: it is over ten times the tensors' peak.
    bool deviceOnOwnAxis() const;
    QChartView *stepTimeView() const { return m_stepTimeView; }
    QChartView *histogramView() const { return m_histogramView; }
    QChartView *lossView() const { return m_lossView; }

private:
    void addSpan(Phase phase, double step);
    void refreshHistogram();
    void refreshPhases(double yMax);

    double chartLoss(double loss);
    std::vector<double> m_step, m_stepMs, m_allocMiB, m_reservedMiB, m_deviceMiB, m_lossValues;
    bool m_lossKnown = false;
    std::vector<double> m_measuredMs; // train-phase steps only: the statistics' population
    std::vector<PhaseSpan> m_spans;
    // Tensors (allocated, reserved) and the device's or process's use apart: a CPU pilot's 6 MiB of
    // tensors under 215 MiB of process memory would otherwise be a line on the axis.
    double m_maxMemoryMiB = 0, m_maxDeviceMiB = 0, m_maxStepMs = 0, m_minLoss = 0, m_maxLoss = 0;
    std::optional<double> m_estimateMiB;
    bool m_dirty = false;
    int64_t m_plannedLastStep = 0;
    std::array<double, 3> m_percentileMs {0, 0, 0};

    QChartView *m_memoryView = nullptr, *m_stepTimeView = nullptr, *m_histogramView = nullptr, *m_lossView = nullptr;
    QLineSeries *m_allocated = nullptr, *m_reserved = nullptr, *m_device = nullptr, *m_estimate = nullptr;
    QLineSeries *m_stepTime = nullptr, *m_loss = nullptr;
    QLineSeries *m_histUpper = nullptr;
    QAreaSeries *m_histArea = nullptr;
    QLineSeries *m_p50 = nullptr, *m_p90 = nullptr, *m_p99 = nullptr;
    std::vector<QLineSeries *> m_phaseUpper;  // Warmup, Train, Validation, Checkpoint
    QValueAxis *m_memX = nullptr, *m_memY = nullptr, *m_timeX = nullptr, *m_timeY = nullptr;
    QValueAxis *m_memDeviceY = nullptr;       // the right axis "device used" moves to when it dwarfs the tensors
    QValueAxis *m_histX = nullptr, *m_histY = nullptr, *m_lossX = nullptr, *m_lossY = nullptr;
};

} // namespace pb::ui
