// The cost-against-hours picture of the decision, from a comparison built by hand: which points the
// comparison view's chart carries and where, the axis turning logarithmic, and the report's QPainter
// drawing (something in the plot, the recommended ring, the deadline, nothing outside its area).
#include "compare/CostHoursChart.h"
#include "report/ReportCostChart.h"

#include <QChart>
#include <QGraphicsSimpleTextItem>
#include <QImage>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QScatterSeries>
#include <QValueAxis>
#include <QtTest>

namespace {

pb::ComparisonRow makeRow(const char *id, const char *name, int gpus, pb::ParallelStrategy strategy, bool fits, double jobHours, double totalCost,
                          double perMillion)
{
    pb::ComparisonRow r;
    r.cardId = id;
    r.cardName = name;
    r.gpus = gpus;
    r.strategy = strategy;
    r.fits = fits;
    r.cost.jobHours = jobHours;
    r.cost.windowHours = jobHours + 0.5;
    r.cost.totalCost = totalCost;
    r.cost.costPerMillionTokens = perMillion;
    return r;
}

// Four cards, six rows: the A100 x1 and the only Gaudi row do not fit; the H100 x4 is recommended
// under a 5 h deadline that the MI300X x1 (cheaper per token) misses. Job hours span 2.8 to 20 h.
pb::Comparison handBuilt()
{
    using S = pb::ParallelStrategy;
    pb::Comparison c;
    c.currency = "USD";
    c.deadlineHours = 5.0;
    c.rows = {
        makeRow("a100-sxm-80gb", "NVIDIA A100 SXM 80GB", 1, S::None, false, 0, 0, 0),
        makeRow("a100-sxm-80gb", "NVIDIA A100 SXM 80GB", 2, S::Fsdp, true, 20.0, 60.0, 0.30),
        makeRow("h100-sxm-80gb", "NVIDIA H100 SXM 80GB", 1, S::None, true, 10.0, 32.45, 0.11),
        makeRow("h100-sxm-80gb", "NVIDIA H100 SXM 80GB", 4, S::Fsdp, true, 2.8, 40.0, 0.136),
        makeRow("mi300x-192gb", "AMD Instinct MI300X 192GB", 1, S::None, true, 7.6, 28.71, 0.097),
        makeRow("gaudi3-128gb", "Intel Gaudi 3 128GB", 1, S::None, false, 0, 0, 0),
    };
    c.rows[4].meetsDeadline = false;
    c.rows[3].recommended = true;
    c.recommendedIndex = 3;
    return c;
}

pb::Comparison withoutRecommendation(pb::Comparison c)
{
    for (auto &r : c.rows)
        r.recommended = false;
    c.recommendedIndex = -1;
    return c;
}

QAbstractSeries *seriesObject(QChart *chart, const QString &objectName)
{
    for (QAbstractSeries *s : chart->series()) {
        if (s->objectName() == objectName)
            return s;
    }
    return nullptr;
}

QScatterSeries *seriesNamed(QChart *chart, const QString &objectName)
{
    return qobject_cast<QScatterSeries *>(seriesObject(chart, objectName));
}

QImage render(const pb::Comparison &c, const QRectF &area = QRectF(0, 0, 800, 500))
{
    QImage image(800, 500, QImage::Format_RGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    pb::drawCostHoursChart(painter, area, c); // no antialiasing: markers keep their exact colours
    painter.end();
    return image;
}

int pixelsOf(const QImage &image, const QColor &color, const QRect &region)
{
    int n = 0;
    for (int y = region.top(); y <= region.bottom(); ++y) {
        for (int x = region.left(); x <= region.right(); ++x)
            n += image.pixelColor(x, y).rgb() == color.rgb() ? 1 : 0;
    }
    return n;
}

// A pixel of `marker` with `ring` on all four sides within the recommended ring's radius: the ring
// drawn round a marker (the "recommended" label beside a point cannot surround it).
bool ringedMarker(const QImage &image, const QColor &marker, const QColor &ring, const QRect &region)
{
    auto ringWithin = [&](int x, int y, int dx, int dy) {
        for (int d = 4; d <= 10; ++d) {
            if (image.rect().contains(x + dx * d, y + dy * d) && image.pixelColor(x + dx * d, y + dy * d).rgb() == ring.rgb())
                return true;
        }
        return false;
    };
    for (int y = region.top(); y <= region.bottom(); ++y) {
        for (int x = region.left(); x <= region.right(); ++x) {
            if (image.pixelColor(x, y).rgb() == marker.rgb() && ringWithin(x, y, 1, 0) && ringWithin(x, y, -1, 0) && ringWithin(x, y, 0, 1)
                && ringWithin(x, y, 0, -1))
                return true;
        }
    }
    return false;
}

int nonWhite(const QImage &image, const QRect &region)
{
    return region.width() * region.height() - pixelsOf(image, Qt::white, region);
}

} // namespace

class TestCostHoursChart : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plotTakesFittingRowsOnly()
    {
        const pb::CostHoursPlot plot = pb::costHoursPlot(handBuilt());
        QCOMPARE(plot.cards.size(), size_t(4));
        QCOMPARE(plot.pointCount(), size_t(4));
        QVERIFY(plot.cards[3].points.empty());
        QVERIFY(plot.cards[3].name.contains(QStringLiteral("does not fit")));
        const pb::CostHoursPoint *best = plot.recommendedPoint();
        QVERIFY(best);
        QCOMPARE(best->row, 3);
        QCOMPARE(best->label, QStringLiteral("H100 \u00d74 (fsdp)"));
        QCOMPARE(plot.cards[2].points[0].label, QStringLiteral("MI300X \u00d71"));
        QVERIFY(!plot.x.log); // 20 / 2.8 is about 7
        QCOMPARE(plot.x.title, QStringLiteral("job hours"));
        QVERIFY(plot.x.min <= 2.8 && plot.x.max >= 20.0);
        QVERIFY(plot.y.min <= 0.097 && plot.y.max >= 0.30);
        QCOMPARE(plot.deadlineHours.value_or(0), 5.0);
    }

    void cardColoursAvoidTheMarks()
    {
        for (int i = 0; i < 16; ++i) {
            QVERIFY(pb::costHoursCardColor(i) != pb::costHoursRecommendedColor());
            QVERIFY(pb::costHoursCardColor(i) != pb::costHoursDeadlineColor());
        }
        QVERIFY(pb::costHoursCardColor(0) != pb::costHoursCardColor(1));
    }

    void widgetHasOneSeriesPerCard()
    {
        pb::ui::CostHoursChart widget;
        const pb::Comparison c = handBuilt();
        widget.setComparison(c);
        QChart *chart = widget.chart();
        QCOMPARE(chart->series().size(), 6); // 4 cards, the ring, the deadline

        QScatterSeries *a100 = seriesNamed(chart, QStringLiteral("card:a100-sxm-80gb"));
        QScatterSeries *h100 = seriesNamed(chart, QStringLiteral("card:h100-sxm-80gb"));
        QScatterSeries *mi300 = seriesNamed(chart, QStringLiteral("card:mi300x-192gb"));
        QScatterSeries *gaudi = seriesNamed(chart, QStringLiteral("card:gaudi3-128gb"));
        QVERIFY(a100 && h100 && mi300 && gaudi);
        QCOMPARE(a100->name(), QStringLiteral("A100")); // short names: the legend shares the width with the plot
        QCOMPARE(a100->points(), QList<QPointF>({QPointF(20.0, 0.30)})); // not the A100 x1
        QCOMPARE(h100->points(), QList<QPointF>({QPointF(10.0, 0.11), QPointF(2.8, 0.136)}));
        QCOMPARE(mi300->count(), 1);
        QCOMPARE(gaudi->count(), 0);
        QCOMPARE(a100->color(), pb::costHoursCardColor(0));
        QCOMPARE(h100->color(), pb::costHoursCardColor(1));

        QScatterSeries *ring = seriesNamed(chart, QStringLiteral("recommended"));
        QVERIFY(ring);
        QCOMPARE(ring->points(), QList<QPointF>({QPointF(2.8, 0.136)}));
        QVERIFY(h100->points().contains(ring->points().first()));
        QVERIFY(widget.recommendedLabel());
        QVERIFY(widget.recommendedLabel()->text().startsWith(QStringLiteral("recommended"))); // its forms: recommendedLabelStaysInThePlot
        QCOMPARE(widget.recommendedLabel()->brush().color(), pb::costHoursRecommendedColor());
        QCOMPARE(ring->pen().color(), pb::costHoursRecommendedColor());

        auto *deadline = qobject_cast<QLineSeries *>(seriesObject(chart, QStringLiteral("deadline")));
        QVERIFY(deadline);
        QCOMPARE(deadline->count(), 2);
        QCOMPARE(deadline->at(0).x(), 5.0);
        QCOMPARE(deadline->at(1).x(), 5.0);
        QCOMPARE(deadline->pen().style(), Qt::DashLine);

        const QList<QAbstractAxis *> xAxes = chart->axes(Qt::Horizontal);
        QCOMPARE(xAxes.size(), 1);
        auto *x = qobject_cast<QValueAxis *>(xAxes.first());
        QVERIFY(x); // linear: the hours span about 7x
        QVERIFY(x->min() <= 2.8 && x->max() >= 20.0);
    }

    // The label over the ring stays inside the plot, next to its ring, wherever the point sits:
    // at the right edge and the top (the A100 x2: the longest job, the dearest tokens), and at the
    // left edge (the H100 x4: the shortest job), at a wide and at a narrow size.
    void recommendedLabelStaysInThePlot_data()
    {
        QTest::addColumn<int>("row");
        QTest::addColumn<int>("width");
        QTest::addColumn<QString>("shown");
        const QString a100 = QStringLiteral("A100 \u00d72 (fsdp)"), h100 = QStringLiteral("H100 \u00d74 (fsdp)");
        QTest::newRow("right edge, top") << 1 << 640 << QStringLiteral("recommended: ") + a100;
        QTest::newRow("right edge, top, narrow") << 1 << 360 << QStringLiteral("recommended\n") + a100;
        QTest::newRow("left edge") << 3 << 640 << QStringLiteral("recommended: ") + h100;
        QTest::newRow("left edge, narrow") << 3 << 360 << QStringLiteral("recommended\n") + h100;
    }
    void recommendedLabelStaysInThePlot()
    {
        QFETCH(int, row);
        QFETCH(int, width);
        QFETCH(QString, shown);
        pb::Comparison c = withoutRecommendation(handBuilt());
        c.rows[static_cast<size_t>(row)].recommended = true;
        c.recommendedIndex = row;
        pb::ui::CostHoursChart widget;
        widget.resize(width, 320);
        widget.setComparison(c);
        widget.show();
        QVERIFY(QTest::qWaitForWindowExposed(&widget));
        QChart *chart = widget.chart();
        QGraphicsSimpleTextItem *label = widget.recommendedLabel();
        QVERIFY(label && label->isVisible());
        QCOMPARE(label->text(), shown);
        const QRectF text = label->mapRectToParent(label->boundingRect());
        const QRectF area = chart->plotArea();
        QVERIFY2(area.contains(text), qPrintable(QStringLiteral("label %1,%2 %3x%4 outside the plot %5,%6 %7x%8")
                                                     .arg(text.x()).arg(text.y()).arg(text.width()).arg(text.height())
                                                     .arg(area.x()).arg(area.y()).arg(area.width()).arg(area.height())));
        QScatterSeries *ring = seriesNamed(chart, QStringLiteral("recommended"));
        const QPointF at = chart->mapToPosition(ring->at(0), ring);
        // Just above or just below the ring, and over it horizontally where the plot leaves room.
        const double reach = ring->markerSize() / 2 + 2 + text.height();
        QVERIFY2(std::abs(text.center().y() - at.y()) <= reach, qPrintable(QString::number(text.center().y() - at.y())));
        QVERIFY(text.left() <= at.x() && text.right() >= at.x());
        // Moving the plot (a narrower chart) moves the label with it.
        widget.resize(width - 60, 320);
        QTRY_VERIFY(chart->plotArea().contains(label->mapRectToParent(label->boundingRect())) && chart->plotArea() != area);
    }

    void toolTipTellsTheFigures()
    {
        const pb::Comparison c = handBuilt();
        const QString tip = pb::ui::CostHoursChart::pointToolTip(c.rows[3], c.currency);
        for (const char *part : {"NVIDIA H100 SXM 80GB", "\u00d74", "fsdp", "2.8 h", "3.3 h", "40.00 USD", "0.14 USD", "recommended"})
            QVERIFY2(tip.contains(QString::fromUtf8(part)), qPrintable(tip));
        QVERIFY(pb::ui::CostHoursChart::pointToolTip(c.rows[4], c.currency).contains(QStringLiteral("misses the deadline")));
    }

    void wideHoursSpanTurnsTheAxisLogarithmic()
    {
        pb::Comparison c = handBuilt();
        c.rows[1].cost.jobHours = 80.0; // 80 / 2.8 is about 29
        QVERIFY(pb::costHoursPlot(c).x.log);
        pb::ui::CostHoursChart widget;
        widget.setComparison(c);
        const QList<QAbstractAxis *> xAxes = widget.chart()->axes(Qt::Horizontal);
        QCOMPARE(xAxes.size(), 1);
        auto *x = qobject_cast<QLogValueAxis *>(xAxes.first());
        QVERIFY(x);
        // 80 h is past three days: the axis reads in days.
        QCOMPARE(pb::costHoursPlot(c).x.title, QStringLiteral("job days (log scale)"));
        QVERIFY(x->min() <= 2.8 / 24 && x->max() >= 80.0 / 24);
        QVERIFY(!render(c).isNull());
    }

    // A job of milliseconds is plotted in seconds, not as 2e-06 h; the points move with the axis.
    void shortJobsReadInSeconds()
    {
        pb::Comparison c = handBuilt();
        for (auto &r : c.rows)
            r.cost.jobHours /= 1e5; // 2.8 h -> 0.1 s
        c.deadlineHours.reset();
        const pb::CostHoursPlot plot = pb::costHoursPlot(c);
        QCOMPARE(plot.xPerHour, 3600.0);
        QVERIFY2(plot.x.title.startsWith(QStringLiteral("job seconds")), qPrintable(plot.x.title));
        QVERIFY(plot.x.min <= 2.8 / 1e5 * 3600 && plot.x.max >= 20.0 / 1e5 * 3600);
        pb::ui::CostHoursChart widget;
        widget.setComparison(c);
        auto *x = qobject_cast<QValueAxis *>(widget.chart()->axes(Qt::Horizontal).first());
        QVERIFY(x && x->max() >= 20.0 / 1e5 * 3600 && x->max() < 1);
        QVERIFY(!render(c).isNull());
    }

    void withoutDeadlineOrRecommendation()
    {
        pb::Comparison c = withoutRecommendation(handBuilt());
        c.deadlineHours.reset();
        pb::ui::CostHoursChart widget;
        widget.setComparison(c);
        QCOMPARE(widget.chart()->series().size(), 4);
        QVERIFY(!seriesNamed(widget.chart(), QStringLiteral("recommended")));
    }

    void clearEmpties()
    {
        pb::ui::CostHoursChart widget;
        widget.setComparison(handBuilt());
        QVERIFY(!widget.chart()->series().isEmpty());
        widget.clear();
        QVERIFY(widget.chart()->series().isEmpty());
        QVERIFY(widget.chart()->axes().isEmpty());
        widget.setComparison(handBuilt()); // usable again after clearing
        QCOMPARE(widget.chart()->series().size(), 6);
    }

    void reportDrawingShowsThePoints()
    {
        const QRect interior(120, 60, 560, 300); // inside the plot frame at 800 x 500
        const QImage full = render(handBuilt());
        pb::Comparison nothingFits = handBuilt();
        for (auto &r : nothingFits.rows)
            r.fits = false;
        const QImage empty = render(withoutRecommendation(nothingFits));
        QVERIFY2(nonWhite(full, interior) > nonWhite(empty, interior) + 200,
                 qPrintable(QStringLiteral("%1 vs %2").arg(nonWhite(full, interior)).arg(nonWhite(empty, interior))));

        // In the plot, not only in the legend below it.
        QVERIFY(pixelsOf(full, pb::costHoursRecommendedColor(), interior) > 20);
        QVERIFY(ringedMarker(full, pb::costHoursCardColor(1), pb::costHoursRecommendedColor(), interior)); // the H100 x4
        QVERIFY(!ringedMarker(full, pb::costHoursCardColor(2), pb::costHoursRecommendedColor(), interior)); // not the MI300X
        QVERIFY(pixelsOf(full, pb::costHoursCardColor(1), interior) > 20); // the H100 markers
        QVERIFY(pixelsOf(full, pb::costHoursDeadlineColor(), interior) > 20);
        const QRect all = full.rect();
        QCOMPARE(pixelsOf(empty, pb::costHoursRecommendedColor(), all), 0);

        pb::Comparison plain = withoutRecommendation(handBuilt());
        plain.deadlineHours.reset();
        const QImage noMarks = render(plain);
        QCOMPARE(pixelsOf(noMarks, pb::costHoursRecommendedColor(), all), 0);
        QCOMPARE(pixelsOf(noMarks, pb::costHoursDeadlineColor(), all), 0);
        QVERIFY(pixelsOf(noMarks, pb::costHoursCardColor(1), all) > 20);
    }

    void reportDrawingStaysInItsArea()
    {
        const QRectF area(100, 100, 420, 260);
        const QImage image = render(handBuilt(), area);
        const QRect inside = area.toRect();
        QVERIFY(nonWhite(image, inside.adjusted(60, 30, -20, -60)) > 200);
        int outside = 0;
        for (int y = 0; y < image.height(); ++y) {
            for (int x = 0; x < image.width(); ++x) {
                if (!inside.adjusted(-1, -1, 1, 1).contains(x, y) && image.pixelColor(x, y).rgb() != QColor(Qt::white).rgb())
                    ++outside;
            }
        }
        QCOMPARE(outside, 0);
    }
};

QTEST_MAIN(TestCostHoursChart)
#include "tst_cost_hours_chart.moc"
