#include "log/Logging.h"

#include <QTemporaryDir>
#include <QtTest>
#include <spdlog/spdlog.h>

class TestLogging : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void linesReachFileAndRing()
    {
        QTemporaryDir dir;
        pb::LoggingOptions options;
        options.console = false;
        options.filePath = (dir.path() + QStringLiteral("/test.log")).toStdString();
        QVERIFY(pb::initLogging(options));
        spdlog::info("hello from the test {}", 42);
        qWarning("a Qt warning");
        spdlog::default_logger()->flush();
        const auto lines = pb::recentLogLines(10);
        QVERIFY(lines.size() >= 2);
        QVERIFY(QString::fromStdString(lines[lines.size() - 2]).contains(QStringLiteral("hello from the test 42")));
        QVERIFY(QString::fromStdString(lines.back()).contains(QStringLiteral("[qt] a Qt warning")));
        QFile file(QString::fromStdString(options.filePath));
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray text = file.readAll();
        QVERIFY(text.contains("hello from the test 42"));
        QVERIFY2(text.contains("[qt] a Qt warning"), text.constData());
    }
    // Ranks of one data-parallel step are separate processes: each writes a file of its own
    // beside the main log, since a rotating file has one writer.
    void workerRankWritesItsOwnFile()
    {
        QTemporaryDir dir;
        pb::LoggingOptions options;
        options.console = false;
        options.filePath = (dir.path() + QStringLiteral("/cli.log")).toStdString();
        options.rank = 3;
        QCOMPARE(QString::fromStdString(pb::logFilePath(options)), dir.path() + QStringLiteral("/cli.rank3.log"));
        QVERIFY(pb::initLogging(options));
        spdlog::info("a line from rank {}", 3);
        spdlog::default_logger()->flush();
        QFile file(dir.path() + QStringLiteral("/cli.rank3.log"));
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(file.readAll().contains("a line from rank 3"));
        QVERIFY(!QFile::exists(dir.path() + QStringLiteral("/cli.log")));

        options.rank = -1;
        QCOMPARE(QString::fromStdString(pb::logFilePath(options)), dir.path() + QStringLiteral("/cli.log"));
        options.rank = 0;
        options.filePath = "/var/tmp/x.d/plain";
        QCOMPARE(QString::fromStdString(pb::logFilePath(options)), QStringLiteral("/var/tmp/x.d/plain.rank0"));
    }

    void unknownLevelIsRefused()
    {
        QVERIFY(!pb::setLogLevel("loud"));
        QVERIFY(pb::setLogLevel("debug"));
        QCOMPARE(spdlog::get_level(), spdlog::level::debug);
        QVERIFY(pb::setLogLevel("off"));
        QVERIFY(pb::setLogLevel("info"));
    }
};

QTEST_GUILESS_MAIN(TestLogging)
#include "tst_logging.moc"
