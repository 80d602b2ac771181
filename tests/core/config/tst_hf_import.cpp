// Hugging Face config.json import: exact published counts, revision, weights folder, refusals.
#include "config/HfImport.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "util/Errors.h"

#include <QFile>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QtTest>

namespace {

QString hf(const char *name) { return QStringLiteral(PB_TEST_DATA_DIR "/hf/") + QLatin1String(name); }

QJsonObject fixtureJson(const char *name)
{
    QFile f(hf(name) + QStringLiteral("/config.json"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

void writeJson(const QString &path, const QJsonObject &json)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(json).toJson());
}

} // namespace

class TestHfImport : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void publishedTotals_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("revision");
        QTest::addColumn<QString>("preset"); // the preset with the same shape
        QTest::newRow("Llama-3.1-8B") << hf("llama-3.1-8b") << qint64(8030261248) << "llama" << "" << "llama-3.1-8b";
        QTest::newRow("Qwen2.5-7B") << hf("qwen2.5-7b") << qint64(7615616512) << "qwen2" << "feedface00000000000000000000000000000001" << "qwen2.5-7b";
        QTest::newRow("Mistral-7B-v0.3") << hf("mistral-7b-v0.3") << qint64(7248023552) << "mistral" << "v0.3-fixture" << "mistral-7b";
        QTest::newRow("Llama-3.2-1B in HF cache") << hf("hub/models--meta-llama--Llama-3.2-1B/snapshots/0123456789abcdef0123456789abcdef01234567")
                                                  << qint64(1235814400) << "llama" << "0123456789abcdef0123456789abcdef01234567" << "llama-3.2-1b";
        QTest::newRow("config.json named directly") << hf("llama-3.1-8b/config.json") << qint64(8030261248) << "llama" << "" << "llama-3.1-8b";
    }
    void publishedTotals()
    {
        QFETCH(QString, path);
        QFETCH(qint64, total);
        QFETCH(QString, family);
        QFETCH(QString, revision);
        QFETCH(QString, preset);
        const pb::RunConfig c = pb::importHfConfig(path);
        QCOMPARE(pb::countParameters(c).total, total);
        QCOMPARE(QString::fromStdString(c.model.family), family);
        QCOMPARE(QString::fromStdString(c.model.revision), revision);
        QCOMPARE(c.model.preset, std::string("hf-import"));
        QVERIFY(c.model.weightsPath.empty()); // fixtures hold no *.safetensors
        // Same shape as the shipped preset.
        pb::ModelShape expected = pb::presetConfig(preset).model;
        const pb::ModelShape &m = c.model;
        QCOMPARE(m.layers, expected.layers);
        QCOMPARE(m.hiddenSize, expected.hiddenSize);
        QCOMPARE(m.attentionHeads, expected.attentionHeads);
        QCOMPARE(m.kvHeads, expected.kvHeads);
        QCOMPARE(m.effectiveHeadDim(), expected.effectiveHeadDim());
        QCOMPARE(m.intermediateSize, expected.intermediateSize);
        QCOMPARE(m.vocabSize, expected.vocabSize);
        QCOMPARE(m.maxPositions, expected.maxPositions);
        QCOMPARE(m.tieEmbeddings, expected.tieEmbeddings);
        QCOMPARE(m.attentionBias, expected.attentionBias);
        QCOMPARE(m.ropeTheta, expected.ropeTheta);
        QCOMPARE(m.normEps, expected.normEps);
        QCOMPARE(m.activation, pb::ActivationKind::SwiGlu);
        QVERIFY(c.train.seqLen <= m.maxPositions);
    }
    void cacheSnapshotNamesTheRepository()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("hub/models--meta-llama--Llama-3.2-1B/snapshots/0123456789abcdef0123456789abcdef01234567"));
        QCOMPARE(c.name, std::string("meta-llama/Llama-3.2-1B"));
    }
    void weightsFolderWhenSafetensorsPresent()
    {
        QTemporaryDir dir;
        writeJson(dir.filePath(QStringLiteral("config.json")), fixtureJson("qwen2.5-7b"));
        QCOMPARE(pb::importHfConfig(dir.path()).model.weightsPath, std::string());
        QFile weights(dir.filePath(QStringLiteral("model-00001-of-00004.safetensors")));
        QVERIFY(weights.open(QIODevice::WriteOnly));
        weights.close();
        QCOMPARE(QString::fromStdString(pb::importHfConfig(dir.path()).model.weightsPath), QFileInfo(dir.path()).absoluteFilePath());
    }
    void defaultsForOptionalFields()
    {
        QJsonObject json = fixtureJson("llama-3.1-8b");
        for (const char *key : {"num_key_value_heads", "tie_word_embeddings", "rope_theta", "rms_norm_eps", "hidden_act", "head_dim"})
            json.remove(QLatin1String(key));
        const pb::ModelShape m = pb::hfModelShape(json, "config.json");
        QCOMPARE(m.kvHeads, qint64(32)); // defaults to the attention heads
        QCOMPARE(m.tieEmbeddings, false);
        QCOMPARE(m.ropeTheta, 10000.0);
        QCOMPARE(m.normEps, 1e-6);
        QCOMPARE(m.effectiveHeadDim(), qint64(128));
    }
    void unknownFieldsIgnored()
    {
        QJsonObject json = fixtureJson("llama-3.1-8b");
        json.insert(QStringLiteral("some_future_field"), QJsonObject {{QStringLiteral("x"), 1}});
        QCOMPARE(pb::hfModelShape(json, "config.json").hiddenSize, qint64(4096));
    }
    void refusals_data()
    {
        QTest::addColumn<QString>("remove");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("expected");
        QTest::newRow("missing hidden_size") << "hidden_size" << "" << QJsonValue() << "hidden_size: required field is missing";
        QTest::newRow("missing layers") << "num_hidden_layers" << "" << QJsonValue() << "num_hidden_layers: required field is missing";
        QTest::newRow("missing vocab") << "vocab_size" << "" << QJsonValue() << "vocab_size: required field is missing";
        QTest::newRow("missing model_type") << "model_type" << "" << QJsonValue() << "model_type: required field is missing";
        QTest::newRow("unsupported type") << "" << "model_type" << QJsonValue(QStringLiteral("gpt2")) << "unsupported model type 'gpt2'";
        QTest::newRow("string size") << "" << "hidden_size" << QJsonValue(QStringLiteral("4096")) << "hidden_size: expected a positive integer";
        QTest::newRow("zero heads") << "" << "num_attention_heads" << QJsonValue(0) << "num_attention_heads: expected a positive integer";
        QTest::newRow("activation") << "" << "hidden_act" << QJsonValue(QStringLiteral("relu")) << "unsupported activation 'relu'";
        QTest::newRow("o_proj bias") << "" << "attention_bias" << QJsonValue(true) << "attention_bias: true is not supported";
        QTest::newRow("mlp bias") << "" << "mlp_bias" << QJsonValue(true) << "mlp_bias: true is not supported";
        QTest::newRow("kv heads rule") << "" << "num_key_value_heads" << QJsonValue(7) << "model.kv_heads: must divide model.attention_heads";
    }
    void refusals()
    {
        QFETCH(QString, remove);
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, expected);
        QJsonObject json = fixtureJson("llama-3.1-8b");
        if (!remove.isEmpty())
            json.remove(remove);
        if (!key.isEmpty())
            json.insert(key, value);
        QTemporaryDir dir;
        writeJson(dir.filePath(QStringLiteral("config.json")), json);
        try {
            pb::importHfConfig(dir.path());
            QFAIL("expected an error");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
            QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("config.json")), e.what());
        }
    }
    void missingFolderOrFile()
    {
        QTemporaryDir dir;
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::importHfConfig(dir.filePath(QStringLiteral("nope"))));
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::importHfConfig(dir.path())); // no config.json
        QFile broken(dir.filePath(QStringLiteral("config.json")));
        QVERIFY(broken.open(QIODevice::WriteOnly));
        broken.write("{\"model_type\": \"llama\", ");
        broken.close();
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::importHfConfig(dir.path()));
    }
    void importedConfigRoundTrips()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("qwen2.5-7b"));
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
    }
};

QTEST_GUILESS_MAIN(TestHfImport)
#include "tst_hf_import.moc"
