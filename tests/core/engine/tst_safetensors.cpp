// Loading real weights from a safetensors folder into the decoder, and the errors a user can act on.
#include "config/Presets.h"
#include "model/Nf4.h"
#include "model/Transformer.h"
#include "model/WeightLoader.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

namespace {

// Writes `tensors` (fp32) in the safetensors layout: 8-byte little-endian header length, JSON header, data.
void writeSafetensors(const QString &path, const std::vector<std::pair<std::string, torch::Tensor>> &tensors, int64_t truncateBy = 0)
{
    QJsonObject header;
    QByteArray data;
    for (const auto &[name, tensor] : tensors) {
        const auto t = tensor.detach().to(torch::kFloat).contiguous();
        QJsonArray shape;
        for (auto d : t.sizes())
            shape.append(static_cast<qint64>(d));
        const qint64 begin = data.size();
        data.append(static_cast<const char *>(t.data_ptr()), static_cast<qsizetype>(t.nbytes()));
        header.insert(QString::fromStdString(name), QJsonObject {{QStringLiteral("dtype"), QStringLiteral("F32")}, {QStringLiteral("shape"), shape},
                                                                 {QStringLiteral("data_offsets"), QJsonArray {begin, static_cast<qint64>(data.size())}}});
    }
    const QByteArray json = QJsonDocument(header).toJson(QJsonDocument::Compact);
    QByteArray bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
        bytes[i] = static_cast<char>((static_cast<quint64>(json.size()) >> (8 * i)) & 0xff);
    bytes += json + data;
    bytes.chop(static_cast<qsizetype>(truncateBy));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

RunConfig tinyFp32()
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.precision = Precision::Fp32;
    return c;
}

std::vector<std::pair<std::string, torch::Tensor>> paramsOf(DecoderModel &model)
{
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto &item : model->named_parameters())
        out.emplace_back(item.key(), item.value());
    return out;
}

QString loadError(const QString &folder)
{
    DecoderModel target(tinyFp32(), ModelRuntime {}, torch::kCPU);
    try {
        loadSafetensors(*target, folder);
    } catch (const std::exception &e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

} // namespace

class TestSafetensors : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void loadsEveryParameterByName()
    {
        DecoderModel source(tinyFp32(), ModelRuntime {}, torch::kCPU);
        source->initialise(11);
        const QString folder = m_dir.filePath(QStringLiteral("ok"));
        QDir().mkpath(folder);
        writeSafetensors(folder + QStringLiteral("/model.safetensors"), paramsOf(source));
        DecoderModel target(tinyFp32(), ModelRuntime {}, torch::kCPU);
        target->initialise(99);
        const auto report = loadSafetensors(*target, folder);
        QCOMPARE(report.loaded, static_cast<int64_t>(paramsOf(source).size()));
        for (const auto &[name, tensor] : paramsOf(source))
            QVERIFY2(torch::equal(tensor, target->named_parameters()[name]), name.c_str());
    }

    // A QLoRA base is read as the checkpoint's 16-bit matrix and quantised as it loads: each NF4
    // base holds what quantising that matrix gives; norms and embeddings load as they are; a base
    // missing from the files is named.
    void qloraQuantisesTheBaseAsItLoads()
    {
        RunConfig bf16 = presetConfig(QStringLiteral("tiny"));
        bf16.train.precision = Precision::Bf16;
        DecoderModel source(bf16, ModelRuntime {}, torch::kCPU);
        source->initialise(11);
        const QString folder = m_dir.filePath(QStringLiteral("qlora"));
        QDir().mkpath(folder);
        writeSafetensors(folder + QStringLiteral("/model.safetensors"), paramsOf(source));
        RunConfig q = bf16;
        q.train.mode = TrainMode::Qlora;
        q.train.lora.targets = {"q_proj", "v_proj"};
        DecoderModel target(q, ModelRuntime {}, torch::kCPU);
        target->initialise(99);
        const auto report = loadSafetensors(*target, folder);
        QCOMPARE(report.loaded, static_cast<int64_t>(paramsOf(source).size()));
        QCOMPARE(report.ignored, int64_t(0));
        const auto sourceParams = source->named_parameters();
        int bases = 0;
        for (const auto &item : target->named_modules()) {
            auto *linear = dynamic_cast<LoraLinearImpl *>(item.value().get());
            if (!linear)
                continue;
            QVERIFY(linear->nf4Base());
            auto expected = nf4Allocate(linear->base.shape, torch::kCPU);
            nf4Quantize(sourceParams[item.key() + ".weight"], expected);
            QVERIFY2(torch::equal(expected.packed, linear->base.packed) && torch::equal(expected.absmax, linear->base.absmax), item.key().c_str());
            ++bases;
        }
        QCOMPARE(bases, 14);
        QVERIFY(torch::equal(sourceParams["model.layers.0.input_layernorm.weight"], target->named_parameters()["model.layers.0.input_layernorm.weight"]));

        auto params = paramsOf(source);
        params.erase(std::remove_if(params.begin(), params.end(), [](const auto &p) { return p.first == "model.layers.1.mlp.up_proj.weight"; }), params.end());
        const QString partial = m_dir.filePath(QStringLiteral("qlora-missing"));
        QDir().mkpath(partial);
        writeSafetensors(partial + QStringLiteral("/model.safetensors"), params);
        DecoderModel other(q, ModelRuntime {}, torch::kCPU);
        try {
            loadSafetensors(*other, partial);
            QFAIL("a missing base was not noticed");
        } catch (const std::exception &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("model.layers.1.mlp.up_proj.weight")), e.what());
        }
    }

    void missingTensorIsNamed()
    {
        DecoderModel source(tinyFp32(), ModelRuntime {}, torch::kCPU);
        auto params = paramsOf(source);
        params.erase(std::remove_if(params.begin(), params.end(), [](const auto &p) { return p.first == "model.layers.1.mlp.up_proj.weight"; }), params.end());
        const QString folder = m_dir.filePath(QStringLiteral("missing"));
        QDir().mkpath(folder);
        writeSafetensors(folder + QStringLiteral("/model.safetensors"), params);
        QVERIFY(loadError(folder).contains(QStringLiteral("model.layers.1.mlp.up_proj.weight")));
    }

    void wrongShapeIsNamed()
    {
        DecoderModel source(tinyFp32(), ModelRuntime {}, torch::kCPU);
        auto params = paramsOf(source);
        for (auto &p : params)
            if (p.first == "model.norm.weight")
                p.second = torch::ones({65});
        const QString folder = m_dir.filePath(QStringLiteral("shape"));
        QDir().mkpath(folder);
        writeSafetensors(folder + QStringLiteral("/model.safetensors"), params);
        const QString error = loadError(folder);
        QVERIFY2(error.contains(QStringLiteral("model.norm.weight")) && error.contains(QStringLiteral("[65]")) && error.contains(QStringLiteral("[64]")), qPrintable(error));
    }

    void truncatedFileIsNamed()
    {
        DecoderModel source(tinyFp32(), ModelRuntime {}, torch::kCPU);
        const QString folder = m_dir.filePath(QStringLiteral("truncated"));
        QDir().mkpath(folder);
        writeSafetensors(folder + QStringLiteral("/model.safetensors"), paramsOf(source), 100);
        const QString error = loadError(folder);
        QVERIFY2(error.contains(QStringLiteral("model.safetensors")) && error.contains(QStringLiteral("outside the file")), qPrintable(error));
    }

    void emptyFolderIsRefused()
    {
        const QString folder = m_dir.filePath(QStringLiteral("empty"));
        QDir().mkpath(folder);
        QVERIFY(loadError(folder).contains(QStringLiteral("no .safetensors")));
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
