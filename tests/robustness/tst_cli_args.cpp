// Bad command lines (data/cli-args/invocations.tsv): out-of-range counts, unknown options and
// pieces, malformed sizes and ids are refused with exit code 2 naming the option, before anything
// runs or is recorded.
#include "robustness/RefusalCheck.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

class TestCliArgsRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("cli-args"), error), qPrintable(error));
        m_suite.runAll();
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }

    // A --checkpoint-dir that is a regular file is refused before the first step, not when the
    // first checkpoint is due: with this many steps, training first would run far past the limit
    // and leave the run recorded as running.
    void checkpointDirIsAFileFailsBeforeTraining()
    {
        const pbtest::Sandbox box(m_suite.setup().seedDatabase);
        QVERIFY(box.isValid());
        const QString file = QDir(box.outputs()).filePath(QStringLiteral("not-a-folder"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly) && f.write("a file\n") > 0);
        f.close();
        QElapsedTimer timer;
        timer.start();
        const auto r = pbtest::runCliBytes({QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"),
                                            QStringLiteral("--steps"), QStringLiteral("100000"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), file,
                                            QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), box.database()},
                                           15000, box.environment());
        const qint64 elapsedMs = timer.elapsed();
        QVERIFY2(r.exitCode == 2, qPrintable(QStringLiteral("exit %1 after %2 ms: %3").arg(r.exitCode).arg(elapsedMs).arg(QString::fromUtf8(r.err))));
        QVERIFY2(r.err.contains("--checkpoint-dir") || r.err.contains("not-a-folder"), r.err.constData());
        QVERIFY2(elapsedMs < 10000, qPrintable(QStringLiteral("took %1 ms").arg(elapsedMs)));
        const auto history = pbtest::runCliBytes({QStringLiteral("history"), QStringLiteral("--json"), QStringLiteral("--db"), box.database()}, 60000, box.environment());
        QCOMPARE(history.exitCode, 0);
        const QJsonArray runs = QJsonDocument::fromJson(history.out).object().value(QStringLiteral("runs")).toArray();
        QVERIFY(!runs.isEmpty()); // the seed's run
        for (const auto &run : runs)
            QVERIFY2(run.toObject().value(QStringLiteral("status")).toString() != QLatin1String("running"), history.out.constData());
    }
};

QTEST_GUILESS_MAIN(TestCliArgsRobustness)
#include "tst_cli_args.moc"
