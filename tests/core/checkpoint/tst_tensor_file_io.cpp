// Safetensors files as TensorFileIo writes them, read back the way any reader would (8-byte
// little-endian header length, JSON header, raw data) and through its own parallel reader.
#include "checkpoint/TensorFileIo.h"
#include "model/Safetensors.h"
#include "util/Errors.h"
#include "util/Sha256.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <numeric>

namespace {

struct Owned {
    std::string name, dtype;
    std::vector<int64_t> shape;
    QByteArray bytes;
};

pb::TensorSource sourceOf(const Owned &t)
{
    pb::TensorSource s;
    s.name = t.name;
    s.dtype = t.dtype;
    s.shape = t.shape;
    s.bytes = t.bytes.size();
    const QByteArray data = t.bytes;
    // Through the staging buffer, as a device copy would arrive.
    s.read = [data](int64_t offset, int64_t length, uint8_t *staging) -> const void * {
        std::memcpy(staging, data.constData() + offset, static_cast<size_t>(length));
        return staging;
    };
    return s;
}

Owned tensor(const std::string &name, const std::string &dtype, std::vector<int64_t> shape, int elementSize, int seed)
{
    Owned t {name, dtype, shape, {}};
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
    t.bytes.resize(static_cast<qsizetype>(n * elementSize));
    for (qsizetype i = 0; i < t.bytes.size(); ++i)
        t.bytes[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
    return t;
}

// What any reader does: no code of ours.
struct Read {
    QJsonObject header;
    QByteArray data;
    qint64 headerLength = 0;
};
Read readByHand(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray all = f.readAll();
    quint64 n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | static_cast<uchar>(all[i]);
    Read r;
    r.headerLength = static_cast<qint64>(n);
    r.header = QJsonDocument::fromJson(all.mid(8, r.headerLength)).object();
    r.data = all.mid(8 + r.headerLength);
    return r;
}

} // namespace

class TestTensorFileIo : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void writtenFilesAreSafetensors()
    {
        const std::vector<Owned> tensors {tensor("model.embed_tokens.weight", "F32", {7, 5}, 4, 1), tensor("model.norm.weight", "BF16", {5}, 2, 2),
                                          tensor("step", "I64", {}, 8, 3), tensor("empty", "F32", {0, 4}, 4, 4), tensor("mask", "U8", {3}, 1, 5)};
        pb::SafetensorsFileJob job {"model.safetensors", {}, {{"format", "pt"}}};
        for (const auto &t : tensors)
            job.tensors.push_back(sourceOf(t));
        const QString folder = m_dir.filePath(QStringLiteral("one"));
        QVERIFY(QDir().mkpath(folder));
        const auto digests = pb::writeSafetensorsFiles(folder, {job}, pb::plainChunkBuffer);
        QCOMPARE(digests.size(), size_t(1));
        const QString path = folder + QStringLiteral("/model.safetensors");
        QCOMPARE(digests[0].bytes, QFileInfo(path).size());
        QCOMPARE(digests[0].sha256, pb::sha256OfFileHex(path));

        const Read r = readByHand(path);
        QCOMPARE((8 + r.headerLength) % 8, 0); // data 8-aligned, as the safetensors library writes it
        QCOMPARE(r.header.value(QStringLiteral("__metadata__")).toObject().value(QStringLiteral("format")).toString(), QStringLiteral("pt"));
        qint64 covered = 0;
        for (const auto &t : tensors) {
            const QJsonObject e = r.header.value(QString::fromStdString(t.name)).toObject();
            QCOMPARE(e.value(QStringLiteral("dtype")).toString().toStdString(), t.dtype);
            QJsonArray shape;
            for (auto d : t.shape)
                shape.append(static_cast<qint64>(d));
            QCOMPARE(e.value(QStringLiteral("shape")).toArray(), shape);
            const QJsonArray offsets = e.value(QStringLiteral("data_offsets")).toArray();
            const qint64 begin = offsets.at(0).toInteger(), end = offsets.at(1).toInteger();
            QCOMPARE(r.data.mid(begin, end - begin), t.bytes);
            covered += end - begin;
        }
        QCOMPARE(covered, r.data.size()); // the data is exactly the tensors, nothing between or after
    }

    // Larger than one chunk and cut into shards: every byte arrives at its sink, hashed on the way.
    void shardsReadBackInParallel()
    {
        std::vector<Owned> tensors;
        for (int i = 0; i < 6; ++i)
            tensors.push_back(tensor("t" + std::to_string(i), "F32", {int64_t(3) << 20}, 4, i)); // 12 MiB each
        std::vector<pb::TensorSource> sources;
        for (const auto &t : tensors)
            sources.push_back(sourceOf(t));
        const auto shards = pb::splitIntoShards(sources, 40 << 20);
        QCOMPARE(shards.size(), size_t(2)); // 3 x 12 MiB fit in 40, the fourth starts a new shard
        std::vector<pb::SafetensorsFileJob> jobs;
        for (size_t i = 0; i < shards.size(); ++i)
            jobs.push_back({"optimizer-0000" + std::to_string(i + 1) + "-of-00002.safetensors", shards[i], {}});
        const QString folder = m_dir.filePath(QStringLiteral("shards"));
        QVERIFY(QDir().mkpath(folder));
        const auto digests = pb::writeSafetensorsFiles(folder, jobs, pb::plainChunkBuffer);

        std::map<std::string, QByteArray> arrived;
        std::mutex mutex;
        std::vector<pb::SafetensorsReadJob> reads;
        for (const auto &d : digests) {
            pb::SafetensorsReadJob job;
            job.path = folder + QLatin1Char('/') + QString::fromStdString(d.name);
            job.expectedBytes = d.bytes;
            job.expectedSha256 = d.sha256;
            job.sinkFor = [&](const pb::SafetensorEntry &e) {
                std::lock_guard<std::mutex> lock(mutex);
                QByteArray *into = &arrived[e.name];
                into->resize(static_cast<qsizetype>(e.end - e.begin));
                return pb::TensorSink {[into](int64_t offset, const uint8_t *data, int64_t length) { std::memcpy(into->data() + offset, data, static_cast<size_t>(length)); }};
            };
            reads.push_back(job);
        }
        int64_t total = 0;
        for (const auto &d : digests)
            total += d.bytes;
        QCOMPARE(pb::readSafetensorsFiles(reads, pb::plainChunkBuffer), total);
        for (const auto &t : tensors)
            QVERIFY2(arrived[t.name] == t.bytes, t.name.c_str());

        // One byte changed in the data: the digest taken while reading refuses the file by name.
        QFile f(reads[1].path);
        QVERIFY(f.open(QIODevice::ReadWrite));
        f.seek(f.size() - 5);
        f.write("x", 1);
        f.close();
        try {
            pb::readSafetensorsFiles(reads, pb::plainChunkBuffer);
            QFAIL("a corrupted shard was read without complaint");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(QString::fromStdString(e.what()).contains(QStringLiteral("optimizer-00002-of-00002.safetensors")), e.what());
            QVERIFY2(QString::fromStdString(e.what()).contains(QStringLiteral("SHA-256")), e.what());
        }
    }

    void writingOverAnExistingFileFails()
    {
        const QString folder = m_dir.filePath(QStringLiteral("exists"));
        QVERIFY(QDir().mkpath(folder));
        QFile f(folder + QStringLiteral("/rng.safetensors"));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("keep");
        f.close();
        const Owned t = tensor("cpu", "U8", {16}, 1, 1);
        QVERIFY_THROWS_EXCEPTION(pb::PilotBenchError, pb::writeSafetensorsFiles(folder, {{"rng.safetensors", {sourceOf(t)}, {}}}, pb::plainChunkBuffer));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("keep"));
    }

    void parallelRunRethrowsTheFirstError()
    {
        std::atomic<int> ran {0};
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, pb::runInParallel(8, [&](size_t i) {
                                     ++ran;
                                     if (i == 3)
                                         throw std::runtime_error("three");
                                 }, 4));
        QVERIFY(ran >= 1);
        std::vector<int> done(100, 0);
        pb::runInParallel(done.size(), [&](size_t i) { done[i] = 1; }, 3);
        QCOMPARE(std::accumulate(done.begin(), done.end(), 0), 100);
    }
};

QTEST_GUILESS_MAIN(TestTensorFileIo)
#include "tst_tensor_file_io.moc"
