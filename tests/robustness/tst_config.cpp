// Run configs a hostile or careless user hands the CLI (data/config): each is refused with exit
// code 2 and a message naming the field or the file, and nothing it was given changes.
#include "robustness/RefusalCheck.h"

class TestConfigRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("config"), error), qPrintable(error));
        m_suite.runAll();
    }
    // Every bad file differs from this one in one defect only, so it must itself be accepted.
    void baseIsAccepted()
    {
        const auto r = m_suite.runHere({QStringLiteral("config"), QStringLiteral("show"), pbtest::corpusFolder(QStringLiteral("config")) + QStringLiteral("/base.json")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }
};

QTEST_GUILESS_MAIN(TestConfigRobustness)
#include "tst_config.moc"
