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

#include <set>

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
        // OLMo 3's figure there is counted by hand until Transformers' count is taken (its "source").
        QTest::newRow("olmo3") << "olmo-3-7b" << "allenai/Olmo-3-1025-7B" << "olmo3";
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
        // OLMo 3: three sliding layers, then one full; yarn on the full layers only (Olmo3Config).
        const pb::ModelShape olmo3 = import("olmo-3-7b");
        QCOMPARE(olmo3.traits.normPlacement, pb::NormPlacement::Post);
        QCOMPARE(olmo3.traits.slidingWindow, qint64(4096));
        QCOMPARE(olmo3.traits.globalLayers.every, qint64(4));
        QCOMPARE(olmo3.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(olmo3.traits.localRopeTheta, 500000.0);
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
    // Llama 4 Scout's published config: the text model of a llama4 config, with Transformers 5.17's
    // own total and active counts of Llama4ForCausalLM, and the traits of its text model.
    void llama4Scout()
    {
        QFile countsFile(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/published-counts.json"));
        QVERIFY(countsFile.open(QIODevice::ReadOnly));
        const QJsonObject counts = QJsonDocument::fromJson(countsFile.readAll()).object().value(QStringLiteral("meta-llama/Llama-4-Scout-17B-16E")).toObject();
        const pb::RunConfig c = pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/llama-4-scout-17b-16e"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("llama4_text"));
        const pb::ParamCounts n = pb::countParameters(c);
        QCOMPARE(n.total, counts.value(QStringLiteral("total_params")).toInteger());
        QCOMPARE(n.active, counts.value(QStringLiteral("active_params")).toInteger());
        QCOMPARE(m.layers, qint64(48));
        QCOMPARE(m.intermediateSize, qint64(16384));
        QVERIFY(!m.tieEmbeddings);
        QCOMPARE(m.qkNorm, pb::QkNorm::L2);
        QCOMPARE(m.traits.attentionChunk, qint64(8192));
        QCOMPARE(m.traits.noRopeLayers.every, qint64(4));
        QVERIFY(m.traits.usesChunks(0) && !m.traits.usesChunks(3));
        QVERIFY(m.traits.ropeInterleaved && m.traits.ropeFp32);
        QCOMPARE(m.traits.queryTemperatureBeta, 0.1); // attn_temperature_tuning: 4 is on
        QCOMPARE(m.traits.queryTemperatureLength, qint64(8192));
        QCOMPARE(m.traits.queryTemperatureOffset, qint64(1));
        QVERIFY(m.traits.queryTemperatureNoRope && m.traits.queryTemperatureFp32);
        QCOMPARE(m.ropeScaling.type, pb::RopeScalingType::Llama3);
        QCOMPARE(m.ropeScaling.factor, 16.0);
        QCOMPARE(m.ropeScaling.highFreqFactor, 1.0);
        QCOMPARE(m.moe.experts, qint64(16));
        QCOMPARE(m.moe.expertsPerToken, qint64(1));
        QCOMPARE(m.moe.expertIntermediateSize, qint64(8192));
        QCOMPARE(m.moe.sharedExpertIntermediateSize, qint64(8192));
        QCOMPARE(m.moe.scoring, pb::RouterScoring::Sigmoid);
        QVERIFY(m.moe.scaleExpertInput && m.moe.stackedExperts && !m.moe.normalizeTopK && !m.moe.interleavedGateUp);
        QCOMPARE(m.moe.auxLossWeight, 0.0); // Llama4ForCausalLM adds no load-balancing loss
        QVERIFY(m.moe.sparse(0) && m.moe.sparse(47));
        bool router = false, stacked = false;
        for (const auto &p : pb::parameterTable(c)) {
            router = router || (p.name == "model.layers.0.feed_forward.router.weight" && p.shape == std::vector<int64_t> {16, 5120});
            stacked = stacked || (p.name == "model.layers.47.feed_forward.experts.gate_up_proj" && p.shape == std::vector<int64_t> {16, 5120, 16384});
        }
        QVERIFY(router && stacked);
        // The text config without its wrapper imports alike; the wrapper's tie reaches it.
        QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/llama-4-scout-17b-16e/config.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject wrapper = QJsonDocument::fromJson(f.readAll()).object();
        const QJsonObject text = wrapper.value(QStringLiteral("text_config")).toObject();
        QCOMPARE(pb::countParameters(pb::hfRunConfig(text, "config.json")).total, n.total);
        QJsonObject tied = wrapper;
        tied.insert(QStringLiteral("tie_word_embeddings"), true);
        QVERIFY(pb::hfModelShape(tied, "config.json").tieEmbeddings);
    }
    // Absent keys take Llama4TextConfig's defaults (Scout's sizes; every layer sparse, every 4th
    // without rotary); the tiny parity fixture's moe_layers [1, 3] is a sparse step of 2.
    void llama4Defaults()
    {
        const pb::ModelShape d = pb::hfModelShape(QJsonObject {{"model_type", "llama4_text"}}, "config.json");
        QCOMPARE(d.hiddenSize, qint64(5120));
        QCOMPARE(d.moe.experts, qint64(16));
        QCOMPARE(d.traits.noRopeLayers.every, qint64(4));
        QCOMPARE(d.traits.attentionChunk, qint64(8192));
        QCOMPARE(d.ropeTheta, 500000.0);
        QCOMPARE(d.maxPositions, qint64(131072));
        // head_dim and num_key_value_heads: absent, the class defaults (128, 8); null, __post_init__'s.
        const pb::ModelShape small = pb::hfModelShape(QJsonObject {{"model_type", "llama4_text"}, {"hidden_size", 64}, {"num_attention_heads", 4}}, "config.json");
        QCOMPARE(small.headDim, qint64(128));
        QCOMPARE(small.kvHeads, qint64(8));
        const pb::ModelShape nulls = pb::hfModelShape(QJsonObject {{"model_type", "llama4_text"}, {"hidden_size", 64}, {"num_attention_heads", 4},
                                                                   {"head_dim", QJsonValue::Null}, {"num_key_value_heads", QJsonValue::Null}}, "config.json");
        QCOMPARE(nulls.headDim, qint64(16));
        QCOMPARE(nulls.kvHeads, qint64(4));
        QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/llama4_text/config.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const pb::ModelShape tiny = pb::hfModelShape(QJsonDocument::fromJson(f.readAll()).object(), "config.json");
        QCOMPARE(tiny.moe.sparseStep, qint64(2));
        QVERIFY(tiny.moe.denseLayers.empty() && !tiny.moe.sparse(0) && tiny.moe.sparse(1) && tiny.moe.sparse(3));
        QCOMPARE(tiny.traits.attentionChunk, qint64(8));
        // moe_layers that no period describes keep the others dense by index.
        const pb::ModelShape listed = pb::hfModelShape(QJsonObject {{"model_type", "llama4_text"}, {"num_hidden_layers", 5}, {"moe_layers", QJsonArray {0, 3}}}, "config.json");
        QVERIFY(listed.moe.sparse(0) && !listed.moe.sparse(1) && listed.moe.sparse(3) && !listed.moe.sparse(4));
        // Temperature tuning off: no temperature; no q/k norm.
        const pb::ModelShape off = pb::hfModelShape(QJsonObject {{"model_type", "llama4_text"}, {"attn_temperature_tuning", false}, {"use_qk_norm", false}}, "config.json");
        QCOMPARE(off.traits.queryTemperatureBeta, 0.0);
        QCOMPARE(off.qkNorm, pb::QkNorm::None);
    }
    void llama4BadInput_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("field");
        QTest::newRow("no_rope_layers entry 2") << "no_rope_layers" << QJsonValue(QJsonArray {1, 1, 1, 2}) << "no_rope_layers[3]";
        QTest::newRow("no_rope_layers too short") << "no_rope_layers" << QJsonValue(QJsonArray {1, 1}) << "no_rope_layers";
        QTest::newRow("no_rope_layers not a list") << "no_rope_layers" << QJsonValue(4) << "no_rope_layers";
        QTest::newRow("moe_layers out of range") << "moe_layers" << QJsonValue(QJsonArray {1, 4}) << "moe_layers[1]";
        QTest::newRow("chunks off the rotary layers") << "layer_types" << QJsonValue(QJsonArray {"full_attention", "chunked_attention", "chunked_attention", "chunked_attention"}) << "layer_types";
        QTest::newRow("unknown layer type") << "layer_types" << QJsonValue(QJsonArray {"sliding_attention", "chunked_attention", "chunked_attention", "full_attention"}) << "layer_types[0]";
        QTest::newRow("null chunk size") << "attention_chunk_size" << QJsonValue(QJsonValue::Null) << "attention_chunk_size";
        QTest::newRow("gelu experts") << "hidden_act" << QJsonValue(QStringLiteral("gelu")) << "hidden_act";
        QTest::newRow("temperature tuning as text") << "attn_temperature_tuning" << QJsonValue(QStringLiteral("yes")) << "attn_temperature_tuning";
        QTest::newRow("negative attn_scale") << "attn_scale" << QJsonValue(-0.1) << "attn_scale";
        QTest::newRow("attention dropout") << "attention_dropout" << QJsonValue(0.1) << "attention_dropout";
        QTest::newRow("zero experts") << "num_local_experts" << QJsonValue(0) << "num_local_experts";
        QTest::newRow("fp8 checkpoint") << "quantization_config" << QJsonValue(QJsonObject {{"quant_method", "fbgemm_fp8"}}) << "quantization_config";
    }
    void llama4BadInput()
    {
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, field);
        QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/llama4_text/config.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject json = QJsonDocument::fromJson(f.readAll()).object();
        json.insert(key, value);
        QString message;
        try {
            pb::hfRunConfig(json, "config.json");
        } catch (const std::exception &e) {
            message = QString::fromUtf8(e.what());
        }
        QVERIFY2(message.contains(QStringLiteral("config.json: ") + field + QStringLiteral(":")), qPrintable(message));
    }
    // gpt-oss-20b and -120b as published (MXFP4 experts, trained as bf16): Transformers 5.17's exact
    // total and active counts, and every trait of the family.
    void gptOss_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("repo");
        QTest::addColumn<qint64>("layers");
        QTest::addColumn<qint64>("experts");
        QTest::newRow("gpt-oss-20b") << "gpt-oss-20b" << "openai/gpt-oss-20b" << qint64(24) << qint64(32);
        QTest::newRow("gpt-oss-120b") << "gpt-oss-120b" << "openai/gpt-oss-120b" << qint64(36) << qint64(128);
    }
    void gptOss()
    {
        QFETCH(QString, folder);
        QFETCH(QString, repo);
        QFETCH(qint64, layers);
        QFETCH(qint64, experts);
        QFile countsFile(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/published-counts.json"));
        QVERIFY(countsFile.open(QIODevice::ReadOnly));
        const QJsonObject counts = QJsonDocument::fromJson(countsFile.readAll()).object().value(repo).toObject();
        const pb::RunConfig c = pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/") + folder);
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("gpt_oss"));
        QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
        QCOMPARE(pb::countParameters(c).active, counts.value(QStringLiteral("active_params")).toInteger());
        QCOMPARE(m.layers, layers);
        QCOMPARE(m.moe.experts, experts);
        QCOMPARE(m.moe.expertsPerToken, qint64(4));
        QCOMPARE(m.moe.expertIntermediateSize, qint64(2880));
        QVERIFY(m.moe.stackedExperts && m.moe.interleavedGateUp && m.moe.expertBias && m.moe.routerBias && m.moe.softmaxAfterTopK);
        QVERIFY(!m.moe.normalizeTopK);
        QCOMPARE(m.moe.swigluLimit, 7.0);
        QCOMPARE(m.moe.swigluAlpha, 1.702);
        QCOMPARE(m.moe.auxLossWeight, 0.9);
        QVERIFY(m.traits.attentionSinks && m.attentionBias && m.traits.outputBias && m.traits.normScaleInFp32);
        QCOMPARE(m.traits.slidingWindow, qint64(128));
        QCOMPARE(m.traits.globalLayers.every, qint64(2)); // sliding on even layers, full on odd
        QVERIFY(m.usesSliding(0) && !m.usesSliding(1));
        QCOMPARE(m.ropeTheta, 150000.0);
        QCOMPARE(m.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(m.ropeScaling.factor, 32.0);
        QCOMPARE(m.ropeScaling.originalMaxPositions, qint64(4096));
        QVERIFY(!m.ropeScaling.truncate);
        QCOMPARE(m.effectiveHeadDim(), qint64(64));
        QCOMPARE(m.kvHeads, qint64(8));
        QVERIFY(!m.tieEmbeddings);
        QCOMPARE(m.normEps, 1e-5);
        QCOMPARE(QString::fromStdString(m.checkpointQuantization), QStringLiteral("mxfp4"));
        // Named as the checkpoints name them.
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c))
            names.insert(p.name);
        for (const char *name : {"model.layers.0.self_attn.sinks", "model.layers.0.mlp.router.bias", "model.layers.0.mlp.experts.gate_up_proj",
                                 "model.layers.0.mlp.experts.gate_up_proj_bias", "model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.experts.down_proj_bias"})
            QVERIFY2(names.count(name), name);
    }
    // GptOssConfig's defaults where the keys are absent (120b's shape, YaRN, alternating windows).
    void gptOssDefaults()
    {
        const pb::ModelShape d = pb::hfModelShape(QJsonObject {{"model_type", "gpt_oss"}}, "config.json");
        QCOMPARE(d.layers, qint64(36));
        QCOMPARE(d.moe.experts, qint64(128));
        QCOMPARE(d.moe.expertsPerToken, qint64(4));
        QCOMPARE(d.moe.auxLossWeight, 0.001);
        QCOMPARE(d.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(d.ropeScaling.factor, 32.0);
        QCOMPARE(d.ropeScaling.originalMaxPositions, qint64(4096));
        QVERIFY(!d.ropeScaling.truncate);
        QCOMPARE(d.ropeTheta, 150000.0);
        QCOMPARE(d.traits.slidingWindow, qint64(128));
        QCOMPARE(d.traits.globalLayers.every, qint64(2));
        QVERIFY(d.checkpointQuantization.empty());
        // Every layer full: no window at all; swiglu_alpha read where given.
        const pb::ModelShape full = pb::hfModelShape(QJsonObject {{"model_type", "gpt_oss"}, {"num_hidden_layers", 2}, {"layer_types", QJsonArray {"full_attention", "full_attention"}},
                                                                  {"swiglu_alpha", 1.5}},
                                                     "config.json");
        QCOMPARE(full.traits.slidingWindow, qint64(0));
        QCOMPARE(full.moe.swigluAlpha, 1.5);
    }
    void gptOssBadInput_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("field");
        QTest::newRow("other quantisation") << "quantization_config" << QJsonValue(QJsonObject {{"quant_method", "fp8"}}) << "quantization_config.quant_method";
        QTest::newRow("quantisation not an object") << "quantization_config" << QJsonValue(4) << "quantization_config.quant_method";
        QTest::newRow("attention dropout") << "attention_dropout" << QJsonValue(0.1) << "attention_dropout";
        QTest::newRow("experts_per_token contradicts") << "experts_per_token" << QJsonValue(3) << "experts_per_token";
        QTest::newRow("num_experts contradicts") << "num_experts" << QJsonValue(8) << "num_experts";
        QTest::newRow("zero experts") << "num_local_experts" << QJsonValue(0) << "num_local_experts";
        QTest::newRow("more per token than experts") << "num_experts_per_tok" << QJsonValue(5) << "num_experts_per_tok";
        QTest::newRow("unknown layer type") << "layer_types" << QJsonValue(QJsonArray {"chunked_attention", "full_attention", "sliding_attention", "full_attention"}) << "layer_types[0]";
        QTest::newRow("layer types too short") << "layer_types" << QJsonValue(QJsonArray {"sliding_attention"}) << "layer_types";
        QTest::newRow("negative swiglu_limit") << "swiglu_limit" << QJsonValue(-7) << "swiglu_limit";
        QTest::newRow("swiglu_alpha as text") << "swiglu_alpha" << QJsonValue(QStringLiteral("1.7")) << "swiglu_alpha";
        QTest::newRow("null window with sliding layers") << "sliding_window" << QJsonValue(QJsonValue::Null) << "sliding_window";
        QTest::newRow("dynamic rope") << "rope_parameters" << QJsonValue(QJsonObject {{"rope_type", "dynamic"}, {"factor", 2.0}}) << "rope_parameters.rope_type";
    }
    void gptOssBadInput()
    {
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, field);
        QFile f(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/gpt_oss/config.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject json = QJsonDocument::fromJson(f.readAll()).object();
        json.insert(key, value);
        QString message;
        try {
            pb::hfRunConfig(json, "config.json");
        } catch (const std::exception &e) {
            message = QString::fromUtf8(e.what());
        }
        QVERIFY2(message.contains(QStringLiteral("config.json: ") + field + QStringLiteral(":")), qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestHfImportFamilies)
#include "tst_hf_import_families.moc"
