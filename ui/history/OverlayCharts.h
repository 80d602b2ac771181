#pragma once
// Several runs' curves on shared axes: step time and each step's peak allocated memory, one colour per
// run, each downsampled (LTTB) so long runs overlay as quickly as short ones.
#include "history/HistoryTypes.h"

#include <QStringList>
#include <QWidget>

#include <vector>

QT_BEGIN_NAMESPACE
class QChartView;
QT_END_NAMESPACE

namespace pb::ui {

class OverlayCharts final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(OverlayCharts)
public:
    explicit OverlayCharts(QWidget *parent = nullptr);
    // `names[i]` labels `curves[i]`; a baseline run (if any) is drawn thicker.
    void setCurves(const std::vector<SampleSeries> &curves, const QStringList &names, int64_t baselineRunId = 0);
    int seriesCount() const;
    QChartView *stepTimeView() const { return m_stepTime; }
    QChartView *memoryView() const { return m_memory; }

private:
    QChartView *m_stepTime = nullptr;
    QChartView *m_memory = nullptr;
};

} // namespace pb::ui
