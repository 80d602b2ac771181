#include "report/ReportCharts.h"

#include "report/ReportCanvas.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QPolygonF>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pb::report {
namespace {

QString tickLabel(double v, double step)
{
    const int decimals = step >= 1 ? 0 : std::min(4, static_cast<int>(std::ceil(-std::log10(step))));
    return QString::number(v, 'f', decimals);
}

struct Range {
    double lo = std::numeric_limits<double>::max();
    double hi = std::numeric_limits<double>::lowest();
    void add(double v)
    {
        if (std::isfinite(v)) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    bool valid() const { return lo <= hi; }
};

void drawTitle(QPainter &p, const QRectF &rect, const QString &title)
{
    p.setFont(ReportCanvas::font(9, true));
    p.setPen(Qt::black);
    const QFontMetricsF fm(p.font(), p.device());
    p.drawText(QRectF(rect.left(), rect.top(), rect.width(), 14), Qt::AlignHCenter | Qt::AlignTop, fm.elidedText(title, Qt::ElideRight, rect.width()));
}

} // namespace

double niceTickStep(double range, int ticks)
{
    if (!(range > 0) || ticks < 1)
        return 1;
    const double raw = range / ticks;
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        if (m * power >= raw)
            return m * power;
    }
    return 10 * power;
}

void drawLineChart(QPainter &p, const QRectF &rect, const QString &title, const QString &xTitle, const QString &yTitle,
                   const std::vector<ChartSeries> &series)
{
    p.save();
    drawTitle(p, rect, title);
    Range xr, yr;
    for (const auto &s : series) {
        for (double v : s.x)
            xr.add(v);
        for (double v : s.y)
            yr.add(v);
    }
    const QFont small = ReportCanvas::font(7);
    p.setFont(small);
    const QFontMetricsF fm(small, p.device());
    // Plot area: room for the y tick labels and title on the left, x ticks, title and legend below.
    const QRectF plot(rect.left() + 52, rect.top() + 18, rect.width() - 60, rect.height() - 18 - 44);
    p.setPen(QPen(Qt::black, 0.8));
    p.drawRect(plot);
    if (!xr.valid() || !yr.valid()) {
        p.drawText(plot, Qt::AlignCenter, QStringLiteral("no samples recorded"));
        p.restore();
        return;
    }
    if (yr.lo > 0 && yr.lo < 0.5 * yr.hi)
        yr.lo = 0; // start at zero unless the data sits far above it
    if (xr.hi - xr.lo <= 0)
        xr.hi = xr.lo + 1;
    const double yPad = yr.hi > yr.lo ? 0.05 * (yr.hi - yr.lo) : std::max(1e-9, std::abs(yr.hi) * 0.1 + 1e-9);
    double yLo = yr.lo == 0 ? 0 : yr.lo - yPad;
    double yHi = yr.hi + yPad;
    const double yStep = niceTickStep(yHi - yLo, 5);
    yLo = std::floor(yLo / yStep) * yStep;
    yHi = std::ceil(yHi / yStep) * yStep;
    const double xStep = niceTickStep(xr.hi - xr.lo, 6);
    auto mapX = [&](double x) { return plot.left() + (x - xr.lo) / (xr.hi - xr.lo) * plot.width(); };
    auto mapY = [&](double y) { return plot.bottom() - (y - yLo) / (yHi - yLo) * plot.height(); };

    for (double y = yLo; y <= yHi + yStep * 1e-6; y += yStep) {
        const double py = mapY(y);
        p.setPen(QPen(QColor(225, 225, 225), 0.4));
        p.drawLine(QPointF(plot.left(), py), QPointF(plot.right(), py));
        p.setPen(QPen(Qt::black, 0.6));
        p.drawLine(QPointF(plot.left() - 3, py), QPointF(plot.left(), py));
        p.drawText(QRectF(plot.left() - 48, py - 6, 43, 12), Qt::AlignRight | Qt::AlignVCenter, tickLabel(y, yStep));
    }
    for (double x = std::ceil(xr.lo / xStep) * xStep; x <= xr.hi + xStep * 1e-6; x += xStep) {
        const double px = mapX(x);
        p.drawLine(QPointF(px, plot.bottom()), QPointF(px, plot.bottom() + 3));
        p.drawText(QRectF(px - 25, plot.bottom() + 3, 50, 11), Qt::AlignHCenter | Qt::AlignTop, tickLabel(x, xStep));
    }
    p.drawText(QRectF(plot.left(), plot.bottom() + 14, plot.width(), 11), Qt::AlignHCenter | Qt::AlignTop, xTitle);
    p.save();
    p.translate(rect.left() + 6, plot.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-plot.height() / 2, -6, plot.height(), 12), Qt::AlignCenter, fm.elidedText(yTitle, Qt::ElideRight, plot.height()));
    p.restore();

    p.setClipRect(plot.adjusted(-1, -1, 1, 1));
    for (const auto &s : series) {
        QPolygonF line;
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
            if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
                line << QPointF(mapX(s.x[i]), mapY(s.y[i]));
        }
        p.setPen(QPen(s.color, 1.2));
        p.drawPolyline(line);
        for (const auto &pt : line)
            p.drawEllipse(pt, 1.2, 1.2);
    }
    p.setClipping(false);

    double lx = plot.left();
    const double ly = plot.bottom() + 27;
    for (const auto &s : series) {
        p.setPen(QPen(s.color, 2));
        p.drawLine(QPointF(lx, ly + 5), QPointF(lx + 14, ly + 5));
        p.setPen(Qt::black);
        const double w = fm.horizontalAdvance(s.name) + 4;
        p.drawText(QRectF(lx + 18, ly, w, 11), Qt::AlignLeft | Qt::AlignVCenter, s.name);
        lx += 18 + w + 12;
    }
    p.restore();
}

void drawStackedBars(QPainter &p, const QRectF &rect, const QString &title, const QString &valueTitle, const std::vector<StackedBar> &bars)
{
    p.save();
    drawTitle(p, rect, title);
    const QFont small = ReportCanvas::font(7);
    p.setFont(small);
    const QFontMetricsF fm(small, p.device());
    double maxTotal = 0;
    for (const auto &b : bars) {
        double t = 0;
        for (const auto &s : b.segments)
            t += std::max(0.0, s.value);
        maxTotal = std::max(maxTotal, t);
    }
    const double labelWidth = 120;
    const double legendHeight = 26;
    const QRectF plot(rect.left() + labelWidth, rect.top() + 18, rect.width() - labelWidth - 10, rect.height() - 18 - 26 - legendHeight);
    const double step = niceTickStep(maxTotal > 0 ? maxTotal : 1, 5);
    const double hi = std::max(step, std::ceil(maxTotal / step) * step);
    auto mapX = [&](double v) { return plot.left() + v / hi * plot.width(); };

    p.setPen(QPen(Qt::black, 0.6));
    for (double v = 0; v <= hi + step * 1e-6; v += step) {
        const double px = mapX(v);
        p.setPen(QPen(QColor(225, 225, 225), 0.4));
        p.drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
        p.setPen(QPen(Qt::black, 0.6));
        p.drawLine(QPointF(px, plot.bottom()), QPointF(px, plot.bottom() + 3));
        p.drawText(QRectF(px - 25, plot.bottom() + 3, 50, 11), Qt::AlignHCenter | Qt::AlignTop, tickLabel(v, step));
    }
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.topLeft(), plot.bottomLeft());
    p.drawText(QRectF(plot.left(), plot.bottom() + 14, plot.width(), 11), Qt::AlignHCenter | Qt::AlignTop, valueTitle);

    const double slot = bars.empty() ? plot.height() : plot.height() / static_cast<double>(bars.size());
    const double barHeight = std::min(22.0, slot * 0.6);
    std::vector<std::pair<QString, QColor>> legend;
    for (size_t i = 0; i < bars.size(); ++i) {
        const double cy = plot.top() + slot * (static_cast<double>(i) + 0.5);
        p.setPen(Qt::black);
        p.drawText(QRectF(rect.left(), cy - 10, labelWidth - 6, 20), Qt::AlignRight | Qt::AlignVCenter | Qt::TextWordWrap, bars[i].label);
        double x = 0;
        for (const auto &s : bars[i].segments) {
            const double v = std::max(0.0, s.value);
            const QRectF r(QPointF(mapX(x), cy - barHeight / 2), QPointF(mapX(x + v), cy + barHeight / 2));
            p.fillRect(r, s.color);
            p.setPen(QPen(Qt::white, 0.4));
            p.drawRect(r);
            x += v;
            if (std::none_of(legend.begin(), legend.end(), [&](const auto &l) { return l.first == s.name; }))
                legend.emplace_back(s.name, s.color);
        }
    }
    double lx = plot.left();
    double ly = plot.bottom() + 28;
    for (const auto &[name, color] : legend) {
        const double w = fm.horizontalAdvance(name) + 4;
        if (lx + 14 + w > rect.right()) {
            lx = plot.left();
            ly += 12;
        }
        p.fillRect(QRectF(lx, ly + 1, 9, 9), color);
        p.setPen(Qt::black);
        p.drawText(QRectF(lx + 12, ly, w, 11), Qt::AlignLeft | Qt::AlignVCenter, name);
        lx += 12 + w + 10;
    }
    p.restore();
}

} // namespace pb::report
