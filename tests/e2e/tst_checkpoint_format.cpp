// The checkpoint format through pilotbench-cli as a user meets it: the safetensors files hold the
// model's parameters under their Hugging Face names with the values the run had, readable by any
// safetensors reader; a checkpoint of the landed format (version 1) still restores bit for bit; and
// a sharded checkpoint of a multi-process run restores in as many fresh processes.
#include "e2e/CliProcess.h"
#include "config/ParameterTable.h"
#include "config/RunConfigJson.h"
#include "util/Sha256.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <set>

namespace {

QJsonObject lastJson(const QByteArray &out)
{
    const auto lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last()).object();
}

struct StoredTensor {
    QString name, dtype;
    QList<qint64> shape;
    QByteArray bytes;
    qint64 begin = 0;
};

// What any safetensors reader does (no code of ours): 8-byte little-endian header length, the JSON
// header, then the raw data.
QList<StoredTensor> readSafetensors(const QString &path, QJsonObject *metadata = nullptr)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray all = f.readAll();
    quint64 n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | static_cast<uchar>(all[i]);
    const QJsonObject header = QJsonDocument::fromJson(all.mid(8, static_cast<qsizetype>(n))).object();
    const QByteArray data = all.mid(8 + static_cast<qsizetype>(n));
    QList<StoredTensor> out;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == QLatin1String("__metadata__")) {
            if (metadata)
                *metadata = it.value().toObject();
            continue;
        }
        const QJsonObject e = it.value().toObject();
        StoredTensor t;
        t.name = it.key();
        t.dtype = e.value(QStringLiteral("dtype")).toString();
        for (const auto &d : e.value(QStringLiteral("shape")).toArray())
            t.shape << d.toInteger();
        const QJsonArray offsets = e.value(QStringLiteral("data_offsets")).toArray();
        t.begin = offsets.at(0).toInteger();
        t.bytes = data.mid(t.begin, offsets.at(1).toInteger() - t.begin);
        out << t;
    }
    // In the order the writer laid them out, which is the order the engine holds them in.
    std::sort(out.begin(), out.end(), [](const StoredTensor &a, const StoredTensor &b) { return a.begin < b.begin; });
    return out;
}

// The engine's state digest of a piece: SHA-256 over each tensor's name and bytes, in its order.
std::string digestOf(const QList<StoredTensor> &tensors)
{
    pb::Sha256 hash;
    for (const auto &t : tensors) {
        const QByteArray name = t.name.toUtf8();
        hash.add(name.constData(), static_cast<size_t>(name.size()));
        hash.add(t.bytes.constData(), static_cast<size_t>(t.bytes.size()));
    }
    return hash.hexDigest();
}

} // namespace

class TestCheckpointFormat : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString path(const QString &name) const { return m_dir.filePath(name); }

private Q_SLOTS:
    void filesHoldTheRunsTensors_data()
    {
        QTest::addColumn<QStringList>("sets");
        QTest::newRow("full fp32") << QStringList {};
        QTest::newRow("lora bf16") << QStringList {QStringLiteral("--set"), QStringLiteral("train.mode=lora"), QStringLiteral("--set"), QStringLiteral("train.precision=bf16")};
        QTest::newRow("tied embeddings") << QStringList {QStringLiteral("--set"), QStringLiteral("model.tie_embeddings=true")};
    }
    void filesHoldTheRunsTensors()
    {
        QFETCH(QStringList, sets);
        const QString dir = path(QStringLiteral("format-") + QString::number(qHash(sets.join(QLatin1Char(' ')))));
        const auto r = pbtest::runCliBytes(QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"),
                                                        QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), dir,
                                                        QStringLiteral("--checkpoint-at-end"), QStringLiteral("--jsonl"), QStringLiteral("--db"), path(QStringLiteral("h.db"))} + sets);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject digest = lastJson(r.out).value(QStringLiteral("checkpoint_digest")).toObject();
        const QString step = dir + QStringLiteral("/step-00000002/");
        QStringList overrides;
        for (int i = 1; i < sets.size(); i += 2)
            overrides << sets[i];
        const pb::RunConfig config = pb::loadRunConfig(QStringLiteral("preset:tiny"), overrides);

        QJsonObject metadata;
        const auto model = readSafetensors(step + QStringLiteral("model.safetensors"), &metadata);
        QCOMPARE(metadata.value(QStringLiteral("format")).toString(), QStringLiteral("pt")); // what transformers asks of a file it loads
        std::set<QString> names;
        for (const auto &t : model)
            names.insert(t.name);
        QCOMPARE(names.size(), size_t(model.size()));
        for (const pb::ParameterInfo &p : pb::parameterTable(config)) {
            const auto it = std::find_if(model.begin(), model.end(), [&](const StoredTensor &t) { return t.name.toStdString() == p.name; });
            QVERIFY2(it != model.end(), p.name.c_str());
            QCOMPARE(it->shape, QList<qint64>(p.shape.begin(), p.shape.end()));
            const qint64 elements = std::accumulate(p.shape.begin(), p.shape.end(), qint64(1), std::multiplies<qint64>());
            QCOMPARE(it->bytes.size(), elements * (it->dtype == QLatin1String("F32") ? 4 : 2));
            QVERIFY(it->dtype == QLatin1String("F32") || it->dtype == QLatin1String("BF16"));
            names.erase(it->name);
        }
        QVERIFY2(names.empty(), "the model file holds tensors the model does not have");
        // The values are the run's: the engine's digest of its live parameters at the checkpoint.
        QCOMPARE(digestOf(model), digest.value(QStringLiteral("model")).toString().toStdString());
        QCOMPARE(digestOf(readSafetensors(step + QStringLiteral("optimizer.safetensors"))), digest.value(QStringLiteral("optimizer")).toString().toStdString());
        QCOMPARE(digestOf(readSafetensors(step + QStringLiteral("rng.safetensors"))), digest.value(QStringLiteral("rng")).toString().toStdString());
    }

    // A checkpoint the landed version wrote (torch archives) resumes here exactly where an
    // uninterrupted run of today's build goes.
    void versionOneCheckpointRestoresBitwise()
    {
        const QString fixture = QStringLiteral(PB_SOURCE_DIR "/tests/data/checkpoint-v1/tiny-step-00000002");
        auto r = pbtest::runCliBytes({QStringLiteral("checkpoint"), QStringLiteral("verify"), fixture});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = pbtest::runCliBytes({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("3"),
                                 QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--param-checksum"), QStringLiteral("--jsonl"), QStringLiteral("--db"),
                                 path(QStringLiteral("v1.db"))});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject straight = lastJson(r.out);
        r = pbtest::runCliBytes({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                                 QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--resume-from"), fixture, QStringLiteral("--param-checksum"),
                                 QStringLiteral("--jsonl"), QStringLiteral("--db"), path(QStringLiteral("v1.db"))});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject resumed = lastJson(r.out);
        QCOMPARE(resumed.value(QStringLiteral("first_step")).toInteger(), 3);
        QCOMPARE(resumed.value(QStringLiteral("losses")).toArray().at(0).toDouble(), straight.value(QStringLiteral("losses")).toArray().at(2).toDouble());
        QCOMPARE(resumed.value(QStringLiteral("parameter_checksum")).toString(), straight.value(QStringLiteral("parameter_checksum")).toString());
    }

    // A later checkpoint of the same step replaces the earlier in one rename: the folder is
    // complete before and after, and nothing of the writer is left beside it.
    void rewritingAStepReplacesItWhole()
    {
        const QString dir = path(QStringLiteral("rewrite"));
        const QStringList pilot {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                                 QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--checkpoint-at-end"),
                                 QStringLiteral("--db"), path(QStringLiteral("h.db"))};
        QCOMPARE(pbtest::runCliBytes(pilot).exitCode, 0);
        QCOMPARE(pbtest::runCliBytes(pilot + QStringList {QStringLiteral("--set"), QStringLiteral("train.lr=0.01")}).exitCode, 0);
        QCOMPARE(QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot), QStringList {QStringLiteral("step-00000002")});
        const auto r = pbtest::runCliBytes({QStringLiteral("checkpoint"), QStringLiteral("verify"), QStringLiteral("--json"), dir});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    // Each strategy on two CPU ranks (Gloo): `scale-worker`s write one checkpoint, two fresh ones
    // restore it and continue bit for bit.
    void shardedProofPasses_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::newRow("ddp") << QStringLiteral("ddp");
        QTest::newRow("zero2") << QStringLiteral("zero2");
        QTest::newRow("fsdp") << QStringLiteral("fsdp");
    }
    void shardedProofPasses()
    {
        QFETCH(QString, strategy);
        const QString dir = path(QStringLiteral("sharded-") + strategy);
        const auto r = pbtest::runCliBytes({QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--gpus"),
                                            QStringLiteral("2"), QStringLiteral("--strategy"), strategy, QStringLiteral("--threads"), QStringLiteral("1"),
                                            QStringLiteral("--steps-before"), QStringLiteral("2"), QStringLiteral("--steps-after"), QStringLiteral("2"), QStringLiteral("--jsonl"),
                                            QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--db"), path(QStringLiteral("s.db"))},
                                           300000);
        QVERIFY2(r.exitCode == 0, (r.out + r.err).constData());
        const QJsonObject s = lastJson(r.out);
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("pass"));
        QCOMPARE(s.value(QStringLiteral("gpus")).toInt(), 2);
        QCOMPARE(s.value(QStringLiteral("strategy")).toString(), strategy);
        // Every rank's files are in the one manifest.
        const auto v = pbtest::runCliBytes({QStringLiteral("checkpoint"), QStringLiteral("verify"), QStringLiteral("--json"), s.value(QStringLiteral("checkpoint_path")).toString()});
        QVERIFY2(v.exitCode == 0, v.err.constData());
        QStringList files;
        for (const auto &f : QJsonDocument::fromJson(v.out).object().value(QStringLiteral("files")).toArray())
            files << f.toObject().value(QStringLiteral("file")).toString();
        QVERIFY2(files.contains(QStringLiteral("rng.rank00001.safetensors")), qPrintable(files.join(QLatin1Char(' '))));
        if (strategy != QLatin1String("ddp"))
            QVERIFY2(files.contains(QStringLiteral("optimizer.rank00001.safetensors")), qPrintable(files.join(QLatin1Char(' '))));
        if (strategy == QLatin1String("fsdp"))
            QVERIFY2(files.contains(QStringLiteral("model.rank00001.safetensors")), qPrintable(files.join(QLatin1Char(' '))));
        else
            QVERIFY2(files.contains(QStringLiteral("model.safetensors")), qPrintable(files.join(QLatin1Char(' '))));

        // The same checkpoint onto one process is refused, naming why.
        const auto one = pbtest::runCliBytes({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                                              QStringLiteral("--resume-from"), s.value(QStringLiteral("checkpoint_path")).toString(), QStringLiteral("--db"),
                                              path(QStringLiteral("s.db"))});
        QCOMPARE(one.exitCode, 2);
        QVERIFY2(one.err.contains("same rank count"), one.err.constData());
    }

    // The proof of the proof, sharded: a rank that leaves its optimizer shard unrestored is caught.
    void shardedDroppedStateIsNamed()
    {
        const auto r = pbtest::runCliBytes({QStringLiteral("restore-check"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--gpus"),
                                            QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("fsdp"), QStringLiteral("--threads"), QStringLiteral("1"),
                                            QStringLiteral("--steps-before"), QStringLiteral("2"), QStringLiteral("--steps-after"), QStringLiteral("2"),
                                            QStringLiteral("--drop-state"), QStringLiteral("optimizer"), QStringLiteral("--jsonl"), QStringLiteral("--checkpoint-dir"),
                                            path(QStringLiteral("sharded-drop")), QStringLiteral("--db"), path(QStringLiteral("s.db"))},
                                           300000);
        QCOMPARE(r.exitCode, 1);
        const QJsonObject s = lastJson(r.out);
        QCOMPARE(s.value(QStringLiteral("verdict")).toString(), QStringLiteral("fail"));
        QStringList differing;
        for (const auto &d : s.value(QStringLiteral("differing")).toArray())
            differing << d.toString();
        QVERIFY2(differing.contains(QStringLiteral("optimizer")), r.out.constData());
    }
};

QTEST_GUILESS_MAIN(TestCheckpointFormat)
#include "tst_checkpoint_format.moc"
