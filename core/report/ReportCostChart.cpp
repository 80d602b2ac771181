#include "report/ReportCostChart.h"

#include "report/ReportCanvas.h"
#include "report/ReportCharts.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QRegularExpression>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace pb {
namespace {

QString qs(const std::string &s) { return QString::fromStdString(s); }

const QChar kTimes(0x00D7);

bool plottable(const ComparisonRow &r)
{
    return r.fits && std::isfinite(r.cost.jobHours) && r.cost.jobHours > 0 && std::isfinite(r.cost.costPerMillionTokens)
           && r.cost.costPerMillionTokens >= 0;
}

QString strategySuffix(ParallelStrategy s, const QString &open, const QString &close)
{
    return s == ParallelStrategy::None ? QString() : open + QString::fromLatin1(toString(s)) + close;
}

// From zero unless the data sits far above it (as the report's line charts do), padded so a marker
// on the extreme value is not cut by the frame, widened to whole ticks.
CostHoursAxis linearAxis(double lo, double hi, int ticks)
{
    CostHoursAxis a;
    if (!(hi > 0))
        hi = 1;
    if (lo > 0 && lo < 0.5 * hi)
        lo = 0;
    const double pad = hi > lo ? 0.05 * (hi - lo) : std::abs(hi) * 0.1;
    if (lo != 0)
        lo -= pad;
    hi += pad;
    a.step = report::niceTickStep(hi - lo, ticks);
    a.min = std::floor(lo / a.step) * a.step;
    a.max = std::ceil(hi / a.step) * a.step;
    return a;
}

CostHoursAxis logAxis(double lo, double hi)
{
    CostHoursAxis a;
    a.log = true;
    a.min = std::pow(10.0, std::floor(std::log10(lo / 1.1)));
    a.max = std::pow(10.0, std::ceil(std::log10(hi * 1.1)));
    return a;
}

// Decades, and 2 and 5 times them while there are few decades (else the axis would carry one label).
std::vector<double> ticksOf(const CostHoursAxis &a)
{
    std::vector<double> out;
    if (a.log) {
        const int decades = static_cast<int>(std::lround(std::log10(a.max / a.min)));
        const std::vector<double> multiples = decades <= 2 ? std::vector<double> {1, 2, 5} : std::vector<double> {1};
        for (int e = 0; e <= decades; ++e) {
            for (double m : multiples) {
                const double v = a.min * std::pow(10.0, e) * m;
                if (v <= a.max * (1 + 1e-9))
                    out.push_back(v);
            }
        }
        return out;
    }
    for (double v = a.min; v <= a.max + a.step * 1e-6; v += a.step)
        out.push_back(v);
    return out;
}

QString tickText(const CostHoursAxis &a, double v)
{
    if (a.log)
        return v >= 1 ? QString::number(v, 'f', 0) : QString::number(v, 'g', 2);
    if (a.step < 1e-3) // a job of seconds: fixed decimals would all read 0.0000
        return QString::number(v, 'g', 3);
    const int decimals = a.step >= 1 ? 0 : std::min(4, static_cast<int>(std::ceil(-std::log10(a.step))));
    return QString::number(v, 'f', decimals);
}

QString hoursText(double h)
{
    return QString::number(h, h >= 10 ? 'f' : 'g', h >= 10 ? 0 : 2) + QStringLiteral(" h");
}

enum class LegendMark { Dot, Ring, Dash };

struct LegendItem {
    QString text;
    QColor color;
    LegendMark mark = LegendMark::Dot;
};

constexpr double kLegendLine = 12;

// Left to right, wrapping at `right`; returns the number of lines, draws them when `painter` is set.
int layoutLegend(const std::vector<LegendItem> &items, const QFontMetricsF &fm, double left, double top, double right, QPainter *painter)
{
    double x = left;
    int lines = items.empty() ? 0 : 1;
    for (const auto &item : items) {
        const double w = 16 + fm.horizontalAdvance(item.text) + 4;
        if (x > left && x + w > right) {
            x = left;
            ++lines;
        }
        if (painter) {
            const double y = top + (lines - 1) * kLegendLine;
            const QPointF centre(x + 6, y + 5.5);
            switch (item.mark) {
            case LegendMark::Dot:
                painter->setPen(QPen(item.color.darker(140), 0.6));
                painter->setBrush(item.color);
                painter->drawEllipse(centre, 3.2, 3.2);
                break;
            case LegendMark::Ring:
                painter->setPen(QPen(item.color, 1.8));
                painter->setBrush(Qt::NoBrush);
                painter->drawEllipse(centre, 4.5, 4.5);
                break;
            case LegendMark::Dash:
                painter->setPen(QPen(item.color, 1.2, Qt::DashLine));
                painter->drawLine(QPointF(x, centre.y()), QPointF(x + 13, centre.y()));
                break;
            }
            painter->setPen(Qt::black);
            painter->drawText(QRectF(x + 16, y, w - 16, 11), Qt::AlignLeft | Qt::AlignVCenter, item.text);
        }
        x += w + 8;
    }
    return lines;
}

} // namespace

size_t CostHoursPlot::pointCount() const
{
    size_t n = 0;
    for (const auto &c : cards)
        n += c.points.size();
    return n;
}

const CostHoursPoint *CostHoursPlot::recommendedPoint() const
{
    for (const auto &c : cards) {
        for (const auto &p : c.points) {
            if (p.recommended)
                return &p;
        }
    }
    return nullptr;
}

QColor costHoursCardColor(int cardIndex)
{
    // No green (the recommended ring) and no red (the deadline) among them.
    static const QColor palette[] {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xb0, 0x7a, 0xa1), QColor(0x9c, 0x75, 0x5f),
                                   QColor(0x76, 0xb7, 0xb2), QColor(0xed, 0xc9, 0x48), QColor(0xff, 0x9d, 0xa7), QColor(0x79, 0x70, 0x6e),
                                   QColor(0x2f, 0x4b, 0x7c), QColor(0xbc, 0xbd, 0x22), QColor(0x17, 0xbe, 0xcf), QColor(0x6b, 0x4c, 0x9a)};
    const int n = static_cast<int>(std::size(palette));
    return palette[((cardIndex % n) + n) % n];
}

// The comparison view's recommended tile border, so both say "recommended" in the same colour.
QColor costHoursRecommendedColor() { return QColor(0x3a, 0x8a, 0x3a); }

QColor costHoursDeadlineColor() { return QColor(0xc0, 0x30, 0x30); }

QString shortCardName(const QString &cardName)
{
    static const QRegularExpression dropped(QStringLiteral("^(nvidia|amd|intel|instinct|google|habana|\\d+(\\.\\d+)?\\s*(gb|gib|tb)|sxm\\d*|pcie|oam|blackwell|server|edition)$"),
                                            QRegularExpression::CaseInsensitiveOption);
    QStringList kept;
    for (const QString &word : cardName.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
        if (!dropped.match(word).hasMatch())
            kept << word;
    }
    return kept.isEmpty() ? cardName : kept.join(QLatin1Char(' '));
}

CostHoursPlot costHoursPlot(const Comparison &comparison)
{
    CostHoursPlot plot;
    std::vector<QString> fullNames;
    for (size_t i = 0; i < comparison.rows.size(); ++i) {
        const ComparisonRow &r = comparison.rows[i];
        const QString id = qs(r.cardId);
        auto card = std::find_if(plot.cards.begin(), plot.cards.end(), [&](const CostHoursCard &c) { return c.cardId == id; });
        if (card == plot.cards.end()) {
            const int index = static_cast<int>(plot.cards.size());
            plot.cards.push_back({id, r.cardName.empty() ? id : qs(r.cardName), costHoursCardColor(index), {}});
            fullNames.push_back(plot.cards.back().name);
            card = plot.cards.end() - 1;
        }
        if (!plottable(r))
            continue;
        CostHoursPoint p;
        p.row = static_cast<int>(i);
        p.jobHours = r.cost.jobHours;
        p.costPerMillionTokens = r.cost.costPerMillionTokens;
        p.recommended = static_cast<int>(i) == comparison.recommendedIndex || r.recommended;
        card->points.push_back(p);
    }

    // Short names unless two cards would read the same ("H100" for both SXM and PCIe).
    std::vector<QString> shortNames;
    for (const auto &name : fullNames)
        shortNames.push_back(shortCardName(name));
    for (size_t c = 0; c < plot.cards.size(); ++c) {
        const bool clash = std::count(shortNames.begin(), shortNames.end(), shortNames[c]) > 1;
        const QString name = clash ? fullNames[c] : shortNames[c];
        for (auto &p : plot.cards[c].points) {
            const ComparisonRow &r = comparison.rows[static_cast<size_t>(p.row)];
            p.label = QStringLiteral("%1 %2%3%4").arg(name).arg(kTimes).arg(r.gpus).arg(strategySuffix(r.strategy, QStringLiteral(" ("), QStringLiteral(")")));
            p.shortLabel = QStringLiteral("%1%2%3").arg(kTimes).arg(r.gpus).arg(strategySuffix(r.strategy, QStringLiteral(" "), QString()));
        }
        if (plot.cards[c].points.empty())
            plot.cards[c].name += QStringLiteral(" (does not fit)");
    }

    if (comparison.deadlineHours && std::isfinite(*comparison.deadlineHours) && *comparison.deadlineHours > 0)
        plot.deadlineHours = comparison.deadlineHours;

    double xLo = HUGE_VAL, xHi = -HUGE_VAL, yLo = HUGE_VAL, yHi = -HUGE_VAL;
    for (const auto &c : plot.cards) {
        for (const auto &p : c.points) {
            xLo = std::min(xLo, p.jobHours);
            xHi = std::max(xHi, p.jobHours);
            yLo = std::min(yLo, p.costPerMillionTokens);
            yHi = std::max(yHi, p.costPerMillionTokens);
        }
    }
    if (plot.pointCount() == 0) {
        xLo = yLo = 0;
        xHi = yHi = 1;
    }
    // The deadline is always in view: how far the points sit from it is part of the decision.
    if (plot.deadlineHours && plot.pointCount() > 0) {
        xLo = std::min(xLo, *plot.deadlineHours);
        xHi = std::max(xHi, *plot.deadlineHours);
    }
    // A job of seconds on an hours axis reads 2e-06: the axis takes the unit of its longest job.
    const struct { double perHour; const char *name; } units[] {{3600, "seconds"}, {60, "minutes"}, {1, "hours"}, {1.0 / 24, "days"}};
    const auto &unit = xHi < 2.0 / 60 ? units[0] : xHi < 2 ? units[1] : xHi < 72 ? units[2] : units[3];
    plot.xPerHour = unit.perHour;
    xLo *= unit.perHour;
    xHi *= unit.perHour;
    plot.x = xLo > 0 && xHi / xLo > kCostHoursLogSpan ? logAxis(xLo, xHi) : linearAxis(xLo, xHi, 6);
    plot.y = linearAxis(yLo, yHi, 5);
    plot.x.title = QStringLiteral("job %1%2").arg(QLatin1String(unit.name), plot.x.log ? QStringLiteral(" (log scale)") : QString());
    plot.y.title = comparison.currency.empty() ? QStringLiteral("cost per M useful tokens")
                                               : QStringLiteral("cost per M useful tokens (%1)").arg(qs(comparison.currency));
    return plot;
}

void drawCostHoursChart(QPainter &p, const QRectF &area, const Comparison &comparison)
{
    const CostHoursPlot plot = costHoursPlot(comparison);
    const CostHoursPoint *best = plot.recommendedPoint();
    p.save();
    p.setClipRect(area, Qt::IntersectClip);

    p.setFont(report::ReportCanvas::font(9, true));
    p.setPen(Qt::black);
    const QFontMetricsF titleFm(p.font(), p.device());
    p.drawText(QRectF(area.left(), area.top(), area.width(), 14), Qt::AlignHCenter | Qt::AlignTop,
               titleFm.elidedText(QStringLiteral("Cost per million useful tokens against job time, fitting configurations"), Qt::ElideRight, area.width()));

    const QFont small = report::ReportCanvas::font(7);
    const QFont smallBold = report::ReportCanvas::font(7, true);
    p.setFont(small);
    const QFontMetricsF fm(small, p.device());
    const QFontMetricsF fmBold(smallBold, p.device());

    std::vector<LegendItem> legend;
    for (const auto &c : plot.cards)
        legend.push_back({c.name, c.color, LegendMark::Dot});
    if (best)
        legend.push_back({QStringLiteral("recommended"), costHoursRecommendedColor(), LegendMark::Ring});
    if (plot.deadlineHours)
        legend.push_back({QStringLiteral("deadline"), costHoursDeadlineColor(), LegendMark::Dash});

    // Room for the y ticks and title on the left; x ticks, x title and the legend's lines below.
    const double left = area.left() + 52;
    const int legendLines = layoutLegend(legend, fm, left, 0, area.right(), nullptr);
    const double below = 28 + legendLines * kLegendLine;
    const QRectF frame(left, area.top() + 18, area.right() - 8 - left, std::max(20.0, area.height() - 18 - below));

    auto mapX = [&](double v) {
        const double t = plot.x.log ? (std::log10(v) - std::log10(plot.x.min)) / (std::log10(plot.x.max) - std::log10(plot.x.min))
                                    : (v - plot.x.min) / (plot.x.max - plot.x.min);
        return frame.left() + t * frame.width();
    };
    auto mapY = [&](double v) { return frame.bottom() - (v - plot.y.min) / (plot.y.max - plot.y.min) * frame.height(); };

    p.setPen(QPen(Qt::black, 0.8));
    p.setBrush(Qt::NoBrush);
    p.drawRect(frame);
    if (plot.pointCount() == 0) {
        p.drawText(frame, Qt::AlignCenter, comparison.rows.empty() ? QStringLiteral("no configurations compared") : QStringLiteral("no configuration fits"));
        layoutLegend(legend, fm, left, frame.bottom() + 28, area.right(), &p);
        p.restore();
        return;
    }

    for (double v : ticksOf(plot.y)) {
        const double py = mapY(v);
        p.setPen(QPen(QColor(225, 225, 225), 0.4));
        p.drawLine(QPointF(frame.left(), py), QPointF(frame.right(), py));
        p.setPen(QPen(Qt::black, 0.6));
        p.drawLine(QPointF(frame.left() - 3, py), QPointF(frame.left(), py));
        p.drawText(QRectF(frame.left() - 48, py - 6, 43, 12), Qt::AlignRight | Qt::AlignVCenter, tickText(plot.y, v));
    }
    for (double v : ticksOf(plot.x)) {
        const double px = mapX(v);
        p.setPen(QPen(QColor(225, 225, 225), 0.4));
        p.drawLine(QPointF(px, frame.top()), QPointF(px, frame.bottom()));
        p.setPen(QPen(Qt::black, 0.6));
        p.drawLine(QPointF(px, frame.bottom()), QPointF(px, frame.bottom() + 3));
        p.drawText(QRectF(px - 25, frame.bottom() + 3, 50, 11), Qt::AlignHCenter | Qt::AlignTop, tickText(plot.x, v));
    }
    p.drawText(QRectF(frame.left(), frame.bottom() + 14, frame.width(), 11), Qt::AlignHCenter | Qt::AlignTop, plot.x.title);
    p.save();
    p.translate(area.left() + 6, frame.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-frame.height() / 2, -6, frame.height(), 12), Qt::AlignCenter, fm.elidedText(plot.y.title, Qt::ElideRight, frame.height()));
    p.restore();

    p.save();
    p.setClipRect(frame.adjusted(-1, -1, 1, 1), Qt::IntersectClip);
    std::vector<QRectF> taken; // what point labels must not cover
    if (plot.deadlineHours) {
        const double px = mapX(plot.xOf(*plot.deadlineHours));
        p.setPen(QPen(costHoursDeadlineColor(), 1.2, Qt::DashLine));
        p.drawLine(QPointF(px, frame.top()), QPointF(px, frame.bottom()));
        const QString text = QStringLiteral("deadline %1").arg(hoursText(*plot.deadlineHours));
        const double w = fm.horizontalAdvance(text) + 4;
        const bool leftOfLine = px + 3 + w > frame.right();
        const QRectF textRect(leftOfLine ? px - 3 - w : px + 3, frame.top() + 2, w, 11);
        p.drawText(textRect, (leftOfLine ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter, text);
        taken.push_back(textRect);
        taken.push_back(QRectF(px - 1, frame.top(), 2, frame.height()));
    }

    struct Placed {
        QPointF at;
        const CostHoursPoint *point;
        QColor color;
    };
    std::vector<Placed> placed;
    for (const auto &c : plot.cards) {
        for (const auto &pt : c.points)
            placed.push_back({QPointF(mapX(plot.xOf(pt.jobHours)), mapY(pt.costPerMillionTokens)), &pt, c.color});
    }
    for (const auto &m : placed) {
        p.setPen(QPen(m.color.darker(140), 0.6));
        p.setBrush(m.color);
        p.drawEllipse(m.at, 3.2, 3.2);
    }
    const Placed *ringed = nullptr;
    for (const auto &m : placed) {
        if (m.point == best)
            ringed = &m;
    }
    if (ringed) {
        p.setPen(QPen(costHoursRecommendedColor(), 1.8));
        p.setBrush(Qt::NoBrush);
        p.drawEllipse(ringed->at, 7, 7);
    }

    // Labels where they overlap neither a marker, another label nor the deadline: the recommended
    // one first (on one line, on two, else the bare word over whatever is there), then left to
    // right, each trying its full and its short text.
    for (const auto &m : placed)
        taken.push_back(QRectF(m.at - QPointF(3.5, 3.5), QSizeF(7, 7)));
    if (ringed)
        taken.push_back(QRectF(ringed->at - QPointF(7.5, 7.5), QSizeF(15, 15)));
    auto place = [&](const QPointF &at, double gap, const QStringList &texts, const QFontMetricsF &metrics, bool force) -> std::pair<QRectF, QString> {
        for (const QString &text : texts) {
            double w = 0;
            const QStringList lines = text.split(QLatin1Char('\n'));
            for (const QString &line : lines)
                w = std::max(w, metrics.horizontalAdvance(line) + 2);
            const double h = 10.0 * static_cast<double>(lines.size());
            const double d = gap * 0.7; // diagonal offsets keep the same distance from the marker
            for (const QRectF &r : {QRectF(at.x() + gap, at.y() - h / 2, w, h), QRectF(at.x() - gap - w, at.y() - h / 2, w, h),
                                    QRectF(at.x() - w / 2, at.y() - gap - h, w, h), QRectF(at.x() - w / 2, at.y() + gap, w, h),
                                    QRectF(at.x() + d, at.y() - d - h, w, h), QRectF(at.x() + d, at.y() + d, w, h),
                                    QRectF(at.x() - d - w, at.y() - d - h, w, h), QRectF(at.x() - d - w, at.y() + d, w, h)}) {
                if (!frame.contains(r))
                    continue;
                if (std::none_of(taken.begin(), taken.end(), [&](const QRectF &t) { return t.intersects(r) && !t.contains(at); }))
                    return {r, text};
            }
        }
        if (!force)
            return {};
        const double w = metrics.horizontalAdvance(texts.back()) + 2;
        QRectF r(at.x() + gap, at.y() - 5, w, 10);
        r.moveLeft(std::clamp(r.left(), frame.left() + 1, std::max(frame.left() + 1, frame.right() - w - 1)));
        r.moveTop(std::clamp(r.top(), frame.top() + 1, std::max(frame.top() + 1, frame.bottom() - 11)));
        return {r, texts.back()};
    };
    if (ringed) {
        const auto [r, text] = place(ringed->at, 9,
                                     {QStringLiteral("recommended: ") + best->label, QStringLiteral("recommended\n") + best->label, QStringLiteral("recommended")},
                                     fmBold, true);
        taken.push_back(r);
        p.setFont(smallBold);
        p.setPen(costHoursRecommendedColor());
        p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter, text);
    }
    std::vector<const Placed *> byX;
    for (const auto &m : placed) {
        if (&m != ringed)
            byX.push_back(&m);
    }
    std::stable_sort(byX.begin(), byX.end(), [](const Placed *a, const Placed *b) { return a->at.x() < b->at.x(); });
    p.setFont(small);
    p.setPen(QColor(60, 60, 60));
    for (const Placed *m : byX) {
        const auto [r, text] = place(m->at, 5, {m->point->label, m->point->shortLabel}, fm, false);
        if (text.isEmpty())
            continue;
        taken.push_back(r);
        p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter, text);
    }
    p.restore();

    p.setFont(small);
    layoutLegend(legend, fm, left, frame.bottom() + 28, area.right(), &p);
    p.restore();
}

} // namespace pb
