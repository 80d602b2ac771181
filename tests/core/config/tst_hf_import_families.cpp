// The dense families of 2026 through `config import-hf`: each published config.json with its exact
// parameter count and its traits, the config classes' defaults where a key is absent, and the text
// model of a multimodal config.
#include "config/HfImport.h"
#include "config/ParameterTable.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

class TestHfImportFamilies : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The published config.json of each dense family imports with Transformers 5.17's own parameter
    // count (tests/data/hf-parity/published-counts.json) and its traits.
    void denseFamilies_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("repo");
        QTest::addColumn<QString>("family");
        QTest::newRow("qwen3") << "qwen3-8b" << "Qwen/Qwen3-8B" << "qwen3";
        QTest::newRow("gemma3_text") << "gemma-3-12b" << "google/gemma-3-12b-it" << "gemma3_text";
        QTest::newRow("gemma2") << "gemma-2-9b" << "google/gemma-2-9b" << "gemma2";
        QTest::newRow("olmo2") << "olmo-2-7b" << "allenai/OLMo-2-1124-7B" << "olmo2";
        QTest::newRow("phi3") << "phi-4" << "microsoft/phi-4" << "phi3";
        QTest::newRow("smollm3") << "smollm3-3b" << "HuggingFaceTB/SmolLM3-3B" << "smollm3";
        QTest::newRow("glm4") << "glm-4-9b" << "THUDM/GLM-4-9B-0414" << "glm4";
        QTest::newRow("granite") << "granite-3.3-8b" << "ibm-granite/granite-3.3-8b-instruct" << "granite";
        QTest::newRow("ministral3") << "ministral-3-8b" << "mistralai/Ministral-3-8B" << "ministral3";
    }
    void denseFamilies()
    {
        QFETCH(QString, folder);
        QFETCH(QString, repo);
        QFETCH(QString, family);
        QFile countsFile(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/published-counts.json"));
        QVERIFY(countsFile.open(QIODevice::ReadOnly));
        const QJsonObject counts = QJsonDocument::fromJson(countsFile.readAll()).object().value(repo).toObject();
        const pb::RunConfig c = pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/") + folder);
        QCOMPARE(QString::fromStdString(c.model.family), family);
        QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
    }
    void denseFamilyTraits()
    {
        const auto import = [](const char *folder) { return pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/") + QLatin1String(folder)).model; };
        const pb::ModelShape gemma3 = import("gemma-3-12b");
        QCOMPARE(gemma3.traits.slidingWindow, qint64(1024));
        QCOMPARE(gemma3.traits.globalLayers.every, qint64(6));
        QCOMPARE(gemma3.traits.localRopeTheta, 10000.0);
        QCOMPARE(gemma3.ropeTheta, 1000000.0);
        QCOMPARE(gemma3.ropeScaling.type, pb::RopeScalingType::Linear);
        QCOMPARE(gemma3.traits.normPlacement, pb::NormPlacement::Sandwich);
        QVERIFY(gemma3.traits.normUnitOffset);
        QCOMPARE(gemma3.qkNorm, pb::QkNorm::Head);
        QCOMPARE(gemma3.activation, pb::ActivationKind::GeGlu);
        const pb::ModelShape gemma2 = import("gemma-2-9b");
        QCOMPARE(gemma2.traits.globalLayers.every, qint64(2));
        QCOMPARE(gemma2.traits.attentionSoftcap, 50.0);
        QCOMPARE(gemma2.traits.finalSoftcap, 30.0);
        const pb::ModelShape olmo = import("olmo-2-7b");
        QCOMPARE(olmo.traits.normPlacement, pb::NormPlacement::Post);
        QCOMPARE(olmo.qkNorm, pb::QkNorm::Full);
        const pb::ModelShape phi = import("phi-4");
        QVERIFY(phi.traits.fusedQkv && phi.traits.fusedGateUp);
        const pb::ModelShape glm = import("glm-4-9b");
        QVERIFY(glm.traits.ropeInterleaved);
        QCOMPARE(glm.rotaryDim(), glm.effectiveHeadDim() / 2);
        QVERIFY(glm.attentionBias && !glm.traits.outputBias);
        const pb::ModelShape smol = import("smollm3-3b");
        QCOMPARE(smol.traits.noRopeLayers.every, qint64(4));
        QVERIFY(!smol.traits.usesRope(3) && smol.traits.usesRope(4));
        const pb::ModelShape granite = import("granite-3.3-8b");
        QVERIFY(granite.traits.residualScale != 1.0 && granite.traits.logitsDivisor != 1.0 && granite.traits.embeddingScale != 1.0);
        const pb::ModelShape ministral = import("ministral-3-8b");
        QCOMPARE(ministral.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(ministral.traits.queryTemperatureBeta, 0.1);
    }
    // Defaults of the config classes where a key is absent (Transformers 5.17), and null as "off".
    void denseFamilyDefaults()
    {
        const auto published = [](const char *folder) {
            QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/") + QLatin1String(folder) + QStringLiteral("/config.json"));
            return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object() : QJsonObject();
        };
        QJsonObject gemma2 = published("gemma-2-9b");
        gemma2.remove(QStringLiteral("attn_logit_softcapping"));
        gemma2.remove(QStringLiteral("final_logit_softcapping"));
        pb::ModelShape m = pb::hfModelShape(gemma2, "config.json");
        QCOMPARE(m.traits.attentionSoftcap, 50.0);
        QCOMPARE(m.traits.finalSoftcap, 30.0);
        gemma2.insert(QStringLiteral("final_logit_softcapping"), QJsonValue::Null);
        QCOMPARE(pb::hfModelShape(gemma2, "config.json").traits.finalSoftcap, 0.0);
        // Gemma reads hidden_activation only.
        gemma2.insert(QStringLiteral("hidden_act"), QStringLiteral("gelu"));
        gemma2.remove(QStringLiteral("hidden_activation"));
        QCOMPARE(pb::hfModelShape(gemma2, "config.json").activation, pb::ActivationKind::GeGlu);

        QJsonObject granite = published("granite-3.3-8b");
        granite.remove(QStringLiteral("tie_word_embeddings"));
        QVERIFY(!pb::hfModelShape(granite, "config.json").tieEmbeddings);

        // A sliding entry without its own base takes Gemma 3's local default, 10000.
        QJsonObject gemma3 = published("gemma-3-12b");
        gemma3.insert(QStringLiteral("rope_parameters"), QJsonObject {{"full_attention", QJsonObject {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                                                                     {"sliding_attention", QJsonObject {{"rope_type", "default"}}}});
        QCOMPARE(pb::hfModelShape(gemma3, "config.json").traits.localRopeTheta, 10000.0);
        // No sliding layer: no window and no sliding layers' base.
        gemma3.insert(QStringLiteral("layer_types"), QJsonArray());
        gemma3.remove(QStringLiteral("layer_types"));
        gemma3.insert(QStringLiteral("sliding_window_pattern"), 1);
        m = pb::hfModelShape(gemma3, "config.json");
        QCOMPARE(m.traits.slidingWindow, qint64(0));
        QCOMPARE(m.traits.localRopeTheta, 0.0);

        // A window spanning the whole context is full attention (Phi-3.5's 262144 over 131072).
        QJsonObject phi = published("phi-4");
        phi.insert(QStringLiteral("sliding_window"), 262144);
        QCOMPARE(pb::hfModelShape(phi, "config.json").traits.slidingWindow, qint64(0));
        phi.insert(QStringLiteral("sliding_window"), 2047);
        QCOMPARE(pb::hfModelShape(phi, "config.json").traits.slidingWindow, qint64(2047));
    }
    void multimodalTextConfig()
    {
        // A gemma3 config nests its text model; the vision tower is not piloted, and sizes the
        // text_config leaves out take Gemma3TextConfig's defaults.
        QJsonObject text = QJsonDocument::fromJson([] {
                               QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/gemma-3-12b/config.json"));
                               return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
                           }()).object();
        text.remove(QStringLiteral("vocab_size"));
        const QJsonObject wrapper {{"model_type", "gemma3"}, {"text_config", text}, {"vision_config", QJsonObject {{"model_type", "siglip_vision_model"}}}};
        const pb::RunConfig c = pb::hfRunConfig(wrapper, "config.json");
        QCOMPARE(QString::fromStdString(c.model.family), QStringLiteral("gemma3_text"));
        QCOMPARE(c.model.vocabSize, qint64(262208));
        QCOMPARE(c.model.traits.finalSoftcap, 0.0);
    }
};

QTEST_GUILESS_MAIN(TestHfImportFamilies)
#include "tst_hf_import_families.moc"
