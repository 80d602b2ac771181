#pragma once
// The comparison as one picture: cost per million useful tokens against job hours for every
// fitting card x count, a series and colour per card, the recommended point ringed and labelled,
// the deadline dashed. Points, colours and axes come from costHoursPlot() (report/ReportCostChart.h),
// so it looks like the PDF report's chart; hovering a point tells its figures.
//
// Use: auto *chart = new CostHoursChart(parent);
//      chart->setComparison(comparison);   // replaces whatever was shown
//      chart->clear();                      // nothing to show (an error)
#include "workflow/Decision.h"

#include <QString>
#include <QStringList>
#include <QWidget>

#include <string>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QGraphicsSimpleTextItem;
class QScatterSeries;
QT_END_NAMESPACE

namespace pb::ui {

class CostHoursChart final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CostHoursChart)
public:
    explicit CostHoursChart(QWidget *parent = nullptr);

    void setComparison(const Comparison &comparison);
    void clear();
    // Whether the legend lists the cards (it always lists the deadline). Off where every card is
    // named beside the chart in its own colour (the Compare tab's tiles): ten cards do not fit a
    // legend column at the chart's height. Kept across setComparison.
    void setCardLegendVisible(bool visible);

    // Series: one QScatterSeries per card (objectName "card:<id>", named as the legend shows the
    // card), then "recommended" (the ring) and "deadline" (a QLineSeries) where there are such.
    QChart *chart() const;
    QChartView *view() const { return m_view; }
    // "recommended: <card x count>" over the ring (on two lines, or the bare word, where the plot is
    // narrower), kept inside the plot area; null when nothing is recommended.
    QGraphicsSimpleTextItem *recommendedLabel() const { return m_recommendedLabel; }
    // What hovering the row's point shows: card, count, strategy, hours, total and cost per M tokens.
    static QString pointToolTip(const ComparisonRow &row, const std::string &currency);

private:
    void applyLegend();
    void placeRecommendedLabel();
    QChartView *m_view = nullptr;
    QScatterSeries *m_ring = nullptr;
    QGraphicsSimpleTextItem *m_recommendedLabel = nullptr;
    QStringList m_recommendedTexts; // the label's forms, longest first
    bool m_cardLegend = true;
};

} // namespace pb::ui
