// Qwen's hybrid linear-attention configs through `config import-hf`: qwen3_next (Qwen3-Next), and
// the text_config of qwen3_5 (dense) and qwen3_5_moe (the vision tower not piloted). Gated DeltaNet
// on every layer but each full_attention_interval-th (or where layer_types says), the gated full
// attention with partial rotary and per-head q/k norm, the zero-centred RMSNorm, Qwen2-MoE's block
// with its gated shared expert. The Qwen3-Next-80B-A3B file; the config classes' defaults for
// absent keys; keys that would change the model refused by name; the run definition's JSON with
// and without the new traits; Transformers' own counts once the device has written them.
#include "HfImportTestUtil.h"
#include "config/ParameterTable.h"
#include "config/RunConfigJson.h"

#include <QJsonArray>
#include <QtTest>

#include <map>

using pbtest::hf;
using pbtest::invalid;
using pbtest::refusal;

namespace {

// A Qwen3-Next-shaped model small enough to read by eye: 4 layers, full attention on 1 and 3.
QJsonObject tinyNext()
{
    return QJsonObject {{"model_type", "qwen3_next"},      {"hidden_size", 32},           {"num_hidden_layers", 4},          {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},        {"head_dim", 16},              {"intermediate_size", 48},         {"vocab_size", 64},
                        {"max_position_embeddings", 64},   {"full_attention_interval", 2}, {"linear_num_key_heads", 2},      {"linear_num_value_heads", 4},
                        {"linear_key_head_dim", 8},        {"linear_value_head_dim", 8},  {"linear_conv_kernel_dim", 4},     {"num_experts", 8},
                        {"num_experts_per_tok", 2},        {"moe_intermediate_size", 8},  {"shared_expert_intermediate_size", 16}};
}

QJsonObject textOf(const QJsonObject &json, const char *type)
{
    QJsonObject text = json;
    text.insert(QStringLiteral("model_type"), QLatin1String(type));
    for (const char *key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"})
        text.remove(QLatin1String(key));
    return text;
}

// A qwen3_5 (or qwen3_5_moe) multimodal config around `text` as its text_config.
QJsonObject multimodal(const char *type, const QJsonObject &text)
{
    return QJsonObject {{"model_type", type}, {"text_config", text}, {"vision_config", QJsonObject {{"depth", 2}}}, {"tie_word_embeddings", false}};
}

QJsonObject with(QJsonObject json, const char *key, const QJsonValue &value)
{
    json.insert(QLatin1String(key), value);
    return json;
}

} // namespace

class TestHfImportQwenHybrid : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Qwen/Qwen3-Next-80B-A3B-Instruct's config.json.
    void qwen3Next80B()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("qwen3-next-80b-a3b"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("qwen3_next"));
        QCOMPARE(m.layers, qint64(48));
        QCOMPARE(m.hiddenSize, qint64(2048));
        QCOMPARE(m.attentionHeads, qint64(16));
        QCOMPARE(m.kvHeads, qint64(2));
        QCOMPARE(m.headDim, qint64(256));
        QCOMPARE(m.intermediateSize, qint64(5120));
        QCOMPARE(m.vocabSize, qint64(151936));
        QCOMPARE(m.maxPositions, qint64(262144));
        QVERIFY(!m.tieEmbeddings);
        QVERIFY(!m.attentionBias && !m.traits.outputBias);
        QCOMPARE(m.ropeTheta, 1e7);
        QCOMPARE(m.traits.partialRotary, 0.25);
        QCOMPARE(m.rotaryDim(), qint64(64));
        QVERIFY(!m.traits.ropeInterleaved);
        QCOMPARE(m.normEps, 1e-6);
        // Qwen3NextRMSNorm is Gemma 3's: (1 + weight), scaled in fp32; q/k norm per head.
        QVERIFY(m.traits.normUnitOffset && m.traits.normScaleInFp32);
        QCOMPARE(m.qkNorm, pb::QkNorm::Head);
        QVERIFY(m.traits.attentionOutputGate);
        // Gated DeltaNet on 36 layers, full attention on every 4th (3, 7, ..., 47).
        const pb::LinearAttention &l = m.linear;
        QVERIFY(l.enabled());
        QCOMPARE(l.fullLayers.every, qint64(4));
        QVERIFY(l.fullLayers.layers.empty());
        QCOMPARE(l.keyHeads, qint64(16));
        QCOMPARE(l.valueHeads, qint64(32));
        QCOMPARE(l.keyHeadDim, qint64(128));
        QCOMPARE(l.valueHeadDim, qint64(128));
        QCOMPARE(l.convKernel, qint64(4));
        QCOMPARE(l.layout, pb::LinearAttentionLayout::QkvzBa);
        QCOMPARE(m.fullAttentionLayers(), qint64(12));
        QVERIFY(l.linear(0) && l.linear(2) && !l.linear(3) && !l.linear(47));
        // Qwen2-MoE's block on every layer.
        const pb::MoeConfig &e = m.moe;
        QCOMPARE(e.experts, qint64(512));
        QCOMPARE(e.expertsPerToken, qint64(10));
        QCOMPARE(e.expertIntermediateSize, qint64(512));
        QCOMPARE(e.sharedExpertIntermediateSize, qint64(512));
        QVERIFY(e.sharedExpertGate);
        QVERIFY(e.normalizeTopK);
        QCOMPARE(e.sparseStep, qint64(1));
        QVERIFY(e.denseLayers.empty());
        QCOMPARE(e.auxLossWeight, 0.001);
        QVERIFY(!e.stackedExperts);

        std::map<std::string, std::vector<int64_t>> shapes;
        for (const auto &p : pb::parameterTable(c))
            shapes[p.name] = p.shape;
        const std::map<std::string, std::vector<int64_t>> expected {
            {"model.layers.0.linear_attn.in_proj_qkvz.weight", {12288, 2048}}, {"model.layers.0.linear_attn.in_proj_ba.weight", {64, 2048}},
            {"model.layers.0.linear_attn.conv1d.weight", {8192, 1, 4}},        {"model.layers.0.linear_attn.dt_bias", {32}},
            {"model.layers.0.linear_attn.A_log", {32}},                        {"model.layers.0.linear_attn.norm.weight", {128}},
            {"model.layers.0.linear_attn.out_proj.weight", {2048, 4096}},      {"model.layers.3.self_attn.q_proj.weight", {8192, 2048}},
            {"model.layers.3.self_attn.k_proj.weight", {512, 2048}},           {"model.layers.3.self_attn.o_proj.weight", {2048, 4096}},
            {"model.layers.3.self_attn.q_norm.weight", {256}},                 {"model.layers.0.mlp.gate.weight", {512, 2048}},
            {"model.layers.0.mlp.experts.511.down_proj.weight", {2048, 512}},  {"model.layers.47.mlp.shared_expert.up_proj.weight", {512, 2048}},
            {"model.layers.47.mlp.shared_expert_gate.weight", {1, 2048}},      {"lm_head.weight", {151936, 2048}}};
        for (const auto &[name, shape] : expected) {
            QVERIFY2(shapes.count(name), name.c_str());
            QVERIFY2(shapes.at(name) == shape, name.c_str());
        }
        for (const char *name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.3.linear_attn.out_proj.weight", "model.layers.0.mlp.gate_proj.weight"})
            QVERIFY2(!shapes.count(name), name);

        // Our counts, from the shapes Qwen3NextForCausalLM builds (Transformers' own: transformersCounts).
        const int64_t h = 2048, vocab = 151936;
        const int64_t linear = 12288 * h + 64 * h + 8192 * 4 + 32 + 32 + 128 + 4096 * h;
        const int64_t full = 8192 * h + 2 * 512 * h + 4096 * h + 2 * 256;
        const int64_t expert = 3 * h * 512;
        const int64_t mlp = 512 * h + 512 * expert + expert + h;
        const int64_t total = 2 * vocab * h + 36 * linear + 12 * full + 48 * (mlp + 2 * h) + h;
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, total);
        QCOMPARE(counts.active, total - 48 * (512 - 10) * expert);
        QCOMPARE(counts.total, qint64(79674391296)); // "80B total"
        QCOMPARE(counts.active, qint64(3874929408)); // "3B activated" (3.25B without the embeddings)
    }

    // Transformers' own counts of each file (tests/data/hf-parity/published-counts.json, written on
    // the device by `tests/bench/hf_family_fixtures.py --counts --only qwen3-next-80b-a3b,qwen3.5-9b`).
    void transformersCounts_data()
    {
        QTest::addColumn<QString>("hubId");
        QTest::addColumn<QString>("folder");
        QTest::newRow("qwen3-next-80b-a3b") << QStringLiteral("Qwen/Qwen3-Next-80B-A3B-Instruct") << QStringLiteral("qwen3-next-80b-a3b");
        QTest::newRow("qwen3.5-9b") << QStringLiteral("Qwen/Qwen3.5-9B") << QStringLiteral("qwen3.5-9b");
    }
    void transformersCounts()
    {
        QFETCH(QString, hubId);
        QFETCH(QString, folder);
        const QJsonObject counts = pbtest::publishedCounts(hubId);
        QVERIFY2(!counts.isEmpty(), qPrintable(QStringLiteral("no Transformers count of %1 in tests/data/hf-parity/published-counts.json").arg(hubId)));
        QVERIFY2(!counts.contains(QStringLiteral("error")), qPrintable(counts.value(QStringLiteral("error")).toString()));
        const pb::RunConfig c = pb::importHfConfig(hf(qPrintable(folder)));
        QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
        QCOMPARE(pb::countParameters(c).active, counts.value(QStringLiteral("active_params")).toInteger());
    }

    void defaultsOfTheConfigClasses()
    {
        // Qwen3NextConfig: partial_rotary_factor 0.25, full_attention_interval 4, head_dim 256,
        // linear heads 16 / 32 of 128, norm_topk_prob true, 512 experts (top 10).
        const pb::ModelShape next = pb::hfModelShape(QJsonObject {{"model_type", "qwen3_next"}}, "config.json");
        QCOMPARE(next.layers, qint64(48));
        QCOMPARE(next.intermediateSize, qint64(5632));
        QCOMPARE(next.traits.partialRotary, 0.25);
        QCOMPARE(next.linear.fullLayers.every, qint64(4));
        QCOMPARE(next.linear.keyHeads, qint64(16));
        QCOMPARE(next.linear.valueHeads, qint64(32));
        QCOMPARE(next.moe.experts, qint64(512));
        QCOMPARE(next.moe.expertsPerToken, qint64(10));
        QVERIFY(next.moe.normalizeTopK);
        // Qwen3_5TextConfig: dense, the separate projections.
        const pb::ModelShape dense = pb::hfModelShape(QJsonObject {{"model_type", "qwen3_5_text"}}, "config.json");
        QCOMPARE(dense.vocabSize, qint64(248320));
        QCOMPARE(dense.hiddenSize, qint64(4096));
        QCOMPARE(dense.intermediateSize, qint64(12288));
        QCOMPARE(dense.kvHeads, qint64(4));
        QVERIFY(!dense.moe.enabled());
        QCOMPARE(dense.linear.layout, pb::LinearAttentionLayout::QkvZBA);
        // Qwen3_5MoeTextConfig: 256 experts, top 8, always renormalised, every layer sparse.
        const pb::ModelShape moe = pb::hfModelShape(QJsonObject {{"model_type", "qwen3_5_moe_text"}}, "config.json");
        QCOMPARE(moe.layers, qint64(40));
        QCOMPARE(moe.moe.experts, qint64(256));
        QCOMPARE(moe.moe.expertsPerToken, qint64(8));
        QVERIFY(moe.moe.normalizeTopK && moe.moe.sharedExpertGate);
        QCOMPARE(moe.linear.layout, pb::LinearAttentionLayout::QkvZBA);
    }

    // layer_types wins over full_attention_interval; a list that is no period stays a list.
    void layerTypes()
    {
        QJsonArray types;
        for (const char *t : {"full_attention", "linear_attention", "linear_attention", "full_attention"})
            types.append(QLatin1String(t));
        const pb::ModelShape m = pb::hfModelShape(with(tinyNext(), "layer_types", types), "config.json");
        QCOMPARE(m.linear.fullLayers.every, qint64(0));
        QCOMPARE(m.linear.fullLayers.layers, (std::vector<int64_t> {0, 3}));
        QVERIFY(!m.linear.linear(0) && m.linear.linear(1) && !m.linear.linear(3));
        const pb::ModelShape periodic = pb::hfModelShape(tinyNext(), "config.json");
        QCOMPARE(periodic.linear.fullLayers.every, qint64(2));
        QVERIFY(periodic.linear.linear(0) && !periodic.linear.linear(1));
    }

    // The text model of a qwen3_5 / qwen3_5_moe config; the vision tower is not read.
    void qwen35TextConfig()
    {
        const pb::RunConfig dense = pb::hfRunConfig(multimodal("qwen3_5", textOf(tinyNext(), "qwen3_5_text")), "config.json");
        QCOMPARE(QString::fromStdString(dense.model.family), QStringLiteral("qwen3_5_text"));
        QVERIFY(!dense.model.moe.enabled());
        QCOMPARE(dense.model.intermediateSize, qint64(48));
        QCOMPARE(dense.model.linear.layout, pb::LinearAttentionLayout::QkvZBA);
        // An empty mlp_only_layers (one public converter writes it) is the same dense model; a listed layer is refused below.
        const pb::RunConfig emptyList = pb::hfRunConfig(multimodal("qwen3_5", with(textOf(tinyNext(), "qwen3_5_text"), "mlp_only_layers", QJsonArray {})), "config.json");
        QVERIFY(!emptyList.model.moe.enabled());
        QCOMPARE(pb::countParameters(emptyList).total, pb::countParameters(dense).total);
        std::map<std::string, std::vector<int64_t>> shapes;
        for (const auto &p : pb::parameterTable(dense))
            shapes[p.name] = p.shape;
        // Qwen3_5GatedDeltaNet: in_proj_qkv [2 Hk Dk + Hv Dv], in_proj_z [Hv Dv], in_proj_b and _a [Hv].
        QVERIFY((shapes["model.layers.0.linear_attn.in_proj_qkv.weight"] == std::vector<int64_t> {64, 32}));
        QVERIFY((shapes["model.layers.0.linear_attn.in_proj_z.weight"] == std::vector<int64_t> {32, 32}));
        QVERIFY((shapes["model.layers.0.linear_attn.in_proj_b.weight"] == std::vector<int64_t> {4, 32}));
        QVERIFY((shapes["model.layers.0.linear_attn.in_proj_a.weight"] == std::vector<int64_t> {4, 32}));
        QVERIFY((shapes["model.layers.0.mlp.gate_proj.weight"] == std::vector<int64_t> {48, 32}));
        QVERIFY(!shapes.count("model.layers.0.linear_attn.in_proj_qkvz.weight"));

        // Qwen3.5's rope_parameters: mrope_section and mrope_interleaved are text-only plain rotary.
        QJsonObject moeText = tinyNext();
        moeText.insert(QStringLiteral("model_type"), QStringLiteral("qwen3_5_moe_text"));
        moeText.remove(QStringLiteral("intermediate_size"));
        moeText.insert(QStringLiteral("rope_parameters"), QJsonObject {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
                                                                       {"mrope_interleaved", true}, {"mrope_section", QJsonArray {1, 1, 0}}});
        const pb::RunConfig moe = pb::hfRunConfig(multimodal("qwen3_5_moe", moeText), "config.json");
        QCOMPARE(QString::fromStdString(moe.model.family), QStringLiteral("qwen3_5_moe_text"));
        QCOMPARE(moe.model.ropeTheta, 1e7);
        QCOMPARE(moe.model.rotaryDim(), qint64(4));
        QVERIFY(moe.model.moe.enabled() && moe.model.moe.sharedExpertGate);
        for (int64_t layer = 0; layer < 4; ++layer)
            QVERIFY(moe.model.moe.sparse(layer));
    }

    void refusals_data()
    {
        QTest::addColumn<QJsonObject>("json");
        QTest::addColumn<QString>("field");
        QTest::newRow("attention bias") << with(tinyNext(), "attention_bias", true) << "attention_bias";
        QTest::newRow("gelu") << with(tinyNext(), "hidden_act", "gelu") << "hidden_act";
        QTest::newRow("sliding window") << with(tinyNext(), "use_sliding_window", true) << "use_sliding_window";
        QTest::newRow("quantised") << with(tinyNext(), "quantization_config", QJsonObject {{"quant_method", "fp8"}}) << "quantization_config";
        QTest::newRow("value heads") << with(tinyNext(), "linear_num_value_heads", 3) << "linear_num_value_heads";
        QTest::newRow("zero key dim") << with(tinyNext(), "linear_key_head_dim", 0) << "linear_key_head_dim";
        QTest::newRow("interval") << with(tinyNext(), "full_attention_interval", 0) << "full_attention_interval";
        QTest::newRow("layer type") << with(tinyNext(), "layer_types", QJsonArray {"full_attention", "sliding_attention", "linear_attention", "full_attention"})
                                    << "layer_types[1]";
        QTest::newRow("layer types short") << with(tinyNext(), "layer_types", QJsonArray {"full_attention"}) << "layer_types";
        QTest::newRow("mlp_only_layers") << with(tinyNext(), "mlp_only_layers", QJsonArray {4}) << "mlp_only_layers[0]";
        QTest::newRow("dense qwen3_5 with experts") << multimodal("qwen3_5", with(textOf(tinyNext(), "qwen3_5_text"), "num_experts", 8)) << "num_experts";
        QTest::newRow("dense qwen3_5 with a dense-only layer") << multimodal("qwen3_5", with(textOf(tinyNext(), "qwen3_5_text"), "mlp_only_layers", QJsonArray {1})) << "mlp_only_layers";
        QJsonObject moeText = textOf(tinyNext(), "qwen3_5_moe_text");
        moeText.remove(QStringLiteral("intermediate_size"));
        QTest::newRow("qwen3_5_moe norm_topk_prob") << multimodal("qwen3_5_moe", with(moeText, "norm_topk_prob", false)) << "norm_topk_prob";
        QTest::newRow("qwen3_5_moe intermediate_size") << multimodal("qwen3_5_moe", with(moeText, "intermediate_size", 48)) << "intermediate_size";
        QTest::newRow("text_config of another type") << multimodal("qwen3_5", textOf(tinyNext(), "qwen3_next")) << "text_config.model_type";
        QTest::newRow("no text_config") << QJsonObject {{"model_type", "qwen3_5"}} << "text_config";
    }
    void refusals()
    {
        QFETCH(QJsonObject, json);
        QFETCH(QString, field);
        const QString message = refusal(json);
        QVERIFY2(!message.isEmpty(), "imported");
        QVERIFY2(message.contains(field), qPrintable(message));
    }

    // The traits go into the run definition only where a model has them: a Llama config's JSON is
    // unchanged (its hash too: tst_runconfig_json), a hybrid's round-trips.
    void runConfigJson()
    {
        const pb::RunConfig llama;
        const QJsonObject plain = pb::toJson(llama).value(QStringLiteral("model")).toObject();
        QVERIFY(!plain.contains(QStringLiteral("linear_attention")) && !plain.contains(QStringLiteral("attention_output_gate")));

        QJsonArray types;
        for (const char *t : {"full_attention", "linear_attention", "linear_attention", "full_attention"})
            types.append(QLatin1String(t));
        const pb::RunConfig c = pb::hfRunConfig(with(tinyNext(), "layer_types", types), "config.json");
        const QJsonObject json = pb::toJson(c);
        const QJsonObject model = json.value(QStringLiteral("model")).toObject();
        QVERIFY(model.value(QStringLiteral("attention_output_gate")).toBool());
        const QJsonObject linear = model.value(QStringLiteral("linear_attention")).toObject();
        QCOMPARE(linear.value(QStringLiteral("layout")).toString(), QStringLiteral("qkvz_ba"));
        QCOMPARE(linear.value(QStringLiteral("key_heads")).toInt(), 2);
        const pb::RunConfig back = pb::runConfigFromJson(json);
        QCOMPARE(back.model.linear.fullLayers.layers, (std::vector<int64_t> {0, 3}));
        QCOMPARE(back.model.linear.valueHeads, qint64(4));
        QCOMPARE(back.model.linear.convKernel, qint64(4));
        QVERIFY(back.model.traits.attentionOutputGate);
        QCOMPARE(pb::countParameters(back).total, pb::countParameters(c).total);

        // A section without key heads, or with an unknown layout, is refused by name.
        QJsonObject bad = json, badModel = model, badLinear = linear;
        badLinear.insert(QStringLiteral("layout"), QStringLiteral("qkv"));
        badModel.insert(QStringLiteral("linear_attention"), badLinear);
        bad.insert(QStringLiteral("model"), badModel);
        try {
            pb::runConfigFromJson(bad);
            QFAIL("an unknown layout was read");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("model.linear_attention.layout")), e.what());
        }
    }

    // Validation: value heads a multiple of key heads; LoRA may name linear_attn's projections.
    void validation()
    {
        pb::RunConfig c = pb::hfRunConfig(tinyNext(), "config.json");
        QVERIFY2(invalid(c).isEmpty(), qPrintable(invalid(c)));
        c.train.mode = pb::TrainMode::Lora;
        c.train.lora.rank = 4;
        c.train.lora.targets = {"in_proj_qkvz", "in_proj_ba", "out_proj", "q_proj"};
        QVERIFY2(invalid(c).isEmpty(), qPrintable(invalid(c)));
        c.train.lora.targets = {"in_proj_qkv"}; // Qwen3.5's name, not this layout's
        QVERIFY(invalid(c).contains(QStringLiteral("train.lora.targets")));
        pb::RunConfig heads = pb::hfRunConfig(tinyNext(), "config.json");
        heads.model.linear.valueHeads = 3;
        QVERIFY(invalid(heads).contains(QStringLiteral("model.linear_attention.value_heads")));
        pb::RunConfig fp8 = pb::hfRunConfig(textOf(tinyNext(), "qwen3_5_text"), "config.json");
        fp8.train.precision = pb::Precision::Fp8Rowwise;
        QVERIFY(invalid(fp8).contains(QStringLiteral("train.precision")));
    }
};

QTEST_GUILESS_MAIN(TestHfImportQwenHybrid)
#include "tst_hf_import_qwen_hybrid.moc"
