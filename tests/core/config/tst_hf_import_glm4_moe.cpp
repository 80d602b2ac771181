// glm4_moe config.json files (GLM-4.5, GLM-4.5-Air) through `config import-hf`: DeepSeek-V3's
// routing (sigmoid scores, correction bias, group-limited top-k, routed scale, shared experts,
// first dense layers) beside grouped-query attention with partial rotary on the first dims of each
// head (rotate_half, not GLM-4's interleaved pairs), q/k/v biases and the optional per-head q/k
// norm. The published GLM-4.5-Air file; Glm4MoeConfig's defaults for absent keys; keys that would
// change the model and are not modelled refused by name; Transformers' own counts once the device
// has written them.
#include "HfImportTestUtil.h"
#include "config/ParameterTable.h"

#include <QJsonArray>
#include <QtTest>

#include <set>

using pbtest::fixture;
using pbtest::hf;
using pbtest::invalid;
using pbtest::refusal;

namespace {

// The sizes every import requires, for a model whose other keys take Glm4MoeConfig's defaults.
QJsonObject minimal()
{
    return QJsonObject {{"model_type", "glm4_moe"}, {"hidden_size", 64},     {"num_hidden_layers", 3},         {"num_attention_heads", 8},
                        {"intermediate_size", 96},  {"vocab_size", 128},     {"max_position_embeddings", 64}};
}

} // namespace

class TestHfImportGlm4Moe : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void glm45Air()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("glm-4.5-air"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("glm4_moe"));
        QCOMPARE(m.layers, qint64(46));
        QCOMPARE(m.hiddenSize, qint64(4096));
        QCOMPARE(m.attentionHeads, qint64(96));
        QCOMPARE(m.kvHeads, qint64(8));
        QCOMPARE(m.headDim, qint64(128)); // not 4096 / 96
        QCOMPARE(m.intermediateSize, qint64(10944));
        QCOMPARE(m.vocabSize, qint64(151552));
        QCOMPARE(m.maxPositions, qint64(131072));
        QVERIFY(!m.tieEmbeddings);
        QVERIFY(!m.latent.enabled());
        // Glm4MoeAttention: q/k/v biases, none on o_proj; no q/k norm in the Air file.
        QVERIFY(m.attentionBias);
        QVERIFY(!m.traits.outputBias);
        QCOMPARE(m.qkNorm, pb::QkNorm::None);
        // Partial rotary on the first half of each head, rotate_half pairs (GPT-NeoX's form).
        QCOMPARE(m.traits.partialRotary, 0.5);
        QVERIFY(!m.traits.ropeInterleaved);
        QCOMPARE(m.rotaryDim(), qint64(64));
        QCOMPARE(m.ropeTheta, 1000000.0);
        QCOMPARE(m.ropeScaling.type, pb::RopeScalingType::None);
        QCOMPARE(m.normEps, 1e-5);
        QCOMPARE(m.activation, pb::ActivationKind::SwiGlu);
        // DeepSeek-V3's routing.
        const pb::MoeConfig &e = m.moe;
        QCOMPARE(e.scoring, pb::RouterScoring::Sigmoid);
        QVERIFY(e.scoreCorrectionBias);
        QCOMPARE(e.experts, qint64(128));
        QCOMPARE(e.expertsPerToken, qint64(8));
        QCOMPARE(e.expertIntermediateSize, qint64(1408));
        QCOMPARE(e.sharedExpertIntermediateSize, qint64(1408));
        QVERIFY(!e.sharedExpertGate);
        QCOMPARE(e.groups, qint64(1));
        QCOMPARE(e.groupsPerToken, qint64(1));
        QCOMPARE(e.routedScale, 1.0);
        QVERIFY(e.normalizeTopK);
        QCOMPARE(e.denseLayers, std::vector<int64_t> {0});
        QCOMPARE(e.auxLossWeight, 0.0); // Glm4MoeForCausalLM adds no load-balancing loss
        QVERIFY(!e.stackedExperts);     // the hub checkpoints hold one module per expert

        // The parameters by the checkpoints' names; the multi-token-prediction layer (the file's
        // model.layers.46.*) is not built, as Transformers does not build it.
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c))
            names.insert(p.name);
        for (const char *name : {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.layers.1.self_attn.q_proj.bias",
                                 "model.layers.1.self_attn.k_proj.bias", "model.layers.1.self_attn.v_proj.bias", "model.layers.1.mlp.gate.weight",
                                 "model.layers.1.mlp.experts.127.down_proj.weight", "model.layers.45.mlp.shared_experts.up_proj.weight", "lm_head.weight"})
            QVERIFY2(names.count(name), name);
        for (const char *name : {"model.layers.1.self_attn.o_proj.bias", "model.layers.0.mlp.gate.weight", "model.layers.1.self_attn.q_norm.weight",
                                 "model.layers.46.mlp.gate.weight", "model.layers.46.self_attn.q_proj.weight"})
            QVERIFY2(!names.count(name), name);

        // Our counts, from the shapes Glm4MoeForCausalLM builds (the check of Transformers' own
        // numbers is transformersCounts below).
        const int64_t h = 4096, q = 96 * 128, kv = 8 * 128, vocab = 151552;
        const int64_t attention = h * q + q + 2 * (h * kv + kv) + q * h;
        const int64_t expert = 3 * h * 1408;
        const int64_t dense = attention + 2 * h + 3 * h * 10944;
        const int64_t sparse = attention + 2 * h + 128 * h + 128 * expert + expert;
        const int64_t total = 2 * vocab * h + dense + 45 * sparse + h;
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, total);
        QCOMPARE(counts.active, total - 45 * (128 - 8) * expert);
        QCOMPARE(counts.total, qint64(106852245504));  // "106B total"
        QCOMPARE(counts.active, qint64(13424123904));  // "12B active" without the embeddings (12.18B)

        // LoRA's default targets name Glm4MoeAttention's projections.
        QCOMPARE(c.train.lora.targets, (std::vector<std::string> {"q_proj", "k_proj", "v_proj", "o_proj"}));
        pb::RunConfig lora = c;
        lora.train.mode = pb::TrainMode::Lora;
        QVERIFY2(invalid(lora).isEmpty(), qPrintable(invalid(lora)));
    }

    // Transformers' own counts of the published file (tests/data/hf-parity/published-counts.json,
    // written on the device by `tests/bench/hf_family_fixtures.py --counts --only glm-4.5-air`).
    void transformersCounts()
    {
        const QJsonObject counts = pbtest::publishedCounts(QStringLiteral("zai-org/GLM-4.5-Air"));
        if (counts.isEmpty())
            QSKIP("no Transformers count of zai-org/GLM-4.5-Air in tests/data/hf-parity/published-counts.json yet: run "
                  "`python3 tests/bench/hf_family_fixtures.py --counts --only glm-4.5-air --out DIR` on the device and add DIR/counts.json's entry");
        QVERIFY2(!counts.contains(QStringLiteral("error")), qPrintable(counts.value(QStringLiteral("error")).toString()));
        const pb::RunConfig c = pb::importHfConfig(hf("glm-4.5-air"));
        const QString built = QStringLiteral("Transformers built %1 decoder layers for num_hidden_layers 46")
                                  .arg(counts.value(QStringLiteral("decoder_layers_built")).toInteger(-1));
        QVERIFY2(pb::countParameters(c).total == counts.value(QStringLiteral("total_params")).toInteger(),
                 qPrintable(QStringLiteral("ours %1, Transformers' %2 (%3)").arg(pb::countParameters(c).total).arg(counts.value(QStringLiteral("total_params")).toInteger()).arg(built)));
        QCOMPARE(pb::countParameters(c).active, counts.value(QStringLiteral("active_params")).toInteger());
    }

    void defaultsOfTheConfigClass()
    {
        const pb::ModelShape m = pb::hfModelShape(minimal(), "config.json");
        QCOMPARE(m.kvHeads, qint64(8)); // Glm4MoeConfig's default, not the attention heads
        QCOMPARE(m.headDim, qint64(0)); // hidden_size / num_attention_heads
        QCOMPARE(m.normEps, 1e-5);
        QCOMPARE(m.ropeTheta, 10000.0);
        QCOMPARE(m.traits.partialRotary, 0.5);
        QVERIFY(!m.traits.ropeInterleaved);
        QVERIFY(!m.attentionBias && !m.traits.outputBias);
        QCOMPARE(m.qkNorm, pb::QkNorm::None);
        QVERIFY(!m.tieEmbeddings);
        QCOMPARE(m.moe.experts, qint64(128));
        QCOMPARE(m.moe.expertsPerToken, qint64(8));
        QCOMPARE(m.moe.expertIntermediateSize, qint64(1408));
        QCOMPARE(m.moe.sharedExpertIntermediateSize, qint64(1408));
        QCOMPARE(m.moe.groups, qint64(1));
        QCOMPARE(m.moe.groupsPerToken, qint64(1));
        QCOMPARE(m.moe.routedScale, 1.0);
        QVERIFY(m.moe.normalizeTopK);
        QCOMPARE(m.moe.denseLayers, std::vector<int64_t> {0});
    }

    // GLM-4.5's own switches and the forms Transformers 5 writes.
    void glm45Keys()
    {
        QJsonObject json = minimal();
        json.insert(QStringLiteral("use_qk_norm"), true);
        json.insert(QStringLiteral("attention_bias"), true);
        json.insert(QStringLiteral("head_dim"), 16);
        json.insert(QStringLiteral("n_routed_experts"), 16);
        json.insert(QStringLiteral("num_local_experts"), 16); // the attribute_map's other name, equal
        json.insert(QStringLiteral("n_group"), 4);
        json.insert(QStringLiteral("topk_group"), 2);
        json.insert(QStringLiteral("num_experts_per_tok"), 4);
        json.insert(QStringLiteral("moe_intermediate_size"), 8);
        json.insert(QStringLiteral("n_shared_experts"), 2);
        json.insert(QStringLiteral("routed_scaling_factor"), 2.5);
        json.insert(QStringLiteral("first_k_dense_replace"), 2);
        json.insert(QStringLiteral("num_nextn_predict_layers"), 1); // read by nothing, as in Transformers
        json.insert(QStringLiteral("partial_rotary_factor"), 0.5);
        json.insert(QStringLiteral("rope_parameters"), QJsonObject {{"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.25}});
        const pb::RunConfig c = pb::hfRunConfig(json, "config.json");
        const pb::ModelShape &m = c.model;
        QCOMPARE(m.qkNorm, pb::QkNorm::Head);
        QVERIFY(m.attentionBias && !m.traits.outputBias);
        QCOMPARE(m.traits.partialRotary, 0.25); // rope_parameters' factor, as Transformers 5 reads it
        QCOMPARE(m.rotaryDim(), qint64(4));
        QCOMPARE(m.ropeTheta, 1e6);
        QCOMPARE(m.moe.experts, qint64(16));
        QCOMPARE(m.moe.groups, qint64(4));
        QCOMPARE(m.moe.groupsPerToken, qint64(2));
        QCOMPARE(m.moe.sharedExpertIntermediateSize, qint64(16));
        QCOMPARE(m.moe.routedScale, 2.5);
        QCOMPARE(m.moe.denseLayers, (std::vector<int64_t> {0, 1}));
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c))
            if (p.layer == 2)
                names.insert(p.name);
        for (const char *name : {"model.layers.2.self_attn.q_norm.weight", "model.layers.2.self_attn.k_norm.weight", "model.layers.2.mlp.gate.weight",
                                 "model.layers.2.mlp.shared_experts.gate_proj.weight", "model.layers.2.mlp.experts.15.gate_proj.weight"})
            QVERIFY2(names.count(name), name);
        // first_k_dense_replace 0: every layer sparse.
        json.insert(QStringLiteral("first_k_dense_replace"), 0);
        QVERIFY(pb::hfModelShape(json, "config.json").moe.denseLayers.empty());
    }

    void refusedByName_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("latent attention") << "kv_lora_rank" << QJsonValue(512) << "kv_lora_rank: got the number 512; glm4_moe has no latent attention";
        QTest::newRow("query latent") << "q_lora_rank" << QJsonValue(768) << "q_lora_rank: got the number 768; glm4_moe has no latent attention";
        QTest::newRow("softmax scores") << "scoring_func" << QJsonValue(QStringLiteral("softmax")) << "scoring_func: got the string \"softmax\"; only \"sigmoid\" is modelled (Transformers' Glm4Moe always";
        QTest::newRow("greedy top-k") << "topk_method" << QJsonValue(QStringLiteral("greedy")) << "topk_method: got the string \"greedy\"; only \"noaux_tc\"";
        QTest::newRow("sparse every other layer") << "moe_layer_freq" << QJsonValue(2) << "moe_layer_freq: only 1 is modelled";
        QTest::newRow("old expert count key") << "num_experts" << QJsonValue(64) << "num_experts: is a mixture-of-experts setting this import does not model (read for glm4_moe";
        QTest::newRow("aux loss") << "router_aux_loss_coef" << QJsonValue(0.001) << "router_aux_loss_coef: is a mixture-of-experts setting this import does not model";
        QTest::newRow("alias disagrees") << "num_local_experts" << QJsonValue(64) << "num_local_experts: is another name for n_routed_experts";
        QTest::newRow("groups do not divide") << "n_group" << QJsonValue(3) << "n_group: must divide n_routed_experts (128 % 3 != 0)";
        QTest::newRow("more groups than there are") << "topk_group" << QJsonValue(2) << "topk_group: must not exceed n_group (2 > 1)";
        QTest::newRow("mlp bias") << "mlp_bias" << QJsonValue(true) << "mlp_bias: true is not supported";
        QTest::newRow("fp8 checkpoint") << "quantization_config" << QJsonValue(QJsonObject {{"quant_method", "fp8"}}) << "quantization_config: got an object; quantised checkpoints are not modelled";
        QTest::newRow("dropout") << "attention_dropout" << QJsonValue(0.1) << "attention_dropout: got the number 0.1";
        QTest::newRow("no rotary") << "partial_rotary_factor" << QJsonValue(0) << "partial_rotary_factor: expected a number in (0, 1]";
        QTest::newRow("dynamic rope") << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "dynamic"}, {"factor", 2.0}}) << "rope_scaling.rope_type: 'dynamic' is not supported";
    }
    void refusedByName()
    {
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, message);
        QJsonObject json = fixture("glm-4.5-air");
        QVERIFY(!json.isEmpty());
        json.insert(key, value);
        const QString got = refusal(json);
        QVERIFY2(got.contains(message), qPrintable(QStringLiteral("expected '%1' in '%2'").arg(message, got)));
    }
};

QTEST_GUILESS_MAIN(TestHfImportGlm4Moe)
#include "tst_hf_import_glm4_moe.moc"
