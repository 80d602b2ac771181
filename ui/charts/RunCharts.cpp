#include "charts/RunCharts.h"

#include "charts/Lttb.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QLegendMarker>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace pb::ui {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kHistogramBins = 40;

QChartView *makeView(const QString &title, QWidget *parent)
{
    auto *chart = new QChart;
    chart->setTitle(title);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    chart->setMargins(QMargins(4, 2, 4, 2));
    QFont titleFont = chart->titleFont();
    titleFont.setBold(true);
    chart->setTitleFont(titleFont);
    auto *view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(280, 190);
    return view;
}

QValueAxis *makeAxis(QChart *chart, Qt::Alignment alignment, const QString &title)
{
    auto *axis = new QValueAxis;
    axis->setTitleText(title);
    axis->setLabelFormat(QStringLiteral("%.6g"));
    axis->setTickCount(5);
    // A little smaller than the labels' default so "Step time (ms)" fits a short chart's height.
    QFont font = axis->titleFont();
    font.setPointSizeF(font.pointSizeF() * 0.85);
    axis->setTitleFont(font);
    chart->addAxis(axis, alignment);
    return axis;
}

QLineSeries *addLine(QChart *chart, const QString &name, const QColor &color, QValueAxis *x, QValueAxis *y, Qt::PenStyle style = Qt::SolidLine)
{
    auto *series = new QLineSeries;
    series->setName(name);
    QPen pen(color, 1.6, style);
    series->setPen(pen);
    chart->addSeries(series);
    series->attachAxis(x);
    series->attachAxis(y);
    return series;
}

QList<QPointF> downsample(const std::vector<double> &x, const std::vector<double> &y)
{
    return lttb(x.data(), y.data(), std::min(x.size(), y.size()), RunCharts::kMaxPointsPerSeries);
}

// Step axes tick at round step numbers (1, 2 or 5 times a power of ten), about five per axis.
// Range and interval change in the order that never asks the axis for more ticks than either the
// old or the new setting has (a 1,000,000-step range with a 1-step interval would be a million).
void setStepRange(QValueAxis *axis, double lo, double hi)
{
    const double raw = std::max(1.0, (hi - lo) / 5.0);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 10.0 * magnitude;
    for (double m : {1.0, 2.0, 5.0})
        if (m * magnitude >= raw) {
            step = m * magnitude;
            break;
        }
    if (axis->tickType() == QValueAxis::TicksDynamic && axis->min() == lo && axis->max() == hi && axis->tickInterval() == step)
        return;
    if (axis->tickType() != QValueAxis::TicksDynamic) {
        axis->setRange(lo, hi);
        axis->setTickAnchor(0);
        axis->setTickInterval(step);
        axis->setLabelFormat(QStringLiteral("%.0f"));
        axis->setTickType(QValueAxis::TicksDynamic);
        return;
    }
    if (step < axis->tickInterval()) {
        axis->setRange(lo, hi);
        axis->setTickInterval(step);
    } else {
        axis->setTickInterval(step);
        axis->setRange(lo, hi);
    }
}

// About five ticks at 1, 2 or 5 times a power of ten, the range widened to whole ticks. The axis is
// touched only when the result differs, so a slowly growing maximum changes it rarely.
void setNiceRange(QValueAxis *axis, double lo, double hi)
{
    if (!(hi > lo))
        hi = lo + 1;
    const double raw = (hi - lo) / 4.0;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 10.0 * magnitude;
    for (double m : {1.0, 2.0, 2.5, 5.0})
        if (m * magnitude >= raw) {
            step = m * magnitude;
            break;
        }
    const double niceLo = std::floor(lo / step) * step;
    const double niceHi = std::ceil(hi / step) * step;
    const int ticks = static_cast<int>(std::lround((niceHi - niceLo) / step)) + 1;
    if (axis->min() != niceLo || axis->max() != niceHi)
        axis->setRange(niceLo, niceHi);
    if (axis->tickCount() != ticks)
        axis->setTickCount(ticks);
}

double nearestRank(std::vector<double> &sorted, double p)
{
    const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    const size_t index = std::clamp<size_t>(rank, 1, sorted.size()) - 1;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(index), sorted.end());
    return sorted[index];
}

} // namespace

RunCharts::RunCharts(QWidget *parent) : QWidget(parent)
{
    m_memoryView = makeView(tr("Memory"), this);
    m_stepTimeView = makeView(tr("Step time"), this);
    m_histogramView = makeView(tr("Step-time distribution (measured steps)"), this);
    m_lossView = makeView(tr("Loss"), this);
    m_memoryView->setObjectName(QStringLiteral("memoryChart"));
    m_stepTimeView->setObjectName(QStringLiteral("stepTimeChart"));
    m_histogramView->setObjectName(QStringLiteral("histogramChart"));
    m_lossView->setObjectName(QStringLiteral("lossChart"));

    QChart *mem = m_memoryView->chart();
    m_memX = makeAxis(mem, Qt::AlignBottom, tr("Step"));
    m_memY = makeAxis(mem, Qt::AlignLeft, tr("Memory (MiB)"));
    m_allocated = addLine(mem, tr("allocated"), QColor(0x4e, 0x79, 0xa7), m_memX, m_memY);
    m_reserved = addLine(mem, tr("reserved"), QColor(0xf2, 0x8e, 0x2b), m_memX, m_memY);
    m_device = addLine(mem, tr("device used (RSS on CPU)"), QColor(0x59, 0xa1, 0x4f), m_memX, m_memY);
    m_memDeviceY = makeAxis(mem, Qt::AlignRight, tr("Device used (MiB)"));
    m_memDeviceY->setLabelsColor(QColor(0x3b, 0x7a, 0x34));
    m_memDeviceY->setVisible(false);
    m_estimate = addLine(mem, tr("estimate (peak)"), QColor(0xc0, 0x30, 0x30), m_memX, m_memY, Qt::DashLine);

    QChart *time = m_stepTimeView->chart();
    m_timeX = makeAxis(time, Qt::AlignBottom, tr("Step"));
    m_timeY = makeAxis(time, Qt::AlignLeft, tr("Step time (ms)"));
    // Phase shading first, so the line draws over it.
    const std::pair<QString, QColor> phases[] {{tr("warm-up"), QColor(255, 200, 80, 70)}, {tr("train"), QColor(120, 180, 255, 45)},
                                               {tr("validation"), QColor(120, 220, 120, 90)}, {tr("checkpoint"), QColor(200, 120, 220, 90)}};
    for (const auto &[name, color] : phases) {
        auto *upper = new QLineSeries(this);
        auto *area = new QAreaSeries(upper);
        area->setName(name);
        area->setBrush(color);
        area->setPen(Qt::NoPen);
        time->addSeries(area);
        area->attachAxis(m_timeX);
        area->attachAxis(m_timeY);
        m_phaseUpper.push_back(upper);
    }
    m_stepTime = addLine(time, tr("step time"), QColor(0x30, 0x30, 0x30), m_timeX, m_timeY);

    QChart *hist = m_histogramView->chart();
    m_histX = makeAxis(hist, Qt::AlignBottom, tr("Step time (ms)"));
    m_histY = makeAxis(hist, Qt::AlignLeft, tr("Steps"));
    m_histY->setLabelFormat(QStringLiteral("%d"));
    m_histUpper = new QLineSeries(this);
    m_histArea = new QAreaSeries(m_histUpper);
    m_histArea->setName(tr("steps per bin"));
    m_histArea->setBrush(QColor(0x4e, 0x79, 0xa7, 150));
    m_histArea->setPen(QPen(QColor(0x4e, 0x79, 0xa7), 1));
    hist->addSeries(m_histArea);
    m_histArea->attachAxis(m_histX);
    m_histArea->attachAxis(m_histY);
    m_p50 = addLine(hist, QStringLiteral("p50"), QColor(0x59, 0xa1, 0x4f), m_histX, m_histY, Qt::DashLine);
    m_p90 = addLine(hist, QStringLiteral("p90"), QColor(0xf2, 0x8e, 0x2b), m_histX, m_histY, Qt::DashLine);
    m_p99 = addLine(hist, QStringLiteral("p99"), QColor(0xc0, 0x30, 0x30), m_histX, m_histY, Qt::DashLine);

    QChart *loss = m_lossView->chart();
    m_lossX = makeAxis(loss, Qt::AlignBottom, tr("Step"));
    m_lossY = makeAxis(loss, Qt::AlignLeft, tr("Loss (nats/token)"));
    m_loss = addLine(loss, tr("training loss"), QColor(0x76, 0x4e, 0xa7), m_lossX, m_lossY);
    loss->legend()->hide();

    auto *grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setSpacing(4);
    grid->addWidget(m_memoryView, 0, 0);
    grid->addWidget(m_stepTimeView, 0, 1);
    grid->addWidget(m_histogramView, 1, 0);
    grid->addWidget(m_lossView, 1, 1);
    clear();
}

void RunCharts::clear()
{
    for (auto *v : {&m_step, &m_stepMs, &m_allocMiB, &m_reservedMiB, &m_deviceMiB, &m_lossValues, &m_measuredMs})
        v->clear();
    m_spans.clear();
    m_maxMemoryMiB = m_maxDeviceMiB = m_maxStepMs = m_minLoss = m_maxLoss = 0;
    m_lossKnown = false;
    m_plannedLastStep = 0;
    m_dirty = true;
    refresh();
}

void RunCharts::addSpan(Phase phase, double step)
{
    if (!m_spans.empty() && m_spans.back().phase == phase && step - m_spans.back().toStep <= 1.0) {
        m_spans.back().toStep = step;
        return;
    }
    m_spans.push_back({phase, step, step});
}

// A step without a reported loss (NaN: a watched job logs every k steps) keeps the last one, so
// the line neither drops to 0 nor breaks; the axis spans only reported losses.
double RunCharts::chartLoss(double loss)
{
    if (!std::isfinite(loss))
        return m_lossValues.empty() ? (m_lossKnown ? m_maxLoss : 0.0) : m_lossValues.back();
    if (!m_lossKnown) {
        m_minLoss = m_maxLoss = loss;
        m_lossKnown = true;
    }
    m_minLoss = std::min(m_minLoss, loss);
    m_maxLoss = std::max(m_maxLoss, loss);
    return loss;
}

void RunCharts::appendSamples(const std::vector<StepSample> &samples)
{
    for (const StepSample &s : samples) {
        const double step = static_cast<double>(s.step);
        m_step.push_back(step);
        m_stepMs.push_back(s.stepTimeMs);
        m_allocMiB.push_back(static_cast<double>(s.allocatedBytes) / kMiB);
        m_reservedMiB.push_back(static_cast<double>(s.reservedBytes) / kMiB);
        m_deviceMiB.push_back(static_cast<double>(s.deviceUsedBytes) / kMiB);
        m_lossValues.push_back(chartLoss(s.loss));
        if (s.phase == Phase::Train)
            m_measuredMs.push_back(s.stepTimeMs);
        m_maxStepMs = std::max(m_maxStepMs, s.stepTimeMs);
        m_maxMemoryMiB = std::max({m_maxMemoryMiB, m_allocMiB.back(), m_reservedMiB.back()});
        m_maxDeviceMiB = std::max(m_maxDeviceMiB, m_deviceMiB.back());
        addSpan(s.phase, step);
    }
    if (!samples.empty())
        m_dirty = true;
}

void RunCharts::appendPhases(const std::vector<PhaseMark> &marks)
{
    for (const PhaseMark &m : marks) {
        // Warm-up and train spans come from the samples themselves; validation and checkpoint
        // happen between steps and have no samples of their own.
        if (m.phase == Phase::Validation || m.phase == Phase::Checkpoint) {
            m_spans.push_back({m.phase, static_cast<double>(m.step), static_cast<double>(m.step)});
            m_dirty = true;
        }
    }
}

void RunCharts::setRun(const SampleSeries &series, const std::vector<PhaseMark> &marks)
{
    for (auto *v : {&m_step, &m_stepMs, &m_allocMiB, &m_reservedMiB, &m_deviceMiB, &m_lossValues, &m_measuredMs})
        v->clear();
    m_spans.clear();
    m_plannedLastStep = 0;
    m_minLoss = m_maxLoss = 0;
    const size_t n = series.size();
    m_step = series.step;
    m_stepMs = series.stepTimeMs;
    m_lossValues.clear();
    m_lossKnown = false;
    for (double loss : series.loss)
        m_lossValues.push_back(chartLoss(loss));
    m_allocMiB.resize(n);
    m_reservedMiB.resize(n);
    m_deviceMiB.resize(n);
    m_measuredMs.reserve(n);
    m_maxMemoryMiB = m_maxDeviceMiB = m_maxStepMs = 0;

    for (size_t i = 0; i < n; ++i) {
        m_allocMiB[i] = series.allocatedBytes[i] / kMiB;
        m_reservedMiB[i] = series.reservedBytes[i] / kMiB;
        m_deviceMiB[i] = series.deviceUsedBytes[i] / kMiB;
        m_maxMemoryMiB = std::max({m_maxMemoryMiB, m_allocMiB[i], m_reservedMiB[i]});
        m_maxDeviceMiB = std::max(m_maxDeviceMiB, m_deviceMiB[i]);
        m_maxStepMs = std::max(m_maxStepMs, m_stepMs[i]);
        const Phase phase = i < series.phase.size() ? series.phase[i] : Phase::Train;
        if (phase == Phase::Train)
            m_measuredMs.push_back(m_stepMs[i]);
        addSpan(phase, m_step[i]);
    }
    appendPhases(marks);
    m_dirty = true;
    refresh();
}

void RunCharts::setEstimateBytes(std::optional<int64_t> bytes)
{
    m_estimateMiB = bytes ? std::optional<double>(static_cast<double>(*bytes) / kMiB) : std::nullopt;
    m_dirty = true;
}

void RunCharts::refresh(bool everything)
{
    if (!m_dirty)
        return;
    // A light refresh leaves the loss and the histogram (and the flag) for the next full one.
    m_dirty = !everything;
    const double x0 = m_step.empty() ? 0 : m_step.front();
    const double x1 = std::max(m_step.empty() ? 1 : std::max(m_step.back(), x0 + 1), static_cast<double>(m_plannedLastStep));

    // Ranges before points, and only when they change: Qt Charts re-strokes every series of a chart
    // on each range change, which is what a frame costs once the series are long.
    setStepRange(m_memX, x0, x1);
    const double tensors = std::max(m_maxMemoryMiB, m_estimateMiB.value_or(0));
    const bool ownAxis = m_maxDeviceMiB > 10 * tensors && tensors > 0;
    if (ownAxis != deviceOnOwnAxis()) {
        m_device->detachAxis(ownAxis ? m_memY : m_memDeviceY);
        m_device->attachAxis(ownAxis ? m_memDeviceY : m_memY);
        m_memDeviceY->setVisible(ownAxis);
        m_memY->setTitleText(ownAxis ? tr("Tensors (MiB)") : tr("Memory (MiB)"));
    }
    setNiceRange(m_memY, 0, ownAxis ? tensors : std::max(tensors, m_maxDeviceMiB));
    if (ownAxis)
        setNiceRange(m_memDeviceY, 0, m_maxDeviceMiB);
    m_allocated->replace(downsample(m_step, m_allocMiB));
    m_reserved->replace(downsample(m_step, m_reservedMiB));
    m_device->replace(downsample(m_step, m_deviceMiB));
    const QList<QPointF> estimate = m_estimateMiB ? QList<QPointF> {QPointF(x0, *m_estimateMiB), QPointF(x1, *m_estimateMiB)} : QList<QPointF> {};
    if (m_estimate->points() != estimate)
        m_estimate->replace(estimate);

    setStepRange(m_timeX, x0 - 0.5, x1 + 0.5);
    setNiceRange(m_timeY, 0, m_maxStepMs);
    m_stepTime->replace(downsample(m_step, m_stepMs));
    refreshPhases(m_timeY->max());
    if (!everything)
        return;
    setStepRange(m_lossX, x0, x1);
    const double pad = std::max(1e-3, (m_maxLoss - m_minLoss) * 0.05);
    setNiceRange(m_lossY, m_lossKnown ? m_minLoss - pad : 0, m_lossKnown ? m_maxLoss + pad : 1);
    m_loss->replace(downsample(m_step, m_lossValues));

    refreshHistogram();
}

void RunCharts::refreshPhases(double yMax)
{
    std::vector<QList<QPointF>> points(m_phaseUpper.size());
    for (const PhaseSpan &span : m_spans) {
        int index = -1;
        switch (span.phase) {
        case Phase::Warmup: index = 0; break;
        case Phase::Train: index = 1; break;
        case Phase::Validation: index = 2; break;
        case Phase::Checkpoint: index = 3; break;
        default: break;
        }
        if (index < 0)
            continue;
        auto &p = points[static_cast<size_t>(index)];
        const double a = span.fromStep - 0.5, b = span.toStep + 0.5;
        p << QPointF(a, 0) << QPointF(a, yMax) << QPointF(b, yMax) << QPointF(b, 0);
    }
    for (size_t i = 0; i < m_phaseUpper.size(); ++i)
        m_phaseUpper[i]->replace(points[i]);
}

void RunCharts::refreshHistogram()
{
    QList<QPointF> outline;
    if (m_measuredMs.empty()) {
        m_histUpper->replace(outline);
        for (auto *s : {m_p50, m_p90, m_p99})
            s->clear();
        m_histogramView->chart()->setTitle(tr("Step-time distribution (measured steps)"));
        setNiceRange(m_histX, 0, 1);
        setNiceRange(m_histY, 0, 4); // whole steps: four ticks of one
        m_percentileMs = {0, 0, 0};
        return;
    }
    const auto [minIt, maxIt] = std::minmax_element(m_measuredMs.begin(), m_measuredMs.end());
    double lo = *minIt, hi = *maxIt;
    if (hi - lo < 1e-9) {
        lo -= 0.5;
        hi += 0.5;
    }
    const double width = (hi - lo) / kHistogramBins;
    std::vector<int64_t> bins(kHistogramBins, 0);
    for (double v : m_measuredMs)
        ++bins[static_cast<size_t>(std::clamp(static_cast<int>((v - lo) / width), 0, kHistogramBins - 1))];
    int64_t most = 0;
    outline << QPointF(lo, 0);
    for (int i = 0; i < kHistogramBins; ++i) {
        const double a = lo + i * width, b = a + width;
        const auto count = static_cast<double>(bins[static_cast<size_t>(i)]);
        outline << QPointF(a, count) << QPointF(b, count);
        most = std::max(most, bins[static_cast<size_t>(i)]);
    }
    outline << QPointF(hi, 0);
    setNiceRange(m_histX, lo - width, hi + width);
    setNiceRange(m_histY, 0, std::max(4.0, static_cast<double>(most) * 1.1)); // never fractional steps
    m_histUpper->replace(outline);
    const double yMax = m_histY->max();

    std::vector<double> work = m_measuredMs;
    // The values go to the chart's title, not the legend: a legend that changes text re-lays out the
    // whole chart, several times a second on the live dashboard.
    const std::pair<QLineSeries *, double> marks[] {{m_p50, 50}, {m_p90, 90}, {m_p99, 99}};
    QStringList values;
    size_t k = 0;
    for (const auto &[series, p] : marks) {
        const double v = nearestRank(work, p);
        m_percentileMs[k++] = v;
        values << QString::number(v, 'f', v < 10 ? 2 : 1);
        series->replace({QPointF(v, 0), QPointF(v, yMax)});
    }
    m_histogramView->chart()->setTitle(tr("Step-time distribution: p50 %1 · p90 %2 · p99 %3 ms").arg(values[0], values[1], values[2]));
}

void RunCharts::setAntialiasing(bool on)
{
    for (QChartView *view : {m_memoryView, m_stepTimeView, m_histogramView, m_lossView})
        view->setRenderHint(QPainter::Antialiasing, on);
}

bool RunCharts::deviceOnOwnAxis() const { return m_memDeviceY->isVisible(); }

} // namespace pb::ui
