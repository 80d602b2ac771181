// Loading real weights from a safetensors folder into the decoder, and the errors a user can act on.
#include "config/Presets.h"
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
