#pragma once
// The term decision as one picture: cost per million useful tokens against job hours for every
// fitting card x count, a colour per card, the recommended configuration ringed and the deadline
// as a dashed vertical line. costHoursPlot() decides what is plotted and where the axes run, so
// the PDF (drawCostHoursChart, QPainter only) and the comparison view (Qt Charts) show the same.
#include "workflow/Decision.h"

#include <QColor>
#include <QRectF>
#include <QString>

#include <optional>
#include <vector>

class QPainter;

namespace pb {

struct CostHoursPoint {
    int row = -1;                        // index into Comparison::rows
    double jobHours = 0;
    double costPerMillionTokens = 0;
    QString label;                       // "H100 ×4 (fsdp)"
    QString shortLabel;                  // "×4 fsdp": where the colour already names the card
    bool recommended = false;
};

struct CostHoursCard {
    QString cardId;
    QString name;                        // as the legend shows it
    QColor color;
    std::vector<CostHoursPoint> points;  // fitting rows only; empty when no count fits
};

struct CostHoursAxis {
    double min = 0;
    double max = 1;
    double step = 1;                     // tick interval (linear); unused on a log axis
    bool log = false;                    // base 10, min and max whole decades
    QString title;
};

struct CostHoursPlot {
    std::vector<CostHoursCard> cards;    // in the comparison's card order
    std::optional<double> deadlineHours;
    // The x axis reads in the unit the jobs run for (seconds, minutes, hours or days): x.min,
    // x.max and the ticks are in it; xOf() takes a point's or the deadline's hours there.
    double xPerHour = 1;
    double xOf(double hours) const { return hours * xPerHour; }
    CostHoursAxis x;                     // job time in that unit
    CostHoursAxis y;                     // cost per million useful tokens
    size_t pointCount() const;
    const CostHoursPoint *recommendedPoint() const;  // null when nothing plotted is recommended
};

// The job-hours axis turns logarithmic when the plotted hours span more than this factor.
constexpr double kCostHoursLogSpan = 20.0;

// Stable per card (by first appearance in the rows), never the recommended colour.
QColor costHoursCardColor(int cardIndex);
QColor costHoursRecommendedColor();
QColor costHoursDeadlineColor();
// "H100 SXM 80GB" without vendor, memory size and form factor words: "H100".
QString shortCardName(const QString &cardName);

CostHoursPlot costHoursPlot(const Comparison &comparison);

// Title, axes, points, labels where they fit without overlap, deadline and legend, inside `area`
// (points; about 240 high reads well at the report's width). Draws nothing outside it.
void drawCostHoursChart(QPainter &painter, const QRectF &area, const Comparison &comparison);

} // namespace pb
