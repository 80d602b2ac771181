// Gemma 4's dense text model through `config import-hf`: the 31B as its multimodal config gives it
// (the text model; towers not piloted), E2B and E4B (per-layer embeddings, shared key/value layers,
// double-wide MLPs), their traits, Gemma4TextConfig's defaults, and the refusals of what is not
// modelled yet (the 26B-A4B's experts) or not a model.
#include "HfImportTestUtil.h"
#include "config/ModelTraitsText.h"
#include "config/ParameterTable.h"
#include "config/RunConfigJson.h"

#include <QJsonArray>
#include <QtTest>

#include <set>

using pbtest::fixture;
using pbtest::refusal;

class TestHfImportGemma4 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // By hand from the shapes: 50 sliding layers (q 5376x8192, k and v 5376x4096, o 8192x5376,
    // q/k norms 256, four norms, GeGLU 3 x 5376 x 21504) and 10 global ones (q 5376x16384, k
    // 5376x2048 for 4 heads of 512, no v_proj, o 16384x5376, q/k norms 512), the tied embedding
    // 262144 x 5376 and the final norm: 30,697,345,280 ("31B"). Transformers' own count is
    // published-counts.json's once measured (checked below where present).
    void gemma4_31b()
    {
        const pb::RunConfig c = pb::importHfConfig(pbtest::hf("gemma-4-31b"));
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), QStringLiteral("gemma4_text"));
        QCOMPARE(m.layers, qint64(60));
        QCOMPARE(m.headDim, qint64(256));
        QCOMPARE(m.kvHeads, qint64(16));
        QCOMPARE(m.traits.globalHeadDim, qint64(512));
        QCOMPARE(m.traits.globalKvHeads, qint64(4));
        QVERIFY(m.traits.globalValuesFromKeys && m.traits.ropeProportional && m.traits.valueNorm && m.traits.layerScalar);
        QCOMPARE(m.traits.slidingWindow, qint64(1024));
        QCOMPARE(m.traits.globalLayers.every, qint64(6));
        QCOMPARE(m.slidingLayers(), qint64(50));
        QCOMPARE(m.traits.partialRotary, 0.25);
        QCOMPARE(m.ropeTheta, 1000000.0);
        QCOMPARE(m.traits.localRopeTheta, 10000.0);
        QCOMPARE(m.traits.attentionScale, 1.0);
        QCOMPARE(m.traits.finalSoftcap, 30.0);
        QCOMPARE(m.traits.normPlacement, pb::NormPlacement::Sandwich);
        QVERIFY(m.traits.normScaleInFp32 && !m.traits.normUnitOffset);
        QCOMPARE(m.qkNorm, pb::QkNorm::Head);
        QCOMPARE(m.activation, pb::ActivationKind::GeGlu);
        QVERIFY(m.tieEmbeddings);
        // Layer 5 is global: its own shapes, and no v_proj.
        QCOMPARE(m.headDimAt(0), qint64(256));
        QCOMPARE(m.headDimAt(5), qint64(512));
        QCOMPARE(m.kvHeadsAt(5), qint64(4));
        QCOMPARE(m.rotaryDimAt(5), qint64(512));
        QCOMPARE(m.rotaryDimAt(0), qint64(256));
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c))
            names.insert(p.name);
        QVERIFY(names.count("model.layers.0.self_attn.v_proj.weight"));
        QVERIFY(!names.count("model.layers.5.self_attn.v_proj.weight"));
        for (const auto &p : pb::parameterTable(c))
            if (p.name == "model.layers.5.self_attn.k_proj.weight")
                QCOMPARE(p.shape, (std::vector<int64_t> {2048, 5376}));
            else if (p.name == "model.layers.5.self_attn.q_norm.weight")
                QCOMPARE(p.shape, (std::vector<int64_t> {512}));
        QCOMPARE(pb::countParameters(c).total, qint64(30697345280));
        const QJsonObject counts = pbtest::publishedCounts(QStringLiteral("google/gemma-4-31B-it"));
        if (!counts.isEmpty())
            QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
        // The run definition carries the traits and reads them back to the same config.
        const pb::RunConfig back = pb::runConfigFromJson(pb::toJson(c));
        QCOMPARE(back.model.traits.globalHeadDim, qint64(512));
        QCOMPARE(back.model.traits.globalKvHeads, qint64(4));
        QVERIFY(back.model.traits.globalValuesFromKeys && back.model.traits.ropeProportional && back.model.traits.valueNorm && back.model.traits.layerScalar);
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        // Global heads of their own width need the proportional rotary; it takes no scaling.
        pb::RunConfig bad = c;
        bad.model.traits.ropeProportional = false;
        QVERIFY2(pbtest::invalid(bad).startsWith(QStringLiteral("model.global_head_dim: needs model.rope_proportional")), qPrintable(pbtest::invalid(bad)));
        // The proportional rotary counts its turned pairs on the global heads: 0.1 turns 25 of 256
        // (the rule for a partial rotary, an even share of head_dim, would refuse 25.6 of 256).
        pb::RunConfig tenth = c;
        tenth.model.traits.partialRotary = 0.1;
        QVERIFY2(pbtest::invalid(tenth).isEmpty(), qPrintable(pbtest::invalid(tenth)));
        tenth.model.traits.partialRotary = 0.001;
        QVERIFY2(pbtest::invalid(tenth).startsWith(QStringLiteral("model.partial_rotary: turns no frequency pair")), qPrintable(pbtest::invalid(tenth)));
        bad = c;
        bad.model.ropeScaling = pb::RopeScaling::linear(8);
        QVERIFY2(pbtest::invalid(bad).startsWith(QStringLiteral("model.rope_scaling:")), qPrintable(pbtest::invalid(bad)));
        // config show names them.
        std::string shown;
        for (const auto &[key, value] : pb::describeModelTraits(m))
            shown += key + ": " + value + "\n";
        QVERIFY2(shown.find("global layers: heads of 512, 4 key/value heads, values from k_proj (no v_proj)") != std::string::npos, shown.c_str());
        QVERIFY2(shown.find("proportional on global layers (64 of 256 frequency pairs turning)") != std::string::npos, shown.c_str());
        QVERIFY2(shown.find("layer_scalar") != std::string::npos, shown.c_str());
    }
    // E2B and E4B from their converter entries (tests/data/hf/gemma-4-e2b, -e4b): the counts are
    // Transformers 5.17's own (published-counts.json, Gemma4ForCausalLM on the meta device, H200).
    void eSeries_data()
    {
        QTest::addColumn<QString>("dir");
        QTest::addColumn<QString>("hubId");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<qint64>("shared");
        QTest::addColumn<qint64>("slidingSource");
        QTest::addColumn<qint64>("globalSource");
        QTest::addColumn<bool>("doubleWide");
        QTest::newRow("E2B") << "gemma-4-e2b" << "google/gemma-4-E2B-it" << qint64(4628569344) << qint64(20) << qint64(13) << qint64(14) << true;
        QTest::newRow("E4B") << "gemma-4-e4b" << "google/gemma-4-E4B-it" << qint64(7463013376) << qint64(18) << qint64(22) << qint64(23) << false;
    }
    void eSeries()
    {
        QFETCH(QString, dir);
        QFETCH(QString, hubId);
        QFETCH(qint64, total);
        QFETCH(qint64, shared);
        QFETCH(qint64, slidingSource);
        QFETCH(qint64, globalSource);
        QFETCH(bool, doubleWide);
        const pb::RunConfig c = pb::importHfConfig(pbtest::hf(qPrintable(dir)));
        const pb::ModelShape &m = c.model;
        QCOMPARE(m.traits.perLayerInput, qint64(256));
        QCOMPARE(m.perLayerVocabSize(), qint64(262144));
        QCOMPARE(m.traits.kvSharedLayers, shared);
        QCOMPARE(m.traits.doubleWideMlp, doubleWide);
        QCOMPARE(m.traits.globalKvHeads, qint64(0)); // no attention_k_eq_v: the global layers keep num_key_value_heads
        const int64_t first = m.layers - shared;
        QCOMPARE(m.firstKvSharedLayer(), first);
        QVERIFY(!m.kvShared(first - 1) && m.kvShared(first) && m.kvShared(m.layers - 1));
        for (int64_t i = first; i < m.layers; ++i)
            QCOMPARE(m.kvSourceLayer(i), m.usesSliding(i) ? slidingSource : globalSource);
        QVERIFY(m.kvSource(slidingSource) && m.kvSource(globalSource) && !m.kvSource(0));
        QCOMPARE(m.intermediateAt(first), m.intermediateSize * (doubleWide ? 2 : 1));
        QCOMPARE(m.intermediateAt(first - 1), m.intermediateSize);
        std::set<std::string> names;
        for (const auto &p : pb::parameterTable(c)) {
            names.insert(p.name);
            if (p.name == "model.embed_tokens_per_layer.weight")
                QCOMPARE(p.shape, (std::vector<int64_t> {262144, m.layers * 256}));
            else if (p.name == "model.per_layer_model_projection.weight")
                QCOMPARE(p.shape, (std::vector<int64_t> {m.layers * 256, m.hiddenSize}));
        }
        const std::string firstShared = "model.layers." + std::to_string(first) + ".";
        QVERIFY(names.count(firstShared + "self_attn.q_proj.weight") && names.count(firstShared + "self_attn.q_norm.weight"));
        QVERIFY(!names.count(firstShared + "self_attn.k_proj.weight") && !names.count(firstShared + "self_attn.v_proj.weight") &&
                !names.count(firstShared + "self_attn.k_norm.weight"));
        QVERIFY(names.count(firstShared + "per_layer_input_gate.weight") && names.count(firstShared + "post_per_layer_input_norm.weight"));
        QVERIFY(names.count("model.per_layer_projection_norm.weight"));
        QCOMPARE(pb::countParameters(c).total, total);
        const QJsonObject counts = pbtest::publishedCounts(hubId);
        QVERIFY(!counts.isEmpty());
        QCOMPARE(pb::countParameters(c).total, counts.value(QStringLiteral("total_params")).toInteger());
        // The traits survive the run definition's JSON; config show names them.
        const pb::RunConfig back = pb::runConfigFromJson(pb::toJson(c));
        QCOMPARE(back.model.traits.perLayerInput, qint64(256));
        QCOMPARE(back.model.traits.kvSharedLayers, shared);
        QCOMPARE(back.model.traits.doubleWideMlp, doubleWide);
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        std::string shown;
        for (const auto &[key, value] : pb::describeModelTraits(m))
            shown += key + ": " + value + "\n";
        const std::string sharing = "layers " + std::to_string(first) + ".." + std::to_string(m.layers - 1) + " compute no keys or values: they attend to layer " +
                                    std::to_string(slidingSource) + " (sliding), " + std::to_string(globalSource) + " (global)";
        QVERIFY2(shown.find(sharing) != std::string::npos, shown.c_str());
        QVERIFY2(shown.find("per-layer input: 256 wide per layer") != std::string::npos, shown.c_str());
        QCOMPARE(shown.find("twice as wide") != std::string::npos, doubleWide);
    }
    // Gemma4TextConfig forces the last layer full at any depth, so an imported Gemma 4 keeps that
    // rule (model.last_layer_global) when a pilot cuts it to fewer layers: at 8 of E4B's layers,
    // layer 7 is global (heads of 512), as in the model Transformers builds from the same config.
    void lastLayerGlobalFollowsTheDepth()
    {
        pb::RunConfig c = pb::importHfConfig(pbtest::hf("gemma-4-e4b"));
        QVERIFY(c.model.traits.lastLayerGlobal);
        c.model.layers = 8;
        c.model.traits.kvSharedLayers = 2;
        QVERIFY2(pbtest::invalid(c).isEmpty(), qPrintable(pbtest::invalid(c)));
        const pb::ModelShape &m = c.model;
        QVERIFY(!m.usesSliding(5) && m.usesSliding(6) && !m.usesSliding(7));
        QCOMPARE(m.slidingLayers(), qint64(6));
        QCOMPARE(m.headDimAt(7), qint64(512));
        QCOMPARE(m.kvSourceLayer(6), qint64(4));
        QCOMPARE(m.kvSourceLayer(7), qint64(5));
        bool seen = false;
        for (const auto &p : pb::parameterTable(c))
            if (p.name == "model.layers.7.self_attn.q_proj.weight") {
                QCOMPARE(p.shape, (std::vector<int64_t> {8 * 512, 2560}));
                seen = true;
            }
        QVERIFY(seen);
        std::string shown;
        for (const auto &[key, value] : pb::describeModelTraits(m))
            shown += key + ": " + value + "\n";
        QVERIFY2(shown.find("full attention on every 6th layer and the last (7)") != std::string::npos, shown.c_str());
        const QJsonObject model = pb::toJson(c).value(QStringLiteral("model")).toObject();
        QCOMPARE(model.value(QStringLiteral("last_layer_global")).toBool(), true);
        QVERIFY(pb::runConfigFromJson(pb::toJson(c)).model.traits.lastLayerGlobal);
        // Without the trait (a config written before it) the pattern alone decides: layer 7 slides,
        // and the key is not written, so such a config keeps its hash.
        pb::RunConfig plain = c;
        plain.model.traits.lastLayerGlobal = false;
        QVERIFY(plain.model.usesSliding(7));
        QVERIFY(!pb::toJson(plain).value(QStringLiteral("model")).toObject().contains(QStringLiteral("last_layer_global")));
        // A config whose layer_types ends on a sliding layer (Transformers makes it full) keeps its
        // pattern in global_layers and the rule in the trait, so it too can be cut shorter.
        QJsonArray types;
        for (int i = 0; i < 8; ++i)
            types.append(i == 5 ? QStringLiteral("full_attention") : QStringLiteral("sliding_attention"));
        pb::RunConfig written = pb::hfRunConfig(QJsonObject {{"model_type", "gemma4_text"}, {"num_hidden_layers", 8}, {"layer_types", types}}, "config.json");
        QVERIFY(!written.model.usesSliding(5) && !written.model.usesSliding(7) && written.model.usesSliding(6));
        written.model.layers = 7;
        QVERIFY2(pbtest::invalid(written).isEmpty(), qPrintable(pbtest::invalid(written)));
        QVERIFY(!written.model.usesSliding(5) && !written.model.usesSliding(6) && written.model.usesSliding(4));
        // Without a window it means nothing: refused by name.
        pb::RunConfig bad = plain;
        bad.model.traits = pb::ModelTraits {};
        bad.model.traits.lastLayerGlobal = true;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("model.last_layer_global")), qPrintable(pbtest::invalid(bad)));
    }
    // A shared layer needs an earlier layer of its kind; sharing every layer, a per-layer table
    // shorter than the vocabulary, a double-wide MLP without sharing: refused by field.
    void sharingRefusals()
    {
        pb::RunConfig c = pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/gemma4_text_e"));
        QVERIFY2(pbtest::invalid(c).isEmpty(), qPrintable(pbtest::invalid(c)));
        pb::RunConfig bad = c;
        bad.model.traits.kvSharedLayers = 3; // layer 1 (global) would read a global layer before it: none
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("model.kv_shared_layers: layer 1 would share the keys and values of an earlier global layer")),
                 qPrintable(pbtest::invalid(bad)));
        bad.model.traits.kvSharedLayers = 4;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("model.kv_shared_layers: must leave at least one layer")), qPrintable(pbtest::invalid(bad)));
        bad = c;
        bad.model.traits.perLayerVocab = c.model.vocabSize - 1;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("model.per_layer_vocab: must cover every token id")), qPrintable(pbtest::invalid(bad)));
        QJsonObject json = fixture("gemma-4-tiny");
        json.insert(QStringLiteral("hidden_size_per_layer_input"), 8);
        QVERIFY2(refusal(json).isEmpty(), qPrintable(refusal(json)));
        json.insert(QStringLiteral("vocab_size_per_layer_input"), 64);
        QVERIFY2(refusal(json).contains(QStringLiteral("vocab_size_per_layer_input: 64 rows cannot embed every token id")), qPrintable(refusal(json)));
        bad = c;
        bad.model.traits.kvSharedLayers = 0;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("model.double_wide_mlp: widens the shared layers' MLPs")), qPrintable(pbtest::invalid(bad)));
    }
    // fp8's widths in multiples of 16 are checked on every layer's own shapes: a global head of 514
    // passes on the sliding layers' 256 but not on the global k_proj (1 key/value head); so is the
    // per-layer input's gate.
    void fp8WidthsPerLayer()
    {
        pb::RunConfig c = pb::importHfConfig(pbtest::hf("gemma-4-e2b"));
        c.train.precision = pb::Precision::Fp8Rowwise;
        c.train.seqLen = 2048;
        QVERIFY2(pbtest::invalid(c).isEmpty(), qPrintable(pbtest::invalid(c)));
        pb::RunConfig bad = c;
        bad.model.traits.globalHeadDim = 514;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("train.precision: fp8 matmuls take widths in multiples of 16; k_proj is 514 x 1536")),
                 qPrintable(pbtest::invalid(bad)));
        bad = c;
        bad.model.traits.perLayerInput = 24;
        QVERIFY2(pbtest::invalid(bad).contains(QStringLiteral("per_layer_input_gate is 24 x 1536")), qPrintable(pbtest::invalid(bad)));
    }
    // Gemma4TextConfig's defaults where a key is absent: 5 sliding : 1 full with the last layer
    // forced full, windows of 512, head_dim 256 / 512, the default rotary parameters.
    void defaults()
    {
        const QJsonObject json {{"model_type", "gemma4_text"}, {"num_hidden_layers", 8}, {"hidden_size_per_layer_input", 0}};
        const pb::RunConfig c = pb::hfRunConfig(json, "config.json");
        const pb::ModelShape &m = c.model;
        QCOMPARE(m.hiddenSize, qint64(2304));
        QCOMPARE(m.vocabSize, qint64(262144));
        QCOMPARE(m.traits.slidingWindow, qint64(512));
        // Layers 5 and 7 are full (the pattern's and the forced last one).
        QCOMPARE(m.slidingLayers(), qint64(6));
        QVERIFY(!m.usesSliding(5) && !m.usesSliding(7) && m.usesSliding(6));
        QCOMPARE(m.headDimAt(7), qint64(512));
        QCOMPARE(m.kvHeadsAt(7), qint64(4)); // without attention_k_eq_v the global layers keep num_key_value_heads
        QVERIFY(!m.traits.globalValuesFromKeys);
        QCOMPARE(m.traits.partialRotary, 0.25);
        QCOMPARE(m.traits.finalSoftcap, 0.0);
        // A null or zero global_head_dim gives the global layers head_dim (Gemma4TextAttention's `or`).
        for (const QJsonValue &v : {QJsonValue(QJsonValue::Null), QJsonValue(0)}) {
            QJsonObject j = json;
            j.insert(QStringLiteral("global_head_dim"), v);
            QCOMPARE(pb::hfRunConfig(j, "config.json").model.headDimAt(7), qint64(256));
        }
    }
    // Transformers 5.17 writes the global layers' shapes per layer (per_layer_config), as the
    // committed parity fixture's config.json (save_pretrained on the device) has them.
    void perLayerConfig()
    {
        const pb::RunConfig c = pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity/gemma4_text"));
        QCOMPARE(c.model.traits.globalHeadDim, qint64(16));
        QCOMPARE(c.model.traits.globalKvHeads, qint64(1));
        QVERIFY(c.model.traits.globalValuesFromKeys);
        QCOMPARE(c.model.headDimAt(0), qint64(8));
        QCOMPARE(c.model.headDimAt(1), qint64(16));
        QCOMPARE(c.model.traits.partialRotary, 0.5);
        // A sliding layer with its own shape, global layers unlike each other, one left out: refused by name.
        QJsonObject json = fixture("gemma-4-tiny");
        json.remove(QStringLiteral("global_head_dim"));
        json.remove(QStringLiteral("num_global_key_value_heads"));
        const QJsonObject global {{"head_dim", 16}, {"num_key_value_heads", 1}};
        json.insert(QStringLiteral("per_layer_config"), QJsonObject {{"1", global}, {"3", global}});
        QVERIFY2(refusal(json).isEmpty(), qPrintable(refusal(json)));
        QCOMPARE(pb::hfRunConfig(json, "config.json").model.traits.globalHeadDim, qint64(16));
        json.insert(QStringLiteral("per_layer_config"), QJsonObject {{"0", global}, {"1", global}, {"3", global}});
        QVERIFY2(refusal(json).contains(QStringLiteral("per_layer_config.0: gives a sliding layer its own shape")), qPrintable(refusal(json)));
        json.insert(QStringLiteral("per_layer_config"), QJsonObject {{"1", global}, {"3", QJsonObject {{"head_dim", 32}, {"num_key_value_heads", 1}}}});
        QVERIFY2(refusal(json).contains(QStringLiteral("per_layer_config.3: differs")), qPrintable(refusal(json)));
        json.insert(QStringLiteral("per_layer_config"), QJsonObject {{"1", global}});
        QVERIFY2(refusal(json).contains(QStringLiteral("per_layer_config: lists some full-attention layers but not layer 3")), qPrintable(refusal(json)));
        json.insert(QStringLiteral("per_layer_config"), QJsonObject {{"1", QJsonObject {{"head_dim", 16}, {"sliding_window", 4}}}, {"3", global}});
        QVERIFY2(refusal(json).contains(QStringLiteral("per_layer_config.1.sliding_window: is a per-layer key")), qPrintable(refusal(json)));
    }
    void refusals_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("says");
        QTest::newRow("every layer shared") << "num_kv_shared_layers" << QJsonValue(4) << "num_kv_shared_layers" << "at least one must compute its own keys and values";
        QTest::newRow("experts") << "enable_moe_block" << QJsonValue(true) << "enable_moe_block" << "26B-A4B";
        QTest::newRow("bidirectional") << "use_bidirectional_attention" << QJsonValue(QStringLiteral("all")) << "use_bidirectional_attention" << "causal";
        QTest::newRow("scaled rotary") << "rope_parameters"
                                       << QJsonValue(QJsonObject {{"full_attention", QJsonObject {{"rope_type", "proportional"}, {"rope_theta", 1e6}, {"factor", 8.0}}}})
                                       << "rope_parameters.full_attention.factor" << "not modelled";
        QTest::newRow("default rotary on global layers") << "rope_parameters" << QJsonValue(QJsonObject {{"full_attention", QJsonObject {{"rope_type", "default"}, {"rope_theta", 1e6}}}})
                                                         << "rope_parameters.full_attention.rope_type" << "proportional";
        QTest::newRow("legacy rope_theta") << "rope_theta" << QJsonValue(1e6) << "rope_theta" << "rope_parameters";
        QTest::newRow("every layer full") << "layer_types" << QJsonValue(QJsonArray {"full_attention", "full_attention", "full_attention", "full_attention"}) << "layer_types"
                                          << "sliding layers";
        QTest::newRow("unknown layer type") << "layer_types" << QJsonValue(QJsonArray {"chunked_attention", "full_attention", "sliding_attention", "full_attention"})
                                            << "layer_types[0]" << "expected full_attention or sliding_attention";
        QTest::newRow("activation") << "hidden_activation" << QJsonValue(QStringLiteral("silu")) << "hidden_activation" << "gelu_pytorch_tanh";
        QTest::newRow("odd global head") << "global_head_dim" << QJsonValue(15) << "global_head_dim" << "even";
        QTest::newRow("global heads not dividing") << "num_global_key_value_heads" << QJsonValue(3) << "global_kv_heads" << "must divide";
    }
    void refusals()
    {
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, field);
        QFETCH(QString, says);
        QJsonObject json = fixture("gemma-4-tiny");
        QVERIFY(!json.isEmpty());
        QVERIFY2(refusal(json).isEmpty(), qPrintable(refusal(json)));
        json.insert(key, value);
        const QString message = refusal(json);
        QVERIFY2(message.contains(field + QStringLiteral(":")) && message.contains(says), qPrintable(message));
    }
    // The multimodal config's text_config must be Gemma 4's text model.
    void multimodalWrapper()
    {
        QJsonObject wrapper = fixture("gemma-4-31b");
        QJsonObject text = wrapper.value(QStringLiteral("text_config")).toObject();
        text.insert(QStringLiteral("model_type"), QStringLiteral("gemma3_text"));
        wrapper.insert(QStringLiteral("text_config"), text);
        QVERIFY2(refusal(wrapper).contains(QStringLiteral("text_config.model_type:")), qPrintable(refusal(wrapper)));
        wrapper.remove(QStringLiteral("text_config"));
        QVERIFY2(refusal(wrapper).contains(QStringLiteral("text_config:")), qPrintable(refusal(wrapper)));
    }
};

QTEST_GUILESS_MAIN(TestHfImportGemma4)
#include "tst_hf_import_gemma4.moc"
