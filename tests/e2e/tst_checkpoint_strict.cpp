// Issue 35: checkpoint files checked to the letter of the format. Each row makes a checkpoint the
// way a writer bug or a hand edit would (files edited by hand, the manifest's sizes and SHA-256
// recomputed so they agree), then `checkpoint verify` must refuse it naming the file and the tensor
// (or field), and `pilot --resume-from` on it must refuse it too and record no run. Real
// checkpoints of several configurations must still verify and resume.
#include "e2e/CliProcess.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>

namespace {

// One tensor of a safetensors header, as this test writes it by hand (no code of ours reads it).
struct Entry {
    QString name, dtype;
    QList<qint64> shape;
    qint64 begin = 0, end = 0;
};

struct TensorFile {
    QByteArray metadata; // the raw JSON of __metadata__, or empty for none
    QList<Entry> entries; // in data order
    QByteArray data;
};

QByteArray readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

bool writeAll(const QString &path, const QByteArray &bytes)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(bytes) == bytes.size();
}

TensorFile readTensorFile(const QString &path)
{
    const QByteArray all = readAll(path);
    quint64 n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | static_cast<uchar>(all[i]);
    const QJsonObject header = QJsonDocument::fromJson(all.mid(8, static_cast<qsizetype>(n))).object();
    TensorFile t;
    t.data = all.mid(8 + static_cast<qsizetype>(n));
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == QLatin1String("__metadata__")) {
            t.metadata = QJsonDocument(it.value().toObject()).toJson(QJsonDocument::Compact);
            continue;
        }
        const QJsonObject o = it.value().toObject();
        Entry e;
        e.name = it.key();
        e.dtype = o.value(QStringLiteral("dtype")).toString();
        for (const auto &d : o.value(QStringLiteral("shape")).toArray())
            e.shape << d.toInteger();
        e.begin = o.value(QStringLiteral("data_offsets")).toArray().at(0).toInteger();
        e.end = o.value(QStringLiteral("data_offsets")).toArray().at(1).toInteger();
        t.entries << e;
    }
    std::sort(t.entries.begin(), t.entries.end(), [](const Entry &a, const Entry &b) { return a.begin < b.begin; });
    return t;
}

// The header as raw text, so it can say what a JSON object cannot hold (the same name twice).
bool writeTensorFile(const QString &path, const TensorFile &t)
{
    QByteArray json = "{";
    if (!t.metadata.isEmpty())
        json += "\"__metadata__\":" + t.metadata;
    for (const Entry &e : t.entries) {
        if (json.size() > 1)
            json += ',';
        QByteArray shape;
        for (qint64 d : e.shape)
            shape += (shape.isEmpty() ? "" : ",") + QByteArray::number(d);
        json += "\"" + e.name.toUtf8() + "\":{\"dtype\":\"" + e.dtype.toUtf8() + "\",\"shape\":[" + shape + "],\"data_offsets\":[" + QByteArray::number(e.begin) +
                "," + QByteArray::number(e.end) + "]}";
    }
    json += '}';
    json += QByteArray((8 - json.size() % 8) % 8, ' ');
    QByteArray bytes(8, '\0');
    quint64 length = static_cast<quint64>(json.size());
    for (int i = 0; i < 8; ++i, length >>= 8)
        bytes[i] = static_cast<char>(length & 0xff);
    return writeAll(path, bytes + json + t.data);
}

int indexOf(const TensorFile &t, const QString &name)
{
    for (int i = 0; i < t.entries.size(); ++i)
        if (t.entries[i].name == name)
            return i;
    return -1;
}

// Removes a tensor and its bytes; the later tensors move down so the data stays contiguous.
void dropTensor(TensorFile &t, int i)
{
    const Entry gone = t.entries.takeAt(i);
    t.data.remove(gone.begin, gone.end - gone.begin);
    for (Entry &e : t.entries)
        if (e.begin >= gone.end) {
            e.begin -= gone.end - gone.begin;
            e.end -= gone.end - gone.begin;
        }
}

// Every file's size and SHA-256 in manifest.json recomputed: the forgery is consistent.
bool resealManifest(const QString &dir)
{
    const QString manifestPath = dir + QStringLiteral("/manifest.json");
    QJsonObject manifest = QJsonDocument::fromJson(readAll(manifestPath)).object();
    QJsonArray files;
    for (const auto &v : manifest.value(QStringLiteral("files")).toArray()) {
        QJsonObject f = v.toObject();
        const QByteArray bytes = readAll(dir + QLatin1Char('/') + f.value(QStringLiteral("file")).toString());
        f.insert(QStringLiteral("bytes"), static_cast<qint64>(bytes.size()));
        f.insert(QStringLiteral("sha256"), QString::fromLatin1(QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex()));
        files.append(f);
    }
    manifest.insert(QStringLiteral("files"), files);
    return writeAll(manifestPath, QJsonDocument(manifest).toJson());
}

bool copyFolder(const QString &from, const QString &to)
{
    if (!QDir().mkpath(to))
        return false;
    for (const QString &name : QDir(from).entryList(QDir::Files))
        if (!QFile::copy(from + QLatin1Char('/') + name, to + QLatin1Char('/') + name))
            return false;
    return true;
}

} // namespace

class TestCheckpointStrict : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_original; // a real checkpoint of preset:tiny (AdamW, fp32) at step 2

    QString path(const QString &name) const { return m_dir.filePath(name); }

    QStringList pilot(const QStringList &extra) const
    {
        return QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--warmup"), QStringLiteral("0")} + extra;
    }

    // Applies `mutation` to the copy in `dir`; returns the tensor (or field) the refusal must name.
    QString mutate(const QString &mutation, const QString &dir)
    {
        const QString model = dir + QStringLiteral("/model.safetensors"), optimizer = dir + QStringLiteral("/optimizer.safetensors"),
                      rng = dir + QStringLiteral("/rng.safetensors");
        if (mutation == QLatin1String("optimizer and rng exchanged")) {
            const QByteArray o = readAll(optimizer), r = readAll(rng);
            writeAll(optimizer, r);
            writeAll(rng, o);
            return QStringLiteral("'cpu'");
        }
        if (mutation == QLatin1String("duplicate name over another's bytes")) {
            TensorFile t = readTensorFile(model);
            const int embed = indexOf(t, QStringLiteral("model.embed_tokens.weight"));
            Entry twin = t.entries[indexOf(t, QStringLiteral("lm_head.weight"))];
            twin.begin = t.entries[embed].begin;
            twin.end = t.entries[embed].end;
            t.entries << twin; // the second lm_head.weight, over embed_tokens' bytes
            writeTensorFile(model, t);
            return QStringLiteral("lm_head.weight");
        }
        if (mutation == QLatin1String("lm_head declared I32")) {
            TensorFile t = readTensorFile(model);
            t.entries[indexOf(t, QStringLiteral("lm_head.weight"))].dtype = QStringLiteral("I32");
            writeTensorFile(model, t);
            return QStringLiteral("lm_head.weight");
        }
        if (mutation == QLatin1String("overlapping data_offsets")) {
            // Two norms of the same size share one range; the second's own bytes are gone.
            TensorFile t = readTensorFile(model);
            const int a = indexOf(t, QStringLiteral("model.layers.0.input_layernorm.weight"));
            const int b = indexOf(t, QStringLiteral("model.layers.0.post_attention_layernorm.weight"));
            const Entry keep = t.entries[b];
            dropTensor(t, b);
            Entry shared = keep;
            shared.begin = t.entries[a].begin;
            shared.end = t.entries[a].end;
            t.entries.insert(a + 1, shared);
            writeTensorFile(model, t);
            return QStringLiteral("model.layers.0.post_attention_layernorm.weight");
        }
        if (mutation == QLatin1String("64 bytes after the last tensor")) {
            TensorFile t = readTensorFile(model);
            t.data += QByteArray(64, '\0');
            writeTensorFile(model, t);
            return t.entries.last().name;
        }
        if (mutation == QLatin1String("optimizer moment transposed")) {
            TensorFile t = readTensorFile(optimizer);
            for (Entry &e : t.entries)
                if (e.name.startsWith(QLatin1String("exp_avg.")) && e.shape.size() == 2 && e.shape[0] != e.shape[1]) {
                    std::swap(e.shape[0], e.shape[1]);
                    writeTensorFile(optimizer, t);
                    return e.name;
                }
            return QStringLiteral("<no non-square moment>");
        }
        if (mutation == QLatin1String("optimizer moment missing")) {
            TensorFile t = readTensorFile(optimizer);
            const int i = indexOf(t, QStringLiteral("exp_avg_sq.3"));
            if (i < 0)
                return QStringLiteral("<no exp_avg_sq.3>");
            dropTensor(t, i);
            writeTensorFile(optimizer, t);
            return QStringLiteral("exp_avg_sq.3");
        }
        if (mutation == QLatin1String("non-string metadata")) {
            TensorFile t = readTensorFile(model);
            t.metadata = "{\"format\":\"pt\",\"step\":2}";
            writeTensorFile(model, t);
            return QStringLiteral("__metadata__.step");
        }
        if (mutation == QLatin1String("state.json names another optimizer")) {
            QJsonObject state = QJsonDocument::fromJson(readAll(dir + QStringLiteral("/state.json"))).object();
            state.insert(QStringLiteral("optimizer"), QStringLiteral("torch::optim"));
            writeAll(dir + QStringLiteral("/state.json"), QJsonDocument(state).toJson());
            return QStringLiteral("optimizer");
        }
        // Beyond the corpus: the other rules of the format.
        if (mutation == QLatin1String("rng state cut short")) {
            TensorFile t = readTensorFile(rng);
            Entry &cpu = t.entries[indexOf(t, QStringLiteral("cpu"))];
            t.data.chop(8);
            cpu.end -= 8;
            cpu.shape = {cpu.end - cpu.begin};
            writeTensorFile(rng, t);
            return QStringLiteral("'cpu'");
        }
        if (mutation == QLatin1String("optimizer moment stored as F64")) {
            TensorFile t = readTensorFile(optimizer);
            const int i = indexOf(t, QStringLiteral("exp_avg.1"));
            QByteArray wide;
            const QByteArray narrow = t.data.mid(t.entries[i].begin, t.entries[i].end - t.entries[i].begin);
            for (qsizetype k = 0; k < narrow.size(); k += 4) {
                float f = 0;
                std::memcpy(&f, narrow.constData() + k, 4);
                const double d = f;
                wide.append(reinterpret_cast<const char *>(&d), 8);
            }
            const qint64 grow = wide.size() - narrow.size();
            t.data.replace(t.entries[i].begin, narrow.size(), wide);
            t.entries[i].dtype = QStringLiteral("F64");
            t.entries[i].end += grow;
            for (Entry &e : t.entries)
                if (e.begin > t.entries[i].begin) {
                    e.begin += grow;
                    e.end += grow;
                }
            writeTensorFile(optimizer, t);
            return QStringLiteral("exp_avg.1");
        }
        if (mutation == QLatin1String("a hole between tensors")) {
            TensorFile t = readTensorFile(model);
            Entry &last = t.entries.last();
            t.data.insert(last.begin, QByteArray(8, '\0'));
            last.begin += 8;
            last.end += 8;
            writeTensorFile(model, t);
            return last.name;
        }
        if (mutation == QLatin1String("metadata of another part")) {
            TensorFile t = readTensorFile(optimizer);
            t.metadata = "{\"format\":\"pt\"}";
            writeTensorFile(optimizer, t);
            return QStringLiteral("__metadata__");
        }
        return QStringLiteral("<unknown mutation>");
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const auto r = pbtest::runCliBytes(pilot({QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"), path(QStringLiteral("original")),
                                                  QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), path(QStringLiteral("original.db"))}));
        QVERIFY2(r.exitCode == 0, r.err.constData());
        m_original = path(QStringLiteral("original/step-00000002"));
    }

    void forgedCheckpointIsRefused_data()
    {
        QTest::addColumn<QString>("mutation");
        QTest::addColumn<QString>("file");
        // The corpus.
        QTest::newRow("optimizer and rng exchanged") << QStringLiteral("optimizer and rng exchanged") << QStringLiteral("optimizer.safetensors");
        QTest::newRow("duplicate name over another's bytes") << QStringLiteral("duplicate name over another's bytes") << QStringLiteral("model.safetensors");
        QTest::newRow("lm_head declared I32") << QStringLiteral("lm_head declared I32") << QStringLiteral("model.safetensors");
        QTest::newRow("overlapping data_offsets") << QStringLiteral("overlapping data_offsets") << QStringLiteral("model.safetensors");
        QTest::newRow("64 bytes after the last tensor") << QStringLiteral("64 bytes after the last tensor") << QStringLiteral("model.safetensors");
        QTest::newRow("optimizer moment transposed") << QStringLiteral("optimizer moment transposed") << QStringLiteral("optimizer.safetensors");
        QTest::newRow("optimizer moment missing") << QStringLiteral("optimizer moment missing") << QStringLiteral("optimizer.safetensors");
        QTest::newRow("non-string metadata") << QStringLiteral("non-string metadata") << QStringLiteral("model.safetensors");
        QTest::newRow("state.json names another optimizer") << QStringLiteral("state.json names another optimizer") << QStringLiteral("state.json");
        // The other rules.
        QTest::newRow("rng state cut short") << QStringLiteral("rng state cut short") << QStringLiteral("rng.safetensors");
        QTest::newRow("optimizer moment stored as F64") << QStringLiteral("optimizer moment stored as F64") << QStringLiteral("optimizer.safetensors");
        QTest::newRow("a hole between tensors") << QStringLiteral("a hole between tensors") << QStringLiteral("model.safetensors");
        QTest::newRow("metadata of another part") << QStringLiteral("metadata of another part") << QStringLiteral("optimizer.safetensors");
    }
    void forgedCheckpointIsRefused()
    {
        QFETCH(QString, mutation);
        QFETCH(QString, file);
        const QString dir = path(QStringLiteral("forged/") + QString::number(qHash(mutation)) + QStringLiteral("/step-00000002"));
        QVERIFY(copyFolder(m_original, dir));
        const QString named = mutate(mutation, dir);
        QVERIFY2(!named.startsWith(QLatin1Char('<')), qPrintable(named));
        QVERIFY(resealManifest(dir));
        // The forgery is consistent: the sizes and digests agree, so only the format rules can catch it.
        const QJsonObject manifest = QJsonDocument::fromJson(readAll(dir + QStringLiteral("/manifest.json"))).object();
        for (const auto &v : manifest.value(QStringLiteral("files")).toArray())
            QCOMPARE(v.toObject().value(QStringLiteral("bytes")).toInteger(), QFileInfo(dir + QLatin1Char('/') + v.toObject().value(QStringLiteral("file")).toString()).size());

        // Both are run before either is judged, so a failure reports what each did.
        const auto verify = pbtest::runCliBytes({QStringLiteral("checkpoint"), QStringLiteral("verify"), dir});
        const QString db = path(QStringLiteral("resume-") + QString::number(qHash(mutation)) + QStringLiteral(".db"));
        const auto resume = pbtest::runCliBytes(pilot({QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--resume-from"), dir, QStringLiteral("--db"), db}));
        QVERIFY2(verify.exitCode == 2, qPrintable(QStringLiteral("verify exited %1 (the forgery was %2), resume exited %3: %4")
                                                      .arg(verify.exitCode)
                                                      .arg(verify.exitCode == 0 ? QStringLiteral("accepted") : QStringLiteral("not refused as bad input"))
                                                      .arg(resume.exitCode)
                                                      .arg(QString::fromUtf8(verify.out + verify.err))));
        const QString why = QString::fromUtf8(verify.err);
        qInfo("verify: %s", qPrintable(why.trimmed()));
        QVERIFY2(why.contains(dir + QLatin1Char('/') + file), qPrintable(why));
        QVERIFY2(why.contains(named), qPrintable(QStringLiteral("does not name %1: %2").arg(named, why)));

        QVERIFY2(resume.exitCode == 2, qPrintable(QStringLiteral("resume exited %1: %2").arg(resume.exitCode).arg(QString::fromUtf8(resume.out + resume.err))));
        QVERIFY2(QString::fromUtf8(resume.err).contains(dir + QLatin1Char('/') + file), resume.err.constData());
        if (QFileInfo::exists(db)) { // nothing recorded: no run, running or otherwise
            const auto list = pbtest::runCliBytes({QStringLiteral("history"), QStringLiteral("list"), QStringLiteral("--json"), QStringLiteral("--db"), db});
            QCOMPARE(list.exitCode, 0);
            QCOMPARE(QJsonDocument::fromJson(list.out).object().value(QStringLiteral("runs")).toArray().size(), 0);
        }
    }

    // The strict rules refuse no checkpoint our writer makes: each configuration's checkpoint
    // verifies and resumes.
    void realCheckpointsVerifyAndResume_data()
    {
        QTest::addColumn<QString>("config");
        QTest::addColumn<QStringList>("sets");
        const QString tiny = QStringLiteral("preset:tiny"), moe = QStringLiteral("preset:tiny-moe");
        QTest::newRow("adamw fp32") << tiny << QStringList {};
        QTest::newRow("lora bf16-mixed") << tiny << QStringList {QStringLiteral("train.mode=lora"), QStringLiteral("train.precision=bf16-mixed")};
        QTest::newRow("full bf16") << tiny << QStringList {QStringLiteral("train.precision=bf16")};
        QTest::newRow("qlora bf16-mixed") << tiny << QStringList {QStringLiteral("train.mode=qlora"), QStringLiteral("train.precision=bf16-mixed")};
        QTest::newRow("tied embeddings") << tiny << QStringList {QStringLiteral("model.tie_embeddings=true")};
        QTest::newRow("sgd momentum") << tiny << QStringList {QStringLiteral("train.optimizer=sgd"), QStringLiteral("train.momentum=0.9")};
        QTest::newRow("sgd plain") << tiny << QStringList {QStringLiteral("train.optimizer=sgd"), QStringLiteral("train.momentum=0")};
        QTest::newRow("adagrad") << tiny << QStringList {QStringLiteral("train.optimizer=adagrad")};
        QTest::newRow("rmsprop momentum") << tiny << QStringList {QStringLiteral("train.optimizer=rmsprop"), QStringLiteral("train.momentum=0.9")};
        // Routed experts: torch::optim makes an expert's state only once it has had tokens.
        QTest::newRow("moe adamw") << moe << QStringList {};
        QTest::newRow("moe sgd momentum") << moe << QStringList {QStringLiteral("train.optimizer=sgd"), QStringLiteral("train.momentum=0.9")};
    }
    void realCheckpointsVerifyAndResume()
    {
        QFETCH(QString, config);
        QFETCH(QStringList, sets);
        QStringList args {QStringLiteral("pilot"), QStringLiteral("--config"), config, QStringLiteral("--warmup"), QStringLiteral("0")};
        for (const QString &s : sets)
            args << QStringLiteral("--set") << s;
        const QString root = path(QStringLiteral("real-") + QString::number(qHash(config + sets.join(QLatin1Char(' ')))));
        const QString db = root + QStringLiteral(".db");
        auto r = pbtest::runCliBytes(args + QStringList {QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"), root,
                                                         QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), db});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = pbtest::runCliBytes({QStringLiteral("checkpoint"), QStringLiteral("verify"), root});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        r = pbtest::runCliBytes(args + QStringList {QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--resume-from"), root, QStringLiteral("--db"), db});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCheckpointStrict)
#include "tst_checkpoint_strict.moc"
