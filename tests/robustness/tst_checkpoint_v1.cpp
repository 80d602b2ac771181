// Damaged checkpoints of format version 1 (torch archives, written by the landed version and
// committed under tests/data/checkpoint-v1): this build still reads them, and still refuses every
// damage of data/checkpoint-v1/inputs.tsv with exit code 2 naming the file; nothing changed.
#include "robustness/CheckpointCorpus.h"

class TestCheckpointV1Robustness : public QObject {
    Q_OBJECT
    pbtest::CheckpointCorpus m_corpus;

private Q_SLOTS:
    void initTestCase()
    {
        const QString fixtures = QStringLiteral(PB_SOURCE_DIR "/tests/data/checkpoint-v1/");
        const QString error = m_corpus.start(QStringLiteral("checkpoint-v1"), pbtest::CheckpointCorpus::committed(fixtures + QStringLiteral("tiny-step-00000002"),
                                                                                                                   fixtures + QStringLiteral("tiny-hidden32-step-00000001")));
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

QTEST_GUILESS_MAIN(TestCheckpointV1Robustness)
#include "tst_checkpoint_v1.moc"
