// Catalog files with bad prices and cards (data/catalog): `catalog use`, `catalog validate` and
// `compare --catalog` refuse each with exit code 2 naming the field or the file, and the catalog in
// use, the history and the file itself stay as they were.
#include "robustness/RefusalCheck.h"

class TestCatalogRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("catalog"), error), qPrintable(error));
        m_suite.runAll();
    }
    // Every bad file differs from this one in one defect only, so it must itself be accepted.
    void baseIsAccepted()
    {
        const auto r = m_suite.runHere({QStringLiteral("catalog"), QStringLiteral("validate"), pbtest::corpusFolder(QStringLiteral("catalog")) + QStringLiteral("/base.json")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }
};

QTEST_GUILESS_MAIN(TestCatalogRobustness)
#include "tst_catalog.moc"
