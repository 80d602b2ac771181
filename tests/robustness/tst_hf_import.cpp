// Hugging Face config.json files `config import-hf` is given (data/hf-import): each is refused
// with exit code 2 and a message naming the field or the file; nothing is written or changed.
#include "robustness/RefusalCheck.h"

class TestHfImportRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("hf-import"), error), qPrintable(error));
        m_suite.runAll();
    }
    // Every bad file differs from this one in one defect only, so it must itself be accepted.
    void baseIsAccepted()
    {
        const auto r = m_suite.runHere({QStringLiteral("config"), QStringLiteral("import-hf"), pbtest::corpusFolder(QStringLiteral("hf-import")) + QStringLiteral("/base.json")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }
};

QTEST_GUILESS_MAIN(TestHfImportRobustness)
#include "tst_hf_import.moc"
