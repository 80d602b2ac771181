#pragma once
// Vector charts for the PDF report, drawn with QPainter lines and text (no raster images): a line
// chart with titled axes, ticks and a legend, and horizontal stacked bars with a value axis.
#include <QColor>
#include <QRectF>
#include <QString>

#include <vector>

class QPainter;

namespace pb::report {

struct ChartSeries {
    QString name;
    std::vector<double> x;
    std::vector<double> y;
    QColor color;
};

// `xTitle` / `yTitle` carry the units ("step", "time (ms)").
void drawLineChart(QPainter &painter, const QRectF &rect, const QString &title, const QString &xTitle, const QString &yTitle,
                   const std::vector<ChartSeries> &series);

struct BarSegment {
    QString name;
    double value = 0;
    QColor color;
};

struct StackedBar {
    QString label;
    std::vector<BarSegment> segments;
};

// One horizontal bar per entry, segments left to right; a legend of the segment names below.
void drawStackedBars(QPainter &painter, const QRectF &rect, const QString &title, const QString &valueTitle,
                     const std::vector<StackedBar> &bars);

// Round tick spacing (1, 2, 2.5 or 5 times a power of ten) for about `ticks` intervals over `range`.
double niceTickStep(double range, int ticks);

} // namespace pb::report
