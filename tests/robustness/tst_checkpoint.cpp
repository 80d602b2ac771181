// Damaged checkpoints of the format written now (data/checkpoint/inputs.tsv): refused with exit
// code 2 naming the file, before anything is recorded; nothing changed.
#include "robustness/CheckpointCorpus.h"

class TestCheckpointRobustness : public QObject {
    Q_OBJECT
    pbtest::CheckpointCorpus m_corpus;

private Q_SLOTS:
    void initTestCase()
    {
        const QString error = m_corpus.start(QStringLiteral("checkpoint"), pbtest::CheckpointCorpus::written());
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }
    void undamagedIsAccepted()
    {
        const QString error = m_corpus.undamagedIsAccepted();
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }
    void refused_data() { m_corpus.suite().addRows(); }
    void refused() { m_corpus.suite().verifyRow(); }
};

QTEST_GUILESS_MAIN(TestCheckpointRobustness)
#include "tst_checkpoint.moc"
