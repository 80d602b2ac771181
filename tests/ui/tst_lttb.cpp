// LTTB downsampling: the hand-worked triangle choice, pass-through below the threshold, and that a
// single spike in a long series survives (the reason to use LTTB rather than striding).
#include "charts/Lttb.h"

#include <QtTest>

#include <vector>

using pb::ui::lttb;

class TestLttb final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void passThrough_data()
    {
        QTest::addColumn<int>("count");
        QTest::addColumn<int>("threshold");
        QTest::newRow("empty") << 0 << 10;
        QTest::newRow("below threshold") << 5 << 10;
        QTest::newRow("at threshold") << 10 << 10;
        QTest::newRow("threshold too small") << 50 << 2;
    }
    void passThrough()
    {
        QFETCH(int, count);
        QFETCH(int, threshold);
        std::vector<double> x, y;
        for (int i = 0; i < count; ++i) {
            x.push_back(i);
            y.push_back(i * i);
        }
        const QList<QPointF> out = lttb(x.data(), y.data(), x.size(), static_cast<size_t>(threshold));
        QCOMPARE(out.size(), count);
        for (int i = 0; i < count; ++i)
            QCOMPARE(out[i], QPointF(i, i * i));
    }

    // x = 0..4, y = 0 0 10 0 0, threshold 3: one interior bucket {1, 2, 3}; the next "bucket" is the
    // last point (4, 0). Triangle area with a = (0, 0): |(0-4)(y_i-0) - (0-x_i)(0-0)| / 2 = 2*y_i,
    // largest at i = 2. Result: (0,0), (2,10), (4,0).
    void handWorkedTriangle()
    {
        const double x[] {0, 1, 2, 3, 4};
        const double y[] {0, 0, 10, 0, 0};
        const QList<QPointF> out = lttb(x, y, 5, 3);
        QCOMPARE(out.size(), 3);
        QCOMPARE(out[0], QPointF(0, 0));
        QCOMPARE(out[1], QPointF(2, 10));
        QCOMPARE(out[2], QPointF(4, 0));
    }

    // x = 0..5, y = 1 5 2 -7 3 0, threshold 4: bucket size (6-2)/2 = 2: buckets {1,2} and {3,4}.
    // Bucket {1,2}: a = (0,1), next mean = ((3+4)/2, (-7+3)/2) = (3.5, -2).
    //   area(i) = |(0-3.5)(y_i-1) - (0-x_i)(-2-1)| = |-3.5(y_i-1) - 3x_i|: i=1: |-14-3| = 17; i=2: |-3.5-6| = 9.5 -> 1.
    // Bucket {3,4}: a = (1,5), next = (5,0). area = |(1-5)(y_i-5) - (1-x_i)(0-5)|:
    //   i=3: |-4*-12 - (-2)(-5)| = |48-10| = 38; i=4: |-4*-2 - (-3)(-5)| = |8-15| = 7 -> 3.
    void handWorkedTwoBuckets()
    {
        const double x[] {0, 1, 2, 3, 4, 5};
        const double y[] {1, 5, 2, -7, 3, 0};
        const QList<QPointF> out = lttb(x, y, 6, 4);
        QCOMPARE(out.size(), 4);
        QCOMPARE(out[0], QPointF(0, 1));
        QCOMPARE(out[1], QPointF(1, 5));
        QCOMPARE(out[2], QPointF(3, -7));
        QCOMPARE(out[3], QPointF(5, 0));
    }

    void keepsSpikeInLongSeries()
    {
        const size_t n = 200000;
        std::vector<double> x(n), y(n, 1.0);
        for (size_t i = 0; i < n; ++i)
            x[i] = static_cast<double>(i);
        y[123457] = 500.0;
        const QList<QPointF> out = lttb(x.data(), y.data(), n, 1000);
        QCOMPARE(out.size(), 1000);
        QCOMPARE(out.front(), QPointF(0, 1));
        QCOMPARE(out.back(), QPointF(static_cast<double>(n - 1), 1));
        bool spike = false;
        for (qsizetype i = 0; i < out.size(); ++i) {
            if (i > 0)
                QVERIFY(out[i].x() > out[i - 1].x());
            spike = spike || (out[i].x() == 123457.0 && out[i].y() == 500.0);
        }
        QVERIFY(spike);
    }
};

QTEST_GUILESS_MAIN(TestLttb)
#include "tst_lttb.moc"
