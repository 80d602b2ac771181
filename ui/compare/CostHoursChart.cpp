#include "compare/CostHoursChart.h"

#include "compare/HoursText.h"
#include "report/ReportCostChart.h"

#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QGraphicsLayout>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace pb::ui {
namespace {

QString qs(const std::string &s) { return QString::fromStdString(s); }

void styleAxis(QAbstractAxis *axis, const QString &title)
{
    axis->setTitleText(title);
    // As the run charts: a little smaller than the labels so the y title fits a short chart.
    QFont font = axis->titleFont();
    font.setPointSizeF(font.pointSizeF() * 0.85);
    axis->setTitleFont(font);
}

QAbstractAxis *makeAxis(const CostHoursAxis &a)
{
    if (a.log) {
        auto *axis = new QLogValueAxis;
        axis->setBase(10);
        axis->setLabelFormat(QStringLiteral("%g"));
        axis->setMinorTickCount(8); // 2 to 9 times each decade
        axis->setMinorGridLinePen(QPen(QColor(235, 235, 235), 0.5));
        axis->setRange(a.min, a.max);
        styleAxis(axis, a.title);
        return axis;
    }
    auto *axis = new QValueAxis;
    axis->setLabelFormat(QStringLiteral("%.6g"));
    axis->setRange(a.min, a.max);
    axis->setTickCount(static_cast<int>(std::lround((a.max - a.min) / a.step)) + 1);
    styleAxis(axis, a.title);
    return axis;
}

} // namespace

CostHoursChart::CostHoursChart(QWidget *parent) : QWidget(parent)
{
    auto *chart = new QChart;
    chart->setTitle(tr("Cost per million useful tokens against job time"));
    chart->setAnimationOptions(QChart::NoAnimation);
    // Ten cards do not fit under the plot in one line: a column beside it names every one.
    chart->legend()->setAlignment(Qt::AlignRight);
    QFont legendFont = chart->legend()->font();
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.85);
    chart->legend()->setFont(legendFont);
    chart->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries); // the ring reads as a ring, the deadline as a line
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    chart->setMargins(QMargins(4, 2, 4, 2));
    QFont titleFont = chart->titleFont();
    titleFont.setBold(true);
    chart->setTitleFont(titleFont);
    m_view = new QChartView(chart, this);
    m_view->setObjectName(QStringLiteral("costHoursChart"));
    m_view->setRenderHint(QPainter::Antialiasing);
    // Short enough that a 960 x 560 Compare tab keeps ten card tiles whole above it.
    m_view->setMinimumSize(320, 120);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_view);
    connect(chart, &QChart::plotAreaChanged, this, &CostHoursChart::placeRecommendedLabel);
}

QChart *CostHoursChart::chart() const { return m_view->chart(); }

void CostHoursChart::clear()
{
    QChart *c = chart();
    delete m_recommendedLabel;
    m_recommendedLabel = nullptr;
    m_ring = nullptr;
    c->removeAllSeries();
    for (QAbstractAxis *axis : c->axes()) {
        // Its drawn items go only with the next pass of the event loop (deleteLater), and the title
        // and labels are not children of the hidden axis item: hidden here, they cannot linger
        // under the next axis in a grab() taken before that pass.
        axis->setVisible(false);
        c->removeAxis(axis); // hands the axis back to us
        delete axis;
    }
}

QString CostHoursChart::pointToolTip(const ComparisonRow &row, const std::string &currency)
{
    const QString money = qs(currency);
    QString text = tr("%1 \u00d7%2").arg(qs(row.cardName.empty() ? row.cardId : row.cardName)).arg(row.gpus);
    text += row.strategy == ParallelStrategy::None ? tr("\nsingle GPU") : tr("\nstrategy: %1").arg(QString::fromLatin1(toString(row.strategy)));
    text += tr("\njob: %1, rental window: %2").arg(hoursText(row.cost.jobHours), hoursText(row.cost.windowHours));
    text += tr("\ntotal: %1 %2").arg(row.cost.totalCost, 0, 'f', 2).arg(money);
    text += tr("\nper M useful tokens: %1 %2").arg(row.cost.costPerMillionTokens, 0, 'f', 2).arg(money);
    if (row.recommended)
        text += tr("\nrecommended");
    else if (!row.meetsDeadline)
        text += tr("\nmisses the deadline");
    return text;
}

void CostHoursChart::setComparison(const Comparison &comparison)
{
    clear();
    const CostHoursPlot plot = costHoursPlot(comparison);
    QChart *c = chart();
    QAbstractAxis *x = makeAxis(plot.x);
    QAbstractAxis *y = makeAxis(plot.y);
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);

    // Each point's tooltip, in the series' point order; the hovered point is found by position.
    auto addHover = [this](QScatterSeries *series, const QStringList &tips) {
        connect(series, &QScatterSeries::hovered, this, [this, series, tips](const QPointF &point, bool state) {
            if (!state) {
                QToolTip::hideText();
                return;
            }
            const QList<QPointF> points = series->points();
            int nearest = -1;
            double best = HUGE_VAL;
            for (int i = 0; i < points.size() && i < tips.size(); ++i) {
                const QPointF d = points[i] - point;
                const double distance = d.x() * d.x() + d.y() * d.y();
                if (distance < best) {
                    best = distance;
                    nearest = i;
                }
            }
            if (nearest >= 0)
                QToolTip::showText(QCursor::pos(), tips[nearest], m_view);
        });
    };
    auto attach = [&](QAbstractSeries *series) {
        c->addSeries(series);
        series->attachAxis(x);
        series->attachAxis(y);
    };

    for (const CostHoursCard &card : plot.cards) {
        auto *series = new QScatterSeries;
        series->setObjectName(QStringLiteral("card:") + card.cardId);
        series->setName(shortCardName(card.name)); // the legend shares the width with the plot
        series->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        series->setMarkerSize(9);
        series->setColor(card.color);
        series->setBorderColor(card.color.darker(140));
        QStringList tips;
        for (const CostHoursPoint &p : card.points) {
            series->append(plot.xOf(p.jobHours), p.costPerMillionTokens);
            tips << pointToolTip(comparison.rows[static_cast<size_t>(p.row)], comparison.currency);
        }
        attach(series);
        addHover(series, tips);
    }

    // Added after the cards so the ring draws over its card's marker; hollow, so that marker shows.
    if (const CostHoursPoint *best = plot.recommendedPoint()) {
        auto *ring = new QScatterSeries;
        ring->setObjectName(QStringLiteral("recommended"));
        ring->setName(tr("recommended"));
        ring->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        ring->setMarkerSize(22);
        ring->setBrush(Qt::NoBrush);
        ring->setPen(QPen(costHoursRecommendedColor(), 2.5));
        ring->append(plot.xOf(best->jobHours), best->costPerMillionTokens);
        attach(ring);
        m_ring = ring;
        // Not the series' point label: Qt centres that over the point, so beside the plot's edge it
        // ran out of the chart; this one is moved back inside the plot area (placeRecommendedLabel).
        m_recommendedTexts = {tr("recommended: %1").arg(best->label), tr("recommended\n%1").arg(best->label), tr("recommended")};
        m_recommendedLabel = new QGraphicsSimpleTextItem(m_recommendedTexts.front(), c);
        m_recommendedLabel->setBrush(costHoursRecommendedColor());
        QFont font = c->font();
        font.setBold(true);
        m_recommendedLabel->setFont(font);
        m_recommendedLabel->setZValue(10); // over the markers and the grid
        // The ring is labelled on the plot; a legend entry for it would push a card's out.
        for (QLegendMarker *marker : c->legend()->markers(ring))
            marker->setVisible(false);
        addHover(ring, {pointToolTip(comparison.rows[static_cast<size_t>(best->row)], comparison.currency)});
    }

    if (plot.deadlineHours) {
        auto *line = new QLineSeries;
        line->setObjectName(QStringLiteral("deadline"));
        line->setName(tr("deadline (%1)").arg(hoursText(*plot.deadlineHours)));
        line->setPen(QPen(costHoursDeadlineColor(), 1.5, Qt::DashLine));
        line->append(plot.xOf(*plot.deadlineHours), plot.y.min);
        line->append(plot.xOf(*plot.deadlineHours), plot.y.max);
        attach(line);
    }
    applyLegend();
    placeRecommendedLabel();
}

void CostHoursChart::placeRecommendedLabel()
{
    if (!m_recommendedLabel || !m_ring || m_ring->count() == 0)
        return;
    QChart *c = chart();
    const QRectF area = c->plotArea();
    const QPointF at = c->mapToPosition(m_ring->at(0), m_ring);
    // As the report does: on one line, else on two, else the bare word, whichever fits the width.
    for (const QString &text : m_recommendedTexts) {
        m_recommendedLabel->setText(text);
        if (m_recommendedLabel->boundingRect().width() <= area.width())
            break;
    }
    const QSizeF size = m_recommendedLabel->boundingRect().size();
    const double gap = m_ring->markerSize() / 2 + 2;
    // Above the ring, centred, as Qt placed it; below where the top is too near; then slid sideways
    // and clamped so that the whole text stays in the plot.
    double y = at.y() - gap - size.height();
    if (y < area.top())
        y = at.y() + gap;
    const double x = std::clamp(at.x() - size.width() / 2, area.left(), std::max(area.left(), area.right() - size.width()));
    y = std::clamp(y, area.top(), std::max(area.top(), area.bottom() - size.height()));
    m_recommendedLabel->setPos(x, y);
}

void CostHoursChart::setCardLegendVisible(bool visible)
{
    m_cardLegend = visible;
    applyLegend();
}

void CostHoursChart::applyLegend()
{
    QChart *c = chart();
    // From the series, not the markers: a marker reads as hidden while its legend is.
    bool cards = false, deadline = false;
    for (QAbstractSeries *series : c->series()) {
        cards = cards || series->objectName().startsWith(QLatin1String("card:"));
        deadline = deadline || series->objectName() == QLatin1String("deadline");
    }
    // An empty legend would still take its column from the plot.
    c->legend()->setVisible((cards && m_cardLegend) || deadline);
    for (QAbstractSeries *series : c->series())
        if (series->objectName().startsWith(QLatin1String("card:")))
            for (QLegendMarker *marker : c->legend()->markers(series))
                marker->setVisible(m_cardLegend);
}

} // namespace pb::ui
