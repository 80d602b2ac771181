#pragma once
// The damaged-checkpoint corpus of one format (data/<surface>/inputs.tsv): each row damages a fresh
// copy of a reference checkpoint; `checkpoint verify` and `pilot --resume-from` refuse each with
// exit code 2 naming the file, before anything is recorded, and leave the checkpoint and the history
// as they were. The reference is preset:tiny after two steps; `other` is one of another shape whose
// files some damages swap in.
#include "robustness/CheckpointDamage.h"

namespace pbtest {

class CheckpointCorpus {
public:
    // Where the references come from: `reference` and `other` step folders, made or copied into
    // the suite's work folder.
    using References = std::function<bool(RefusalSuite &suite, QString &reference, QString &other, QString &error)>;

    static QString stepFolder(const QString &dir)
    {
        const QStringList steps = QDir(dir).entryList({QStringLiteral("step-*")}, QDir::Dirs, QDir::Name);
        return steps.isEmpty() ? QString() : QDir(dir).filePath(steps.last());
    }

    // The references as this build writes them.
    static References written()
    {
        return [](RefusalSuite &suite, QString &reference, QString &other, QString &error) {
            auto pilot = [&suite](const QStringList &sets, const QString &steps, const QString &dir) {
                return suite.runHere(QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny")} + sets +
                                     QStringList {QStringLiteral("--steps"), steps, QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"),
                                                  suite.work(dir), QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), suite.work(dir + QStringLiteral(".sqlite"))});
            };
            const auto a = pilot({}, QStringLiteral("2"), QStringLiteral("reference"));
            const auto b = pilot({QStringLiteral("--set"), QStringLiteral("model.hidden_size=128")}, QStringLiteral("1"), QStringLiteral("other"));
            if (a.exitCode != 0 || b.exitCode != 0) {
                error = QString::fromUtf8(a.err + b.err);
                return false;
            }
            reference = stepFolder(suite.work(QStringLiteral("reference")));
            other = stepFolder(suite.work(QStringLiteral("other")));
            return true;
        };
    }

    // Fixtures committed under tests/data (written by an earlier version of the format).
    static References committed(const QString &reference, const QString &other)
    {
        return [reference, other](RefusalSuite &suite, QString &r, QString &o, QString &error) {
            r = suite.work(QStringLiteral("reference/") + QFileInfo(reference).fileName());
            o = suite.work(QStringLiteral("other/") + QFileInfo(other).fileName());
            if (!copyRecursively(reference, r) || !copyRecursively(other, o)) {
                error = QStringLiteral("cannot copy the committed checkpoints");
                return false;
            }
            return true;
        };
    }

    // Runs every row; QVERIFY-style failures come back as text.
    QString start(const QString &surface, const References &references)
    {
        QString error;
        // The history every row starts from, and the references.
        const auto seed = m_suite.runHere({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                                           QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), m_suite.work(QStringLiteral("seed.sqlite"))});
        if (seed.exitCode != 0)
            return QString::fromUtf8(seed.err);
        if (!references(m_suite, m_step, m_other, error))
            return error;
        if (m_step.isEmpty() || m_other.isEmpty())
            return QStringLiteral("no reference checkpoint");
        if (!m_suite.start(surface, error, m_suite.work(QStringLiteral("seed.sqlite"))))
            return error;
        m_suite.setInputMaker([this](const Sandbox &box, const CorpusRow &row, QString &error) {
            const QString copy = QDir(box.inputs()).filePath(QFileInfo(m_step).fileName());
            if (!copyRecursively(m_step, copy))
                error += QStringLiteral("cannot copy the reference checkpoint\n");
            else
                error += damageCheckpoint(copy, row.input, m_suite.setup().surfaceFolder, m_other);
            return copy;
        });
        m_suite.runAll();
        return {};
    }

    // The damages are the only defects: the copy as written verifies and resumes.
    QString undamagedIsAccepted()
    {
        const Sandbox box(m_suite.setup().seedDatabase);
        const QString copy = QDir(box.inputs()).filePath(QFileInfo(m_step).fileName());
        if (!box.isValid() || !copyRecursively(m_step, copy))
            return QStringLiteral("cannot copy the reference");
        auto r = m_suite.runHere({QStringLiteral("checkpoint"), QStringLiteral("verify"), copy});
        if (r.exitCode != 0)
            return QString::fromUtf8(r.err);
        r = m_suite.runHere({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                             QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--resume-from"), copy, QStringLiteral("--db"), box.database()});
        return r.exitCode == 0 ? QString() : QString::fromUtf8(r.err);
    }

    RefusalSuite &suite() { return m_suite; }

private:
    RefusalSuite m_suite;
    QString m_step;
    QString m_other;
};

} // namespace pbtest
