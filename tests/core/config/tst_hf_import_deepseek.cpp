// DeepSeek-V3-architecture config.json files through `config import-hf`: Moonlight and DeepSeek-V3
// as published, with counts equal to the published ones (Transformers builds no multi-token-
// prediction layer); DeepseekV3Config's defaults for absent keys; kimi_k2 needing every key; bad
// input refused by the field; the run definition's latent attention and routing written only when
// used, read back, and validated by name.
#include "HfImportTestUtil.h"
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <set>

using pbtest::fixture;
using pbtest::hf;
using pbtest::invalid;
using pbtest::refusal;

class TestHfImportDeepseek : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void moonlight()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("moonlight-16b-a3b"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("deepseek_v3"));
        QVERIFY(m.latent.enabled());
        QCOMPARE(m.latent.qLoraRank, qint64(0));
        QCOMPARE(m.latent.kvLoraRank, qint64(512));
        QCOMPARE(m.latent.qkNopeHeadDim, qint64(128));
        QCOMPARE(m.latent.qkRopeHeadDim, qint64(64));
        QCOMPARE(m.latent.vHeadDim, qint64(128));
        QVERIFY(m.latent.ropeInterleave); // DeepseekV3Config's default; the file has no rope_interleave
        QCOMPARE(m.headDim, qint64(64));
        QCOMPARE(m.ropeTheta, 50000.0);
        QCOMPARE(m.normEps, 1e-5);
        QCOMPARE(m.moe.scoring, pb::RouterScoring::Sigmoid);
        QVERIFY(m.moe.scoreCorrectionBias);
        QCOMPARE(m.moe.experts, qint64(64));
        QCOMPARE(m.moe.expertsPerToken, qint64(6));
        QCOMPARE(m.moe.expertIntermediateSize, qint64(1408));
        QCOMPARE(m.moe.sharedExpertIntermediateSize, qint64(2 * 1408));
        QCOMPARE(m.moe.groups, qint64(1));
        QCOMPARE(m.moe.groupsPerToken, qint64(1));
        QCOMPARE(m.moe.routedScale, 2.446);
        QCOMPARE(m.moe.auxLossWeight, 0.0); // DeepseekV3ForCausalLM adds no load-balancing loss
        QCOMPARE(m.moe.denseLayers, std::vector<int64_t> {0});
        QVERIFY(!m.moe.sharedExpertGate);
        QVERIFY(m.moe.normalizeTopK);
        // Published: 15.29B total and 2.24B activated without the embeddings (2 x 163840 x 2048).
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, qint64(15960108544));
        QCOMPARE(counts.active, qint64(2914774528));
        QCOMPARE(counts.total - 2 * 163840 * 2048, qint64(15289019904));
        QCOMPARE(counts.active - 2 * 163840 * 2048, qint64(2243685888));
        // The preset is this config.
        const pb::RunConfig preset = pb::presetConfig(QStringLiteral("moonlight-16b-a3b"));
        QCOMPARE(pb::countParameters(preset).total, counts.total);
        QCOMPARE(pb::countParameters(preset).active, counts.active);
        QVERIFY(preset.model.latent.ropeInterleave && preset.model.moe.routedScale == 2.446);
        // LoRA targets the latent attention by its own names.
        QCOMPARE(c.train.lora.targets, (std::vector<std::string> {"q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}));
        pb::RunConfig lora = c;
        lora.train.mode = pb::TrainMode::Lora;
        QVERIFY2(invalid(lora).isEmpty(), qPrintable(invalid(lora)));
        lora.train.lora.targets = {"k_proj"};
        QVERIFY2(invalid(lora).contains(QLatin1String("train.lora.targets")) && invalid(lora).contains(QLatin1String("kv_b_proj")), qPrintable(invalid(lora)));
    }
    void deepseekV3()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("deepseek-v3"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(m.latent.qLoraRank, qint64(1536));
        QCOMPARE(m.moe.groups, qint64(8));
        QCOMPARE(m.moe.groupsPerToken, qint64(4));
        QCOMPARE(m.moe.routedScale, 2.5);
        QCOMPARE(m.moe.denseLayers, (std::vector<int64_t> {0, 1, 2}));
        QCOMPARE(m.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(m.ropeScaling.factor, 40.0);
        QCOMPARE(m.ropeScaling.mscaleAllDim, 1.0);
        QCOMPARE(m.ropeScaling.originalMaxPositions, qint64(4096));
        // Published: 671B total, 37B activated (the 14B multi-token-prediction module, which
        // Transformers does not build, aside).
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, qint64(671026404352));
        QCOMPARE(counts.active, qint64(37552282624));
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c))
            if (p.layer == 3)
                names.insert(p.name);
        for (const char *name : {"model.layers.3.self_attn.q_a_proj.weight", "model.layers.3.self_attn.q_a_layernorm.weight", "model.layers.3.self_attn.q_b_proj.weight",
                                 "model.layers.3.mlp.gate.weight", "model.layers.3.mlp.shared_experts.down_proj.weight", "model.layers.3.mlp.experts.255.up_proj.weight"})
            QVERIFY2(names.count(name), name);
    }
    // Transformers 5.17's own counts of the published configs (tests/data/hf-parity/published-counts.json,
    // counted on the device by tests/bench/hf_family_fixtures.py --counts): total and active.
    void transformersCounts_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("repo");
        QTest::newRow("Moonlight-16B-A3B") << "moonlight-16b-a3b" << "moonshotai/Moonlight-16B-A3B-Instruct";
        QTest::newRow("DeepSeek-R1") << "deepseek-r1" << "deepseek-ai/DeepSeek-R1";
    }
    void transformersCounts()
    {
        QFETCH(QString, folder);
        QFETCH(QString, repo);
        const QJsonObject counts = pbtest::publishedCounts(repo);
        QVERIFY(!counts.isEmpty());
        const pb::RunConfig c = pb::importHfConfig(hf(folder.toLatin1().constData()));
        QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
        QCOMPARE(pb::countParameters(c).active, counts.value(QStringLiteral("active_params")).toInteger());
    }
    void defaultsOfTheConfigClass()
    {
        // Only the sizes every import requires: the rest are DeepseekV3Config's defaults.
        const QJsonObject json {{"model_type", "deepseek_v3"}, {"hidden_size", 256}, {"num_hidden_layers", 5}, {"num_attention_heads", 4},
                                {"intermediate_size", 512}, {"vocab_size", 1000}, {"max_position_embeddings", 4096}};
        const pb::ModelShape m = pb::hfRunConfig(json, "config.json").model;
        QCOMPARE(m.latent.qLoraRank, qint64(1536));
        QCOMPARE(m.latent.kvLoraRank, qint64(512));
        QCOMPARE(m.latent.qkRopeHeadDim, qint64(64));
        QCOMPARE(m.latent.qkNopeHeadDim, qint64(128));
        QCOMPARE(m.latent.vHeadDim, qint64(128));
        QVERIFY(m.latent.ropeInterleave);
        QCOMPARE(m.kvHeads, qint64(4));
        QCOMPARE(m.moe.experts, qint64(256));
        QCOMPARE(m.moe.expertsPerToken, qint64(8));
        QCOMPARE(m.moe.expertIntermediateSize, qint64(2048));
        QCOMPARE(m.moe.sharedExpertIntermediateSize, qint64(2048));
        QCOMPARE(m.moe.groups, qint64(8));
        QCOMPARE(m.moe.groupsPerToken, qint64(4));
        QCOMPARE(m.moe.routedScale, 2.5);
        QCOMPARE(m.moe.denseLayers, (std::vector<int64_t> {0, 1, 2}));
        QCOMPARE(m.normEps, 1e-6);
        QVERIFY(!m.attentionBias && !m.traits.outputBias);
    }
    void kimiK2NeedsEveryKey()
    {
        QJsonObject json = fixture("moonlight-16b-a3b");
        json.insert(QStringLiteral("model_type"), QStringLiteral("kimi_k2"));
        QVERIFY2(refusal(json).isEmpty(), qPrintable(refusal(json)));
        QCOMPARE(pb::countParameters(pb::hfRunConfig(json, "config.json")).total, qint64(15960108544));
        for (const char *key : {"n_group", "routed_scaling_factor", "norm_topk_prob", "kv_lora_rank", "q_lora_rank"}) {
            QJsonObject missing = json;
            missing.remove(QLatin1String(key));
            const QString message = refusal(missing);
            QVERIFY2(message.contains(QStringLiteral("config.json: ") + QLatin1String(key)) && message.contains(QLatin1String("missing")), qPrintable(message));
        }
    }
    void badInputNamesTheField_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("field"); // the key the message names
        QTest::newRow("softmax scoring") << "scoring_func" << QJsonValue("softmax") << "scoring_func";
        QTest::newRow("greedy top-k") << "topk_method" << QJsonValue("greedy") << "topk_method";
        QTest::newRow("groups not dividing the experts") << "n_group" << QJsonValue(5) << "n_group";
        QTest::newRow("more groups kept than exist") << "topk_group" << QJsonValue(2) << "topk_group";
        QTest::newRow("grouped key/value heads") << "num_key_value_heads" << QJsonValue(8) << "num_key_value_heads";
        QTest::newRow("odd rotary part") << "qk_rope_head_dim" << QJsonValue(63) << "qk_rope_head_dim";
        QTest::newRow("head_dim other than the rotary part") << "head_dim" << QJsonValue(192) << "head_dim";
        QTest::newRow("sparse every other layer") << "moe_layer_freq" << QJsonValue(2) << "moe_layer_freq";
        QTest::newRow("an unknown MoE key") << "moe_capacity_factor" << QJsonValue(1.25) << "moe_capacity_factor";
        QTest::newRow("a string rank") << "kv_lora_rank" << QJsonValue("512") << "kv_lora_rank";
        QTest::newRow("zero routed experts") << "n_routed_experts" << QJsonValue(0) << "n_routed_experts";
        QTest::newRow("experts alias disagreeing") << "num_local_experts" << QJsonValue(32) << "num_local_experts";
        QTest::newRow("expert MLP biases") << "mlp_bias" << QJsonValue(true) << "mlp_bias";
        QTest::newRow("qk_head_dim other than the sum") << "qk_head_dim" << QJsonValue(128) << "qk_head_dim";
    }
    void badInputNamesTheField()
    {
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, field);
        QJsonObject json = fixture("moonlight-16b-a3b");
        json.insert(key, value);
        const QString message = refusal(json);
        QVERIFY2(message.contains(QStringLiteral("config.json: ") + field), qPrintable(message));
    }
    void roundTripAndHashes()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("deepseek-v3"));
        const QJsonObject json = pb::toJson(c);
        const QJsonObject model = json.value(QStringLiteral("model")).toObject();
        QVERIFY(model.contains(QLatin1String("latent_attention")));
        QCOMPARE(model.value(QStringLiteral("moe")).toObject().value(QStringLiteral("scoring")).toString(), QStringLiteral("sigmoid"));
        const pb::RunConfig back = pb::runConfigFromJson(json);
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        QCOMPARE(back.model.latent.qLoraRank, qint64(1536));
        QCOMPARE(back.model.latent.ropeInterleave, true);
        QCOMPARE(back.model.moe.groups, qint64(8));
        QCOMPARE(back.model.moe.groupsPerToken, qint64(4));
        QVERIFY(back.model.moe.scoreCorrectionBias);
        QCOMPARE(back.model.moe.routedScale, 2.5);
        QCOMPARE(pb::countParameters(back).total, pb::countParameters(c).total);
        // A model without them writes neither (its hash is the one it had before).
        for (const char *preset : {"tiny-moe", "qwen3-30b-a3b", "llama-3.2-1b"}) {
            const QJsonObject other = pb::toJson(pb::presetConfig(QLatin1String(preset))).value(QStringLiteral("model")).toObject();
            QVERIFY(!other.contains(QLatin1String("latent_attention")));
            for (const char *key : {"scoring", "groups", "groups_per_token", "score_correction_bias", "routed_scale"})
                QVERIFY2(!other.value(QStringLiteral("moe")).toObject().contains(QLatin1String(key)), key);
        }
    }
    void runDefinitionValidatesByName()
    {
        const pb::RunConfig good = pb::importHfConfig(hf("moonlight-16b-a3b"));
        QVERIFY2(invalid(good).isEmpty(), qPrintable(invalid(good)));
        auto broken = [&](auto change) {
            pb::RunConfig c = good;
            change(c.model);
            return invalid(c);
        };
        QVERIFY(broken([](pb::ModelShape &m) { m.kvHeads = 8; }).startsWith(QLatin1String("model.kv_heads")));
        QVERIFY(broken([](pb::ModelShape &m) { m.headDim = 128; }).startsWith(QLatin1String("model.head_dim")));
        QVERIFY(broken([](pb::ModelShape &m) { m.latent.vHeadDim = 0; }).startsWith(QLatin1String("model.latent_attention.v_head_dim")));
        QVERIFY(broken([](pb::ModelShape &m) { m.latent.qkNopeHeadDim = -1; }).startsWith(QLatin1String("model.latent_attention.qk_nope_head_dim")));
        QVERIFY(broken([](pb::ModelShape &m) { m.moe.groups = 5; }).startsWith(QLatin1String("model.moe.groups")));
        QVERIFY(broken([](pb::ModelShape &m) { m.moe.groups = 4; m.moe.groupsPerToken = 8; }).startsWith(QLatin1String("model.moe.groups_per_token")));
        QVERIFY(broken([](pb::ModelShape &m) { m.moe.routedScale = 0; }).startsWith(QLatin1String("model.moe.routed_scale")));
        QVERIFY(broken([](pb::ModelShape &m) { m.moe.scoring = pb::RouterScoring::Softmax; m.moe.groups = 2; }).startsWith(QLatin1String("model.moe.groups")));
        QVERIFY(broken([](pb::ModelShape &m) { m.qkNorm = pb::QkNorm::Head; }).startsWith(QLatin1String("model.latent_attention")));
        // A latent_attention section without its latent, and an unknown scoring, are refused by name.
        QJsonObject json = pb::toJson(good);
        QJsonObject model = json.value(QStringLiteral("model")).toObject();
        QJsonObject latent = model.value(QStringLiteral("latent_attention")).toObject();
        latent.insert(QStringLiteral("kv_lora_rank"), 0);
        model.insert(QStringLiteral("latent_attention"), latent);
        json.insert(QStringLiteral("model"), model);
        try {
            pb::runConfigFromJson(json);
            QFAIL("expected an error");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("model.latent_attention.kv_lora_rank")), e.what());
        }
        QJsonObject moe = pb::toJson(good).value(QStringLiteral("model")).toObject().value(QStringLiteral("moe")).toObject();
        moe.insert(QStringLiteral("scoring"), QStringLiteral("tanh"));
        json = pb::toJson(good);
        model = json.value(QStringLiteral("model")).toObject();
        model.insert(QStringLiteral("moe"), moe);
        json.insert(QStringLiteral("model"), model);
        try {
            pb::runConfigFromJson(json);
            QFAIL("expected an error");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("model.moe.scoring")) && QString::fromUtf8(e.what()).contains(QLatin1String("sigmoid")), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestHfImportDeepseek)
#include "tst_hf_import_deepseek.moc"
