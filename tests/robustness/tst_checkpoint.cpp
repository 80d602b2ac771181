// Damaged checkpoints (data/checkpoint/inputs.tsv, each damage applied to a fresh copy of a real
// one): `checkpoint verify` and `pilot --resume-from` refuse each with exit code 2 naming the file,
// before anything is recorded, and leave the checkpoint and the history as they were.
#include "robustness/CheckpointDamage.h"

class TestCheckpointRobustness : public QObject {
    Q_OBJECT
    pbtest::RefusalSuite m_suite;
    QString m_step;  // the reference checkpoint: preset:tiny after two steps
    QString m_other; // one of another shape, whose files some damages swap in

    QString stepFolder(const QString &dir) const
    {
        const QStringList steps = QDir(dir).entryList({QStringLiteral("step-*")}, QDir::Dirs, QDir::Name);
        return steps.isEmpty() ? QString() : QDir(dir).filePath(steps.last());
    }

private Q_SLOTS:
    void initTestCase()
    {
        // The reference pilot's history is every row's seed database.
        const auto reference = m_suite.runHere({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                                                QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), m_suite.work(QStringLiteral("reference")),
                                                QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), m_suite.work(QStringLiteral("seed.sqlite"))});
        QVERIFY2(reference.exitCode == 0, reference.err.constData());
        const auto other = m_suite.runHere({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--set"),
                                            QStringLiteral("model.hidden_size=128"), QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0"),
                                            QStringLiteral("--checkpoint-dir"), m_suite.work(QStringLiteral("other")), QStringLiteral("--checkpoint-at-end"),
                                            QStringLiteral("--db"), m_suite.work(QStringLiteral("other.sqlite"))});
        QVERIFY2(other.exitCode == 0, other.err.constData());
        m_step = stepFolder(m_suite.work(QStringLiteral("reference")));
        m_other = stepFolder(m_suite.work(QStringLiteral("other")));
        QVERIFY(!m_step.isEmpty() && !m_other.isEmpty());

        QString error;
        QVERIFY2(m_suite.start(QStringLiteral("checkpoint"), error, m_suite.work(QStringLiteral("seed.sqlite"))), qPrintable(error));
        m_suite.setInputMaker([this](const pbtest::Sandbox &box, const pbtest::CorpusRow &row, QString &error) {
            const QString copy = QDir(box.inputs()).filePath(QFileInfo(m_step).fileName());
            if (!pbtest::copyRecursively(m_step, copy))
                error += QStringLiteral("cannot copy the reference checkpoint\n");
            else
                error += pbtest::damageCheckpoint(copy, row.input, m_suite.setup().surfaceFolder, m_other);
            return copy;
        });
        m_suite.runAll();
    }
    // The damages are the only defects: the copy as written verifies and resumes.
    void undamagedIsAccepted()
    {
        const pbtest::Sandbox box(m_suite.setup().seedDatabase);
        const QString copy = QDir(box.inputs()).filePath(QFileInfo(m_step).fileName());
        QVERIFY(box.isValid() && pbtest::copyRecursively(m_step, copy));
        auto r = m_suite.runHere({QStringLiteral("checkpoint"), QStringLiteral("verify"), copy});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = m_suite.runHere({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                             QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--resume-from"), copy, QStringLiteral("--db"), box.database()});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
    void refused_data() { m_suite.addRows(); }
    void refused() { m_suite.verifyRow(); }
};

QTEST_GUILESS_MAIN(TestCheckpointRobustness)
#include "tst_checkpoint.moc"
