#include "history/OverlayCharts.h"

#include "charts/Lttb.h"
#include "charts/RunCharts.h"

#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>

namespace pb::ui {
namespace {

QChartView *makeView(const QString &title, QWidget *parent)
{
    auto *chart = new QChart;
    chart->setTitle(title);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    auto *view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(300, 200);
    return view;
}

void fill(QChart *chart, const std::vector<SampleSeries> &curves, const QStringList &names, int64_t baseline, const QString &yTitle,
          const std::vector<double> SampleSeries::*column, double scale)
{
    chart->removeAllSeries();
    for (QAbstractAxis *axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
    auto *x = new QValueAxis;
    x->setTitleText(RunCharts::tr("Step"));
    x->setLabelFormat(QStringLiteral("%.6g"));
    auto *y = new QValueAxis;
    y->setTitleText(yTitle);
    y->setLabelFormat(QStringLiteral("%.6g"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    double xMax = 1, yMax = 0;
    for (size_t i = 0; i < curves.size(); ++i) {
        const SampleSeries &c = curves[i];
        const std::vector<double> &values = c.*column;
        std::vector<double> scaled(values.size());
        for (size_t k = 0; k < values.size(); ++k) {
            scaled[k] = values[k] / scale;
            yMax = std::max(yMax, scaled[k]);
        }
        if (!c.step.empty())
            xMax = std::max(xMax, c.step.back());
        auto *series = new QLineSeries;
        series->setName(i < static_cast<size_t>(names.size()) ? names[static_cast<qsizetype>(i)] : QString::number(c.runId));
        series->replace(lttb(c.step.data(), scaled.data(), std::min(c.step.size(), scaled.size()), RunCharts::kMaxPointsPerSeries));
        chart->addSeries(series);
        series->attachAxis(x);
        series->attachAxis(y);
        QPen pen = series->pen();
        pen.setWidthF(c.runId == baseline ? 3.0 : 1.5);
        series->setPen(pen);
    }
    x->setRange(0, xMax);
    x->applyNiceNumbers();
    y->setRange(0, yMax > 0 ? yMax * 1.1 : 1);
    y->applyNiceNumbers();
}

} // namespace

OverlayCharts::OverlayCharts(QWidget *parent) : QWidget(parent)
{
    m_stepTime = makeView(tr("Step time, overlaid"), this);
    m_memory = makeView(tr("Peak allocated memory per step, overlaid"), this);
    m_stepTime->setObjectName(QStringLiteral("overlayStepTime"));
    m_memory->setObjectName(QStringLiteral("overlayMemory"));
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_stepTime);
    layout->addWidget(m_memory);
}

void OverlayCharts::setCurves(const std::vector<SampleSeries> &curves, const QStringList &names, int64_t baselineRunId)
{
    fill(m_stepTime->chart(), curves, names, baselineRunId, tr("Step time (ms)"), &SampleSeries::stepTimeMs, 1.0);
    // The step's peak, not the end-of-step figure: the peak is what decides whether a card fits.
    fill(m_memory->chart(), curves, names, baselineRunId, tr("Peak allocated (MiB)"), &SampleSeries::peakAllocatedBytes, 1024.0 * 1024.0);
}

int OverlayCharts::seriesCount() const
{
    return static_cast<int>(m_stepTime->chart()->series().size());
}

} // namespace pb::ui
