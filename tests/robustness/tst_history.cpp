// The history's inputs and outputs (data/history): malformed exports and exports of runs this build
// would refuse are not imported, and no --out may name the history database, the command's own input
// or a folder. Each is refused with exit code 2 naming the field or the file, the database untouched.
#include "robustness/RefusalCheck.h"

class TestHistoryRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("history"), error), qPrintable(error));
        m_suite.runAll();
    }
    // Every bad export differs from this one in one defect only, so it must itself import.
    void baseIsAccepted()
    {
        const pbtest::Sandbox box(m_suite.setup().seedDatabase);
        QVERIFY(box.isValid());
        const auto r = m_suite.runHere({QStringLiteral("history"), QStringLiteral("import"), pbtest::corpusFolder(QStringLiteral("history")) + QStringLiteral("/export-base.json"),
                                        QStringLiteral("--db"), box.database()});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }
};

QTEST_GUILESS_MAIN(TestHistoryRobustness)
#include "tst_history.moc"
