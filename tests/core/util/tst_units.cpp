// Byte sizes are written by one function everywhere: IEC units, C-locale digits, the precision
// asked for once a unit applies.
#include "util/Units.h"

#include <QtTest>

class TestUnits final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void formatDuration_data()
    {
        QTest::addColumn<double>("seconds");
        QTest::addColumn<QString>("text");
        QTest::newRow("projected tiny step") << 7.74e-6 << QStringLiteral("7.74 \u00b5s");
        QTest::newRow("tiny job window") << 0.0302 << QStringLiteral("30.2 ms");
        QTest::newRow("seconds") << 12.46 << QStringLiteral("12.5 s");
        QTest::newRow("minutes") << 252.0 << QStringLiteral("4.2 min");
        QTest::newRow("hours") << 37800.0 << QStringLiteral("10.5 h");
        QTest::newRow("just under three days") << 71.9 * 3600 << QStringLiteral("71.9 h");
        QTest::newRow("days") << 3.2 * 86400 << QStringLiteral("3.2 days");
    }
    void formatDuration()
    {
        QFETCH(double, seconds);
        QFETCH(QString, text);
        QCOMPARE(pb::formatDuration(seconds), text);
    }

    void formatBytes_data()
    {
        QTest::addColumn<qint64>("bytes");
        QTest::addColumn<int>("precision");
        QTest::addColumn<QString>("text");
        QTest::newRow("zero") << qint64(0) << 2 << QStringLiteral("0 bytes");
        QTest::newRow("below a KiB, no separator") << qint64(1023) << 2 << QStringLiteral("1023 bytes");
        QTest::newRow("KiB") << qint64(1536) << 2 << QStringLiteral("1.50 KiB");
        QTest::newRow("MiB") << qint64(6123456) << 2 << QStringLiteral("5.84 MiB");
        QTest::newRow("GiB, one decimal") << qint64(40960) * 1048576 << 1 << QStringLiteral("40.0 GiB");
        QTest::newRow("an H100's memory") << qint64(81559) * 1048576 << 2 << QStringLiteral("79.65 GiB");
        QTest::newRow("3 TiB") << (qint64(3) << 40) << 2 << QStringLiteral("3.00 TiB");
        QTest::newRow("short by") << qint64(-2) * 1073741824 << 1 << QStringLiteral("-2.0 GiB");
    }
    void formatBytes()
    {
        QFETCH(qint64, bytes);
        QFETCH(int, precision);
        QFETCH(QString, text);
        QCOMPARE(pb::formatBytes(bytes, precision), text);
    }

    // The same text whatever the user's locale: CLI output, logs and the report are read by scripts too.
    void localeIndependent()
    {
        const QLocale before;
        QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
        const QString text = pb::formatBytes(qint64(1536) * 1048576 + 12345);
        QLocale::setDefault(before);
        QCOMPARE(text, QStringLiteral("1.50 GiB"));
    }
};

QTEST_GUILESS_MAIN(TestUnits)
#include "tst_units.moc"
