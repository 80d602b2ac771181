// RunConfig <-> JSON: round trip, stable hash, old and minimal files, refusals with clear messages.
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "config/RunConfigValidation.h"
#include "config/RunConfigParse.h"
#include "util/Errors.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include "config/HfImport.h"
#include <QtTest>

namespace {

QString fixture(const char *name) { return QStringLiteral(PB_TEST_DATA_DIR "/configs/") + QLatin1String(name); }

// The message of the InvalidInputError `fn` throws; fails the test when it throws nothing.
template <typename Fn> QString errorOf(Fn fn)
{
    try {
        fn();
    } catch (const pb::InvalidInputError &e) {
        return QString::fromUtf8(e.what());
    }
    return QStringLiteral("<no error>");
}

pb::RunConfig customConfig()
{
    pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
    c.name = "round trip \"quoted\" \u00e9";
    c.seed = 9007199254740991ULL; // 2^53 - 1: the largest seed a JSON number keeps exactly
    c.deterministic = true;
    c.model.revision = "0123abcd";
    c.model.headDim = 32;
    c.model.attentionBias = true;
    c.model.norm = pb::NormKind::LayerNorm;
    c.model.activation = pb::ActivationKind::GeGlu;
    c.model.ropeTheta = 123456.5;
    c.model.normEps = 1e-6;
    c.train.mode = pb::TrainMode::Lora;
    c.train.lora = {8, 12.5, 0.05, {"q_proj", "down_proj"}};
    c.train.trainable = {"lm_head", "a, \"b\",c"};
    c.train.optimizer = {pb::OptimizerKind::RmsProp, 0.0123, 0.01, 0.8, 0.95, 1e-7, 0.5};
    c.train.schedule = {pb::ScheduleKind::Linear, 7, 77, 0.25};
    c.train.precision = pb::Precision::Fp16Mixed;
    c.train.gradAccum = 3;
    c.train.recompute = true;
    c.train.attention = pb::AttentionImpl::MemEfficient;
    c.train.gradClip = 0.0;
    c.train.lossScale = 1024;
    c.validation = {10, 2};
    c.checkpoint = {25, "/tmp/ckpt"};
    c.data.kind = pb::DataKind::Jsonl;
    c.data.path = "/data/train.jsonl";
    c.data.lengths = pb::LengthDistribution::Uniform;
    c.data.minLength = 8;
    c.data.longestFirst = false;
    c.data.validationFraction = 50;
    c.job.unit = pb::JobUnit::Epochs;
    c.job.amount = 3;
    c.job.datasetTokens = 1.5e8;
    c.job.deadlineHours = 12.5;
    return c;
}

} // namespace

class TestRunConfigJson : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void roundTripKeepsEveryField()
    {
        const pb::RunConfig c = customConfig();
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("run.json"));
        pb::saveRunConfig(c, path);
        const pb::RunConfig back = pb::loadRunConfig(path);
        // toJson covers every field, so equal JSON means equal configs.
        QCOMPARE(pb::toJson(back), pb::toJson(c));
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        QCOMPARE(back.seed, uint64_t(9007199254740991ULL));
        QCOMPARE(back.name, c.name);
        QCOMPARE(back.train.lora.targets, (std::vector<std::string> {"q_proj", "down_proj"}));
        QCOMPARE(*back.job.deadlineHours, 12.5);
        QCOMPARE(back.train.optimizer.kind, pb::OptimizerKind::RmsProp);
        QCOMPARE(back.data.lengths, pb::LengthDistribution::Uniform);
    }
    void fileIsReadableSnakeCase()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("run.json"));
        pb::saveRunConfig(pb::presetConfig(QStringLiteral("tiny")), path);
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray text = file.readAll();
        QVERIFY2(text.startsWith("{\n  \"schema_version\": 1,\n  \"name\": \"tiny\",\n  \"seed\": 1234,\n"), text.constData());
        QVERIFY(text.indexOf("\"model\"") < text.indexOf("\"train\""));
        QVERIFY(text.indexOf("\"layers\"") < text.indexOf("\"hidden_size\""));
        QVERIFY(text.contains("\"targets\": [\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]"));
        QVERIFY(text.contains("\"deadline_hours\": null"));
        QVERIFY(text.contains("\"schema_version\": 1"));
        QVERIFY(text.contains("\"hidden_size\": 64"));
        QVERIFY(text.contains("\"precision\": \"fp32\""));
        QVERIFY(!text.contains("hiddenSize"));
    }
    void hashIgnoresKeyOrderAndWhitespace()
    {
        const pb::RunConfig a = pb::loadRunConfig(fixture("tiny-copy.json"));
        const pb::RunConfig b = pb::loadRunConfig(fixture("tiny-reordered.json"));
        const std::string h = pb::configHash(a);
        QCOMPARE(h.size(), size_t(64));
        QCOMPARE(pb::configHash(b), h);
        pb::RunConfig c = a;
        c.train.optimizer.lr = 3.0000001e-3;
        QVERIFY(pb::configHash(c) != h);
        c = a;
        c.model.revision = "x";
        QVERIFY(pb::configHash(c) != h);
    }
    void hashIsSha256HexOfContent()
    {
        const QString text = QString::fromStdString(pb::configHash(pb::RunConfig {}));
        QVERIFY(text.contains(QRegularExpression(QStringLiteral("^[0-9a-f]{64}$"))));
        QCOMPARE(pb::configHash(pb::RunConfig {}), pb::configHash(pb::RunConfig {}));
        pb::RunConfig seeded;
        seeded.seed = 1235;
        QVERIFY(pb::configHash(seeded) != pb::configHash(pb::RunConfig {}));
        pb::RunConfig deadline;
        deadline.job.deadlineHours = 0.0; // set-but-zero differs from unset (null)
        QVERIFY(pb::configHash(deadline) != pb::configHash(pb::RunConfig {}));
    }
    void configsWithoutRopeScalingKeepTheirHash()
    {
        // The hash of this file as printed by the build before rope scaling existed: a config
        // without it must hash as before, or every recorded run and checkpoint stops matching its
        // config. A new field must be written only when set to keep this.
        const pb::RunConfig c = pb::loadRunConfig(fixture("tiny-copy.json"));
        QCOMPARE(QString::fromStdString(pb::configHash(c)), QStringLiteral("0645ff0a4b35c76af0d8fb82fe05aa0d26035d4c8c7f129732b076e7b98afb63"));
        QVERIFY(!pb::toJson(c).value(QStringLiteral("model")).toObject().contains(QStringLiteral("rope_scaling")));
        // Naming type none is the same config as leaving it out.
        QJsonObject json = pb::toJson(c);
        QJsonObject model = json.value(QStringLiteral("model")).toObject();
        model.insert(QStringLiteral("rope_scaling"), QJsonObject {{QStringLiteral("type"), QStringLiteral("none")}});
        json.insert(QStringLiteral("model"), model);
        QCOMPARE(pb::configHash(pb::runConfigFromJson(json)), pb::configHash(c));
    }
    void ropeScalingRoundTrips()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        const std::string plainHash = pb::configHash(c);
        c.model.ropeScaling = pb::RopeScaling::llama3(32, 1, 4, 8192);
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("run.json"));
        pb::saveRunConfig(c, path);
        const pb::RunConfig back = pb::loadRunConfig(path);
        QCOMPARE(back.model.ropeScaling.type, pb::RopeScalingType::Llama3);
        QCOMPARE(back.model.ropeScaling.factor, 32.0);
        QCOMPARE(back.model.ropeScaling.lowFreqFactor, 1.0);
        QCOMPARE(back.model.ropeScaling.highFreqFactor, 4.0);
        QCOMPARE(back.model.ropeScaling.originalMaxPositions, qint64(8192));
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        QVERIFY(pb::configHash(c) != plainHash);
        const QJsonObject written = pb::toJson(c).value(QStringLiteral("model")).toObject().value(QStringLiteral("rope_scaling")).toObject();
        QCOMPARE(written, (QJsonObject {{"type", "llama3"}, {"factor", 32}, {"low_freq_factor", 1}, {"high_freq_factor", 4}, {"original_max_positions", 8192}}));
        // In the file it follows rope_theta.
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray text = file.readAll();
        QVERIFY2(text.indexOf("\"rope_theta\"") < text.indexOf("\"rope_scaling\": {\n      \"type\": \"llama3\",\n      \"factor\": 32,"), text.constData());
        QVERIFY(text.indexOf("\"rope_scaling\"") < text.indexOf("\"norm_eps\""));

        // Linear scaling writes only the fields it uses.
        c.model.ropeScaling = pb::RopeScaling::linear(4);
        QCOMPARE(pb::toJson(c).value(QStringLiteral("model")).toObject().value(QStringLiteral("rope_scaling")).toObject(), (QJsonObject {{"type", "linear"}, {"factor", 4}}));
        QCOMPARE(pb::runConfigFromJson(pb::toJson(c)).model.ropeScaling.factor, 4.0);
    }
    // train.cuda_graph round-trips, changes the hash, and is written only when on.
    void cudaGraphRoundTrip()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        const std::string plainHash = pb::configHash(c);
        QVERIFY(!pb::toJson(c).value(QStringLiteral("train")).toObject().contains(QStringLiteral("cuda_graph")));
        c.train.cudaGraph = true;
        const QJsonObject json = pb::toJson(c);
        QCOMPARE(json.value(QStringLiteral("train")).toObject().value(QStringLiteral("cuda_graph")).toBool(), true);
        QVERIFY(pb::configHash(c) != plainHash);
        QVERIFY(pb::runConfigFromJson(json).train.cudaGraph);
    }

    // Every model trait round-trips through the file, changes the hash, and is written only when
    // it differs from Llama's (tiny-copy.json's hash above stays what it was).
    void modelTraitsRoundTrip()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        const std::string plainHash = pb::configHash(c);
        const QJsonObject plainModel = pb::toJson(c).value(QStringLiteral("model")).toObject();
        for (const char *key : {"sliding_window", "global_layers", "no_rope_layers", "partial_rotary", "norm_placement", "fused_qkv", "embedding_scale"})
            QVERIFY2(!plainModel.contains(QLatin1String(key)), key);
        pb::ModelTraits &t = c.model.traits;
        t.slidingWindow = 8;
        t.globalLayers = {2, {}};
        t.noRopeLayers = {0, {1}};
        t.partialRotary = 0.5;
        t.localRopeTheta = 10000;
        t.ropeInterleaved = true;
        t.normPlacement = pb::NormPlacement::Sandwich;
        t.normUnitOffset = t.normScaleInFp32 = true;
        t.attentionScale = 0.0625;
        t.attentionSoftcap = 50;
        t.finalSoftcap = 30;
        t.queryTemperatureBeta = 0.1;
        t.queryTemperatureLength = 16;
        t.outputBias = t.mlpBias = true;
        t.embeddingScale = 8;
        t.embeddingScaleRounded = true;
        t.residualScale = 0.22;
        t.logitsDivisor = 8;
        t.fusedQkv = t.fusedGateUp = true;
        c.model.ropeScaling.type = pb::RopeScalingType::Yarn;
        c.model.ropeScaling.factor = 4;
        c.model.ropeScaling.originalMaxPositions = 16;
        c.model.ropeScaling.mscale = 1;
        c.model.ropeScaling.mscaleAllDim = 1;
        c.train.mode = pb::TrainMode::Lora;
        c.train.lora.targets = {"qkv_proj", "gate_up_proj"};
        QCOMPARE(QString::fromStdString(pb::validateRunConfig(c).empty() ? "" : pb::validateRunConfig(c).front().field + ": " + pb::validateRunConfig(c).front().message), QString());
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("run.json"));
        pb::saveRunConfig(c, path);
        const pb::RunConfig back = pb::loadRunConfig(path);
        QCOMPARE(pb::toJson(back), pb::toJson(c));
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        QVERIFY(pb::configHash(c) != plainHash);
        QCOMPARE(back.model.traits.globalLayers.every, qint64(2));
        QCOMPARE(back.model.traits.noRopeLayers.layers, std::vector<int64_t> {1});
        QCOMPARE(back.model.traits.normPlacement, pb::NormPlacement::Sandwich);
        QCOMPARE(back.model.ropeScaling.type, pb::RopeScalingType::Yarn);
        QCOMPARE(back.model.ropeScaling.originalMaxPositions, qint64(16));
        // --set reaches every trait, nested selections included.
        const pb::RunConfig set = pb::loadRunConfig(QStringLiteral("preset:tiny"), {QStringLiteral("model.sliding_window=4"), QStringLiteral("model.global_layers.every=2"),
                                                                                   QStringLiteral("model.norm_placement=post"), QStringLiteral("model.final_softcap=30")});
        QCOMPARE(set.model.traits.slidingWindow, qint64(4));
        QCOMPARE(set.model.traits.globalLayers.every, qint64(2));
        QCOMPARE(set.model.traits.normPlacement, pb::NormPlacement::Post);
        QCOMPARE(set.model.traits.finalSoftcap, 30.0);
    }
    // Llama 4's traits: chunked attention, the L2 q/k norm, its form of the query temperature, the
    // router scaling the expert input; each round-trips and is written only when set, so Ministral 3's
    // temperature (offset 0, every layer) writes what it wrote before.
    void llama4TraitsRoundTrip()
    {
        const pb::RunConfig ministral = pb::presetConfig(QStringLiteral("ministral-3-8b"));
        const QJsonObject ministralModel = pb::toJson(ministral).value(QStringLiteral("model")).toObject();
        for (const char *key : {"query_temperature_offset", "query_temperature_no_rope", "query_temperature_fp32", "attention_chunk"})
            QVERIFY2(!ministralModel.contains(QLatin1String(key)), key);
        QFile presetFile(QStringLiteral(PB_SOURCE_DIR "/resources/presets/ministral-3-8b.json"));
        QVERIFY(presetFile.open(QIODevice::ReadOnly));
        QCOMPARE(ministralModel, QJsonDocument::fromJson(presetFile.readAll()).object().value(QStringLiteral("model")).toObject());

        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        const std::string plainHash = pb::configHash(c);
        pb::ModelTraits &t = c.model.traits;
        t.attentionChunk = 16;
        t.noRopeLayers.every = 2;
        t.queryTemperatureBeta = 0.1;
        t.queryTemperatureLength = 8;
        t.queryTemperatureOffset = 1;
        t.queryTemperatureNoRope = t.queryTemperatureFp32 = true;
        c.model.qkNorm = pb::QkNorm::L2;
        const QJsonObject model = pb::toJson(c).value(QStringLiteral("model")).toObject();
        QCOMPARE(model.value(QStringLiteral("attention_chunk")).toInt(), 16);
        QCOMPARE(model.value(QStringLiteral("qk_norm")).toString(), QStringLiteral("l2"));
        QCOMPARE(model.value(QStringLiteral("query_temperature_offset")).toInt(), 1);
        QVERIFY(model.value(QStringLiteral("query_temperature_no_rope")).toBool() && model.value(QStringLiteral("query_temperature_fp32")).toBool());
        const pb::RunConfig back = pb::runConfigFromJson(pb::toJson(c));
        QCOMPARE(pb::toJson(back), pb::toJson(c));
        QCOMPARE(back.model.traits.attentionChunk, qint64(16));
        QCOMPARE(back.model.qkNorm, pb::QkNorm::L2);
        QVERIFY(back.model.traits.queryTemperatureNoRope && back.model.traits.queryTemperatureFp32);
        QVERIFY(pb::configHash(back) != plainHash);
        QVERIFY(pb::validateRunConfig(c).empty());
        // The temperature reaches a NoPE layer's queries only from position length - offset on.
        QVERIFY(!t.usesQueryTemperature(0, 100));          // a rotary layer
        QVERIFY(t.usesQueryTemperature(1, 8) && !t.usesQueryTemperature(1, 7));
        t.queryTemperatureOffset = 0;
        t.queryTemperatureNoRope = false;
        QVERIFY(t.usesQueryTemperature(0, 9) && !t.usesQueryTemperature(0, 8));

        // The router's flag round-trips inside model.moe, written only when set.
        pb::RunConfig moe = pb::presetConfig(QStringLiteral("tiny-moe"));
        QVERIFY(!pb::toJson(moe).value(QStringLiteral("model")).toObject().value(QStringLiteral("moe")).toObject().contains(QStringLiteral("scale_expert_input")));
        moe.model.moe.scaleExpertInput = true;
        const auto issues = pb::validateRunConfig(moe); // on the softmax router
        QVERIFY(!issues.empty());
        QCOMPARE(QString::fromStdString(issues.front().field), QStringLiteral("model.moe.scale_expert_input"));
        moe.model.moe.scoring = pb::RouterScoring::Sigmoid;
        moe.model.moe.normalizeTopK = false;
        QVERIFY(pb::runConfigFromJson(pb::toJson(moe)).model.moe.scaleExpertInput);
    }
    // gpt-oss's fields: the preset is what `config import-hf` makes of the published config.json,
    // each field round-trips, and none is written for a model without it (existing hashes stay).
    void gptOssRoundTrip()
    {
        const pb::RunConfig preset = pb::presetConfig(QStringLiteral("gpt-oss-20b"));
        QJsonObject presetModel = pb::toJson(preset).value(QStringLiteral("model")).toObject();
        QFile presetFile(QStringLiteral(PB_SOURCE_DIR "/resources/presets/gpt-oss-20b.json"));
        QVERIFY(presetFile.open(QIODevice::ReadOnly));
        QCOMPARE(presetModel, QJsonDocument::fromJson(presetFile.readAll()).object().value(QStringLiteral("model")).toObject());
        QJsonObject imported = pb::toJson(pb::importHfConfig(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/gpt-oss-20b"))).value(QStringLiteral("model")).toObject();
        imported.remove(QStringLiteral("preset"));
        presetModel.remove(QStringLiteral("preset"));
        QCOMPARE(presetModel, imported);
        QVERIFY(pb::validateRunConfig(preset).empty());

        const QJsonObject moe = presetModel.value(QStringLiteral("moe")).toObject();
        for (const char *key : {"router_bias", "softmax_after_top_k", "stacked_experts", "interleaved_gate_up", "expert_bias"})
            QVERIFY2(moe.value(QLatin1String(key)).toBool(), key);
        QCOMPARE(moe.value(QStringLiteral("swiglu_limit")).toDouble(), 7.0);
        QVERIFY(!moe.contains(QStringLiteral("swiglu_alpha"))); // the default
        QVERIFY(presetModel.value(QStringLiteral("attention_sinks")).toBool());
        QCOMPARE(presetModel.value(QStringLiteral("checkpoint_quantization")).toString(), QStringLiteral("mxfp4"));

        pb::RunConfig c = preset;
        c.model.moe.swigluAlpha = 1.5;
        c.model.moe.interleavedGateUp = false;
        const pb::RunConfig back = pb::runConfigFromJson(pb::toJson(c));
        QCOMPARE(pb::toJson(back), pb::toJson(c));
        QCOMPARE(back.model.moe.swigluAlpha, 1.5);
        QVERIFY(!back.model.moe.interleavedGateUp && back.model.moe.stackedExperts && back.model.traits.attentionSinks);
        QVERIFY(pb::configHash(back) != pb::configHash(preset));

        // Models without them write none of the keys.
        for (const char *name : {"tiny-moe", "mixtral-8x7b", "tiny"}) {
            const QJsonObject model = pb::toJson(pb::presetConfig(QLatin1String(name))).value(QStringLiteral("model")).toObject();
            const QJsonObject plainMoe = model.value(QStringLiteral("moe")).toObject();
            for (const char *key : {"router_bias", "softmax_after_top_k", "stacked_experts", "interleaved_gate_up", "expert_bias", "swiglu_limit", "swiglu_alpha"})
                QVERIFY2(!plainMoe.contains(QLatin1String(key)), key);
            QVERIFY(!model.contains(QStringLiteral("attention_sinks")) && !model.contains(QStringLiteral("checkpoint_quantization")));
        }
    }
    void gptOssRefusals_data()
    {
        QTest::addColumn<QStringList>("sets");
        QTest::addColumn<QString>("field");
        QTest::newRow("LoRA on the stacked experts") << QStringList {QStringLiteral("train.mode=lora"), QStringLiteral("train.lora.targets=[q_proj,gate_proj]")} << "train.lora.targets";
        QTest::newRow("unknown checkpoint quantisation") << QStringList {QStringLiteral("model.checkpoint_quantization=nf4")} << "model.checkpoint_quantization";
        QTest::newRow("interleaved without stacking") << QStringList {QStringLiteral("model.moe.stacked_experts=false"), QStringLiteral("model.moe.expert_bias=false"),
                                                                      QStringLiteral("model.moe.swiglu_limit=0"), QStringLiteral("model.checkpoint_quantization=")}
                                                      << "model.moe.interleaved_gate_up";
        QTest::newRow("negative swiglu limit") << QStringList {QStringLiteral("model.moe.swiglu_limit=-1")} << "model.moe.swiglu_limit";
        QTest::newRow("zero swiglu alpha") << QStringList {QStringLiteral("model.moe.swiglu_alpha=0")} << "model.moe.swiglu_alpha";
        QTest::newRow("softmax after top-k on sigmoid scores") << QStringList {QStringLiteral("model.moe.scoring=sigmoid")} << "model.moe.softmax_after_top_k";
        QTest::newRow("sinks with a soft-cap") << QStringList {QStringLiteral("model.attention_softcap=30")} << "model.attention_sinks";
        QTest::newRow("stacked GeGLU experts") << QStringList {QStringLiteral("model.activation=geglu")} << "model.activation";
    }
    void gptOssRefusals()
    {
        QFETCH(QStringList, sets);
        QFETCH(QString, field);
        const QString message = errorOf([&] { pb::loadRunConfig(QStringLiteral("preset:gpt-oss-20b"), sets); });
        QVERIFY2(message.startsWith(field + QStringLiteral(": ")), qPrintable(message));
        // all-linear is PEFT's nn.Linear set: the attention only, no refusal.
        const pb::RunConfig lora = pb::loadRunConfig(QStringLiteral("preset:gpt-oss-20b"), {QStringLiteral("train.mode=lora"), QStringLiteral("train.lora.targets=all-linear")});
        QVERIFY(pb::countParameters(lora).lora > 0);
    }
    void modelTraitsRefusals_data()
    {
        QTest::addColumn<QStringList>("sets");
        QTest::addColumn<QString>("field");
        QTest::newRow("window layers without a window") << QStringList {QStringLiteral("model.global_layers.every=2")} << "model.global_layers.every";
        QTest::newRow("layer out of range") << QStringList {QStringLiteral("model.no_rope_layers.layers=[7]")} << "model.no_rope_layers.layers";
        QTest::newRow("odd rotary") << QStringList {QStringLiteral("model.partial_rotary=0.1")} << "model.partial_rotary";
        QTest::newRow("negative chunk") << QStringList {QStringLiteral("model.attention_chunk=-8")} << "model.attention_chunk";
        QTest::newRow("chunks and a window") << QStringList {QStringLiteral("model.attention_chunk=8"), QStringLiteral("model.sliding_window=4")} << "model.attention_chunk";
        QTest::newRow("temperature offset 2") << QStringList {QStringLiteral("model.query_temperature_offset=2")} << "model.query_temperature_offset";
        QTest::newRow("unknown q/k norm") << QStringList {QStringLiteral("model.qk_norm=l3")} << "model.qk_norm";
        QTest::newRow("rotary above 1") << QStringList {QStringLiteral("model.partial_rotary=1.5")} << "model.partial_rotary";
        QTest::newRow("negative softcap") << QStringList {QStringLiteral("model.final_softcap=-1")} << "model.final_softcap";
        QTest::newRow("zero divisor") << QStringList {QStringLiteral("model.logits_divisor=0")} << "model.logits_divisor";
        QTest::newRow("lora on a fused name of an unfused model") << QStringList {QStringLiteral("train.mode=lora"), QStringLiteral("train.lora.targets=qkv_proj")} << "train.lora.targets";
        QTest::newRow("lora on q_proj of a fused model") << QStringList {QStringLiteral("model.fused_qkv=true"), QStringLiteral("train.mode=lora"), QStringLiteral("train.lora.targets=q_proj")}
                                                         << "train.lora.targets";
        QTest::newRow("longrope factors of the wrong length")
            << QStringList {QStringLiteral("model.rope_scaling.type=longrope"), QStringLiteral("model.rope_scaling.factor=2"), QStringLiteral("model.rope_scaling.original_max_positions=64"),
                            QStringLiteral("model.rope_scaling.short_factor=[1,1]"), QStringLiteral("model.rope_scaling.long_factor=[1,1]")}
            << "model.rope_scaling.short_factor";
        QTest::newRow("longrope factor of zero")
            << QStringList {QStringLiteral("model.rope_scaling.type=longrope"), QStringLiteral("model.rope_scaling.factor=2"), QStringLiteral("model.rope_scaling.original_max_positions=64"),
                            QStringLiteral("model.rope_scaling.short_factor=[1,1,1,1,1,1,1,0]"), QStringLiteral("model.rope_scaling.long_factor=[1,1,1,1,1,1,1,1]")}
            << "model.rope_scaling.short_factor[7]";
    }
    void modelTraitsRefusals()
    {
        QFETCH(QStringList, sets);
        QFETCH(QString, field);
        const QString message = errorOf([&] { pb::loadRunConfig(QStringLiteral("preset:tiny"), sets); });
        QVERIFY2(message.startsWith(field + QStringLiteral(": ")), qPrintable(message));
    }
    void minimalFileTakesDefaults()
    {
        const pb::RunConfig c = pb::loadRunConfig(fixture("minimal.json"));
        const pb::RunConfig defaults;
        QCOMPARE(c.schemaVersion, pb::RunConfig::kSchemaVersion);
        QCOMPARE(c.model.hiddenSize, qint64(64));
        QCOMPARE(c.train.microBatch, qint64(2));
        QCOMPARE(c.train.precision, defaults.train.precision);
        QCOMPARE(c.train.optimizer.lr, defaults.train.optimizer.lr);
        QCOMPARE(c.seed, defaults.seed);
        QCOMPARE(c.data.kind, pb::DataKind::Synthetic);
        QVERIFY(!c.job.deadlineHours.has_value());
        const pb::RunConfig partial = pb::loadRunConfig(fixture("schema-v1-partial.json"));
        QCOMPARE(partial.name, std::string("written-by-0.1"));
        QCOMPARE(pb::countParameters(partial).total, pb::countParameters(c).total);
    }
    void refusals_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QStringList>("expected"); // every part must appear in the message
        QTest::newRow("newer schema") << fixture("newer-schema.json") << QStringList {"schema_version", "newer PilotBench", "version 2"};
        QTest::newRow("truncated") << fixture("truncated.json") << QStringList {"truncated.json", "not valid JSON", "truncated?"};
        QTest::newRow("malformed") << fixture("malformed.json") << QStringList {"malformed.json", "line 2, column", "not valid JSON"};
        QTest::newRow("wrong type") << fixture("wrong-type.json") << QStringList {"train.seq_len", "expected an integer", "the string \"2048\""};
        QTest::newRow("unknown key") << fixture("unknown-key.json") << QStringList {"model.hiden_size", "unknown key", "hidden_size"};
        QTest::newRow("empty") << fixture("empty.json") << QStringList {"empty.json", "empty"};
        QTest::newRow("array") << fixture("array.json") << QStringList {"array.json", "JSON object"};
        QTest::newRow("missing") << fixture("no-such-file.json") << QStringList {"no-such-file.json", "no such file"};
        QTest::newRow("folder") << QStringLiteral(PB_TEST_DATA_DIR "/configs") << QStringList {"configs", "folder"};
        QTest::newRow("broken rule") << fixture("invalid-rules.json") << QStringList {"model.attention_heads", "must divide model.hidden_size", "invalid-rules.json"};
        QTest::newRow("unknown preset") << QStringLiteral("preset:gpt-5") << QStringList {"preset:gpt-5", "unknown preset", "tiny"};
    }
    void refusals()
    {
        QFETCH(QString, file);
        QFETCH(QStringList, expected);
        const QString message = errorOf([&] { pb::loadRunConfig(file); });
        for (const QString &part : expected)
            QVERIFY2(message.contains(part), qPrintable(message + QStringLiteral("   (missing: ") + part + QLatin1Char(')')));
    }
    void wrongTypes_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("expected");
        QTest::newRow("bool as string") << R"({"train": {"recompute": "yes"}})" << "train.recompute" << "expected true or false";
        QTest::newRow("fraction as int") << R"({"model": {"layers": 2.5}})" << "model.layers" << "expected an integer";
        QTest::newRow("number as string") << R"({"train": {"lr": "1e-4"}})" << "train.lr" << "expected a number";
        QTest::newRow("string as number") << R"({"model": {"revision": 7}})" << "model.revision" << "expected a string";
        QTest::newRow("list as string") << R"({"train": {"lora": {"targets": "q_proj"}}})" << "train.lora.targets" << "expected an array of strings";
        QTest::newRow("list item") << R"({"train": {"lora": {"targets": ["q_proj", 3]}}})" << "train.lora.targets[1]" << "expected a string";
        QTest::newRow("object as number") << R"({"train": 5})" << "train" << "expected an object";
        QTest::newRow("unknown enum") << R"({"train": {"optimizer": "lion"}})" << "train.optimizer" << "adamw, adam, sgd, adagrad, rmsprop, adamw-8bit, adafactor";
        QTest::newRow("unknown precision") << R"({"train": {"precision": "fp8"}})" << "train.precision" << "unknown value 'fp8'";
        QTest::newRow("too large") << R"({"model": {"hidden_size": 1e30}})" << "model.hidden_size" << "too large";
        QTest::newRow("negative seed") << R"({"seed": -1})" << "seed" << "at least 0";
        QTest::newRow("null size") << R"({"model": {"layers": null}})" << "model.layers" << "got null";
        QTest::newRow("schema too old") << R"({"schema_version": 0})" << "schema_version" << "at least 1";
        QTest::newRow("top-level typo") << R"({"sede": 3})" << "sede" << "unknown key";
        QTest::newRow("rope scaling as a string") << R"({"model": {"rope_scaling": "llama3"}})" << "model.rope_scaling" << "expected an object";
        QTest::newRow("unknown rope scaling") << R"({"model": {"rope_scaling": {"type": "dynamic"}}})" << "model.rope_scaling.type" << "unknown value 'dynamic' (expected one of: none, llama3, linear, yarn, longrope)";
        QTest::newRow("unknown norm placement") << R"({"model": {"norm_placement": "middle"}})" << "model.norm_placement" << "unknown value 'middle' (expected one of: pre, post, sandwich)";
        QTest::newRow("layer selection typo") << R"({"model": {"global_layers": {"evry": 6}}})" << "model.global_layers.evry" << "unknown key";
        QTest::newRow("rope scaling typo") << R"({"model": {"rope_scaling": {"type": "llama3", "original_max_position_embeddings": 8192}}})" << "model.rope_scaling.original_max_position_embeddings" << "unknown key";
    }
    void wrongTypes()
    {
        QFETCH(QString, json);
        QFETCH(QString, field);
        QFETCH(QString, expected);
        const QJsonObject object = QJsonDocument::fromJson(json.toUtf8()).object();
        QVERIFY(!object.isEmpty());
        try {
            pb::parseRunConfigJson(object);
            QFAIL("expected an error");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), field);
            QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
        }
    }
    void overrides_data()
    {
        QTest::addColumn<QStringList>("sets");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QJsonValue>("value");
        QTest::newRow("integer") << QStringList {"train.seq_len=128"} << "train.seq_len" << QJsonValue(128);
        QTest::newRow("enum") << QStringList {"train.mode=lora", "train.lora.rank=4"} << "train.lora.rank" << QJsonValue(4);
        QTest::newRow("bool") << QStringList {"train.recompute=true"} << "train.recompute" << QJsonValue(true);
        QTest::newRow("later wins") << QStringList {"seed=1", "seed=2"} << "seed" << QJsonValue(2);
        QTest::newRow("string stays text") << QStringList {"model.revision=1234"} << "model.revision" << QJsonValue(QStringLiteral("1234"));
        QTest::newRow("json array") << QStringList {R"(train.lora.targets=["q_proj","v_proj"])"} << "train.lora.targets" << QJsonValue(QJsonArray {"q_proj", "v_proj"});
        QTest::newRow("comma list") << QStringList {"train.lora.targets=up_proj, down_proj"} << "train.lora.targets" << QJsonValue(QJsonArray {"up_proj", "down_proj"});
        QTest::newRow("optional") << QStringList {"job.deadline_hours=48"} << "job.deadline_hours" << QJsonValue(48);
        QTest::newRow("value with =") << QStringList {"name=a=b"} << "name" << QJsonValue(QStringLiteral("a=b"));
    }
    void overrides()
    {
        QFETCH(QStringList, sets);
        QFETCH(QString, path);
        QFETCH(QJsonValue, value);
        const pb::RunConfig c = pb::loadRunConfig(QStringLiteral("preset:tiny"), sets);
        QJsonValue node = pb::toJson(c);
        for (const QString &part : path.split(QLatin1Char('.')))
            node = node.toObject().value(part);
        QCOMPARE(node, value);
    }
    void badOverrides_data()
    {
        QTest::addColumn<QString>("set");
        QTest::addColumn<QString>("expected");
        QTest::newRow("unknown path") << "train.seqlen=5" << "train.seqlen";
        QTest::newRow("unknown top") << "modle.layers=5" << "unknown path";
        QTest::newRow("below a scalar") << "seed.x=1" << "not an object";
        QTest::newRow("no value sign") << "train.seq_len" << "PATH=VALUE";
        QTest::newRow("not a number") << "train.seq_len=long" << "train.seq_len: expected an integer, got the string \"long\"";
        QTest::newRow("breaks a rule") << "train.seq_len=100000" << "train.seq_len: must not exceed model.max_positions";
        QTest::newRow("overflow") << "train.micro_batch=9007199254740992" << "overflow";
    }
    void badOverrides()
    {
        QFETCH(QString, set);
        QFETCH(QString, expected);
        const QString message = errorOf([&] { pb::loadRunConfig(QStringLiteral("preset:tiny"), {set}); });
        QVERIFY2(message.contains(expected), qPrintable(message));
    }
    void saveIsAtomic()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("missing-folder/run.json"));
        bool threw = false;
        try {
            pb::saveRunConfig(pb::RunConfig {}, path);
        } catch (const pb::PilotBenchError &e) {
            threw = QString::fromUtf8(e.what()).contains(path);
        }
        QVERIFY(threw);
        QVERIFY(!QFile::exists(path));
    }
};

QTEST_GUILESS_MAIN(TestRunConfigJson)
#include "tst_runconfig_json.moc"
