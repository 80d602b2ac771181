// Hugging Face config.json import: exact published counts, revision, weights folder, refusals.
#include "config/HfHubCache.h"
#include "config/HfImport.h"
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "util/Errors.h"

#include <QFile>
#include <QJsonArray>
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

const char *const kLlama32 = "hub/models--meta-llama--Llama-3.2-1B/snapshots/0123456789abcdef0123456789abcdef01234567";
const QString kMainCommit = QStringLiteral("4e20de362430cd3b72f300e6b0f18e50e7166e08");
const QString kOldCommit = QStringLiteral("221e3535e1ac4840bdf061a12b634139c84e144c");

bool writeFile(const QString &path, const QByteArray &bytes)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

// The hub cache as huggingface_hub leaves it after two downloads of config.json: main (a symlink
// into blobs/, as the Hub client writes it) and tag v1.0 at an older commit (a plain file).
void makeHubCache(const QString &root)
{
    QFile fixture(hf(kLlama32) + QStringLiteral("/config.json"));
    QVERIFY(fixture.open(QIODevice::ReadOnly));
    const QByteArray config = fixture.readAll();
    const QString repo = root + QStringLiteral("/models--meta-llama--Llama-3.2-1B");
    QVERIFY(writeFile(repo + QStringLiteral("/refs/main"), kMainCommit.toUtf8()));
    QVERIFY(writeFile(repo + QStringLiteral("/blobs/a1b2c3"), config));
    QVERIFY(QDir().mkpath(repo + QStringLiteral("/snapshots/") + kMainCommit));
    QVERIFY(QFile::link(repo + QStringLiteral("/blobs/a1b2c3"), repo + QStringLiteral("/snapshots/") + kMainCommit + QStringLiteral("/config.json")));
    QVERIFY(writeFile(repo + QStringLiteral("/refs/v1.0"), kOldCommit.toUtf8() + "\n"));
    QJsonObject older = QJsonDocument::fromJson(config).object();
    older.insert(QStringLiteral("num_hidden_layers"), 8);
    QVERIFY(writeFile(repo + QStringLiteral("/snapshots/") + kOldCommit + QStringLiteral("/config.json"), QJsonDocument(older).toJson()));
}

// Sets the Hugging Face cache variables for one test and puts the old values back.
class HubEnvironment final {
public:
    HubEnvironment()
    {
        for (const char *name : kNames)
            m_saved.emplace_back(name, qgetenv(name), qEnvironmentVariableIsSet(name));
        for (const char *name : kNames)
            qunsetenv(name);
    }
    ~HubEnvironment()
    {
        for (const auto &[name, value, set] : m_saved) {
            if (set)
                qputenv(name, value);
            else
                qunsetenv(name);
        }
    }
    void set(const char *name, const QString &value) { qputenv(name, value.toLocal8Bit()); }

private:
    static constexpr const char *kNames[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"};
    std::vector<std::tuple<const char *, QByteArray, bool>> m_saved;
};

// The fixture `name` with `remove` taken out and `key` set to `value` (undefined: not set).
QJsonObject edited(const char *name, const QString &remove, const QString &key, const QJsonValue &value)
{
    QJsonObject json = fixtureJson(name);
    if (!remove.isEmpty())
        json.remove(remove);
    if (!key.isEmpty() && !value.isUndefined())
        json.insert(key, value);
    return json;
}

bool hasParameter(const pb::RunConfig &c, const std::string &name, std::vector<int64_t> shape)
{
    const auto table = pb::parameterTable(c);
    return std::any_of(table.begin(), table.end(), [&](const pb::ParameterInfo &p) { return p.name == name && p.shape == shape; });
}

QString errorOf(const QString &path)
{
    try {
        pb::importHfConfig(path);
    } catch (const pb::InvalidInputError &e) {
        return QString::fromUtf8(e.what());
    }
    return QStringLiteral("<no error>");
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
        QCOMPARE(m.ropeScaling.type, expected.ropeScaling.type);
        QCOMPARE(m.ropeScaling.factor, expected.ropeScaling.factor);
        QCOMPARE(m.ropeScaling.lowFreqFactor, expected.ropeScaling.lowFreqFactor);
        QCOMPARE(m.ropeScaling.highFreqFactor, expected.ropeScaling.highFreqFactor);
        QCOMPARE(m.ropeScaling.originalMaxPositions, expected.ropeScaling.originalMaxPositions);
        QCOMPARE(m.normEps, expected.normEps);
        QCOMPARE(m.activation, pb::ActivationKind::SwiGlu);
        QVERIFY(c.train.seqLen <= m.maxPositions);
    }
    void llama32RopeScalingRoundTrips()
    {
        // Llama-3.2-1B's config.json as published: rope_scaling llama3, factor 32, low 1, high 4, 8192.
        const pb::RunConfig c = pb::importHfConfig(hf(kLlama32));
        const pb::RopeScaling &s = c.model.ropeScaling;
        QCOMPARE(s.type, pb::RopeScalingType::Llama3);
        QCOMPARE(s.factor, 32.0);
        QCOMPARE(s.lowFreqFactor, 1.0);
        QCOMPARE(s.highFreqFactor, 4.0);
        QCOMPARE(s.originalMaxPositions, qint64(8192));
        const QJsonObject written = pb::toJson(c).value(QStringLiteral("model")).toObject().value(QStringLiteral("rope_scaling")).toObject();
        QCOMPARE(written.value(QStringLiteral("type")).toString(), QStringLiteral("llama3"));
        QCOMPARE(written.value(QStringLiteral("original_max_positions")).toInteger(), qint64(8192));
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("llama.json"));
        pb::saveRunConfig(c, path);
        const pb::RunConfig back = pb::loadRunConfig(path);
        QCOMPARE(back.model.ropeScaling.type, pb::RopeScalingType::Llama3);
        QCOMPARE(back.model.ropeScaling.factor, 32.0);
        QCOMPARE(back.model.ropeScaling.originalMaxPositions, qint64(8192));
        QCOMPARE(pb::configHash(back), pb::configHash(c));
        // The preset is the same model, scaling included.
        const pb::RunConfig preset = pb::presetConfig(QStringLiteral("llama-3.2-1b"));
        QCOMPARE(pb::toJson(preset).value(QStringLiteral("model")).toObject().value(QStringLiteral("rope_scaling")).toObject(), written);
    }
    void ropeScalingForms_data()
    {
        QTest::addColumn<QJsonValue>("scaling"); // undefined: the key is absent
        QTest::addColumn<int>("type");
        QTest::addColumn<double>("factor");
        const auto llama3 = [](const char *typeKey) {
            return QJsonObject {{QLatin1String(typeKey), "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
        };
        QTest::newRow("absent") << QJsonValue(QJsonValue::Undefined) << int(pb::RopeScalingType::None) << 0.0;
        QTest::newRow("null") << QJsonValue(QJsonValue::Null) << int(pb::RopeScalingType::None) << 0.0;
        QTest::newRow("default") << QJsonValue(QJsonObject {{"rope_type", "default"}}) << int(pb::RopeScalingType::None) << 0.0;
        QTest::newRow("llama3") << QJsonValue(llama3("rope_type")) << int(pb::RopeScalingType::Llama3) << 8.0;
        QTest::newRow("llama3, legacy type key") << QJsonValue(llama3("type")) << int(pb::RopeScalingType::Llama3) << 8.0;
        QTest::newRow("linear") << QJsonValue(QJsonObject {{"rope_type", "linear"}, {"factor", 4.0}}) << int(pb::RopeScalingType::Linear) << 4.0;
        QTest::newRow("linear, legacy type key") << QJsonValue(QJsonObject {{"type", "linear"}, {"factor", 2}}) << int(pb::RopeScalingType::Linear) << 2.0;
    }
    void ropeScalingForms()
    {
        QFETCH(QJsonValue, scaling);
        QFETCH(int, type);
        QFETCH(double, factor);
        QJsonObject json = fixtureJson("llama-3.1-8b");
        json.remove(QStringLiteral("rope_scaling"));
        if (!scaling.isUndefined())
            json.insert(QStringLiteral("rope_scaling"), scaling);
        QTemporaryDir dir;
        writeJson(dir.filePath(QStringLiteral("config.json")), json);
        const pb::RunConfig c = pb::importHfConfig(dir.path());
        QCOMPARE(int(c.model.ropeScaling.type), type);
        QCOMPARE(c.model.ropeScaling.factor, factor);
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
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
        // A Llama config called gemma4_text: its legacy rotary key is refused by name, not misread.
        QTest::newRow("gemma4 with a llama rotary") << "" << "model_type" << QJsonValue(QStringLiteral("gemma4_text")) << "rope_theta: Gemma 4 reads its rotary from rope_parameters (one entry per layer type) only";
        QTest::newRow("supported types listed") << "" << "model_type" << QJsonValue(QStringLiteral("glm4_moe_lite"))
                                                << "(supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, olmo2, olmo3, phi3, glm4, smollm3, granite, ministral3, gemma3, gemma4, gemma4_text, mistral3, mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v3, kimi_k2, glm4_moe, llama4, llama4_text, gpt_oss, qwen3_next, qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text)";
        QTest::newRow("dense type with num_local_experts") << "" << "num_local_experts" << QJsonValue(8)
                                                           << "num_local_experts: got the number 8, but model_type 'llama' is a dense model without experts";
        QTest::newRow("dense type with num_experts") << "" << "num_experts" << QJsonValue(4) << "num_experts: got the number 4, but model_type 'llama' is a dense model";
        QTest::newRow("string size") << "" << "hidden_size" << QJsonValue(QStringLiteral("4096")) << "hidden_size: expected a positive integer";
        QTest::newRow("zero heads") << "" << "num_attention_heads" << QJsonValue(0) << "num_attention_heads: expected a positive integer";
        // Refused before a per-layer list is built (the fuzzer found an olmo3 import spending seconds on one).
        QTest::newRow("layers beyond the limit") << "" << "num_hidden_layers" << QJsonValue(551500000) << "num_hidden_layers: at most 10000 layers are supported, got 551500000";
        QTest::newRow("activation") << "" << "hidden_act" << QJsonValue(QStringLiteral("relu")) << "unsupported activation 'relu'";
        QTest::newRow("attention bias not a bool") << "" << "attention_bias" << QJsonValue(QStringLiteral("yes")) << "attention_bias: expected true or false";
        QTest::newRow("mlp bias not a bool") << "" << "mlp_bias" << QJsonValue(1) << "mlp_bias: expected true or false";
        QTest::newRow("kv heads rule") << "" << "num_key_value_heads" << QJsonValue(7) << "model.kv_heads: must divide model.attention_heads";
        // rope_scaling: refused rather than dropped, since it sets every position the model sees.
        const QJsonObject llama3 {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
        const auto with = [&](const char *key, const QJsonValue &v) { QJsonObject o = llama3; o.insert(QLatin1String(key), v); return QJsonValue(o); };
        const auto without = [&](const char *key) { QJsonObject o = llama3; o.remove(QLatin1String(key)); return QJsonValue(o); };
        QTest::newRow("rope scaling string") << "" << "rope_scaling" << QJsonValue(QStringLiteral("llama3")) << "rope_scaling: expected an object with rope_type, or null, got the string \"llama3\"";
        QTest::newRow("rope scaling array") << "" << "rope_scaling" << QJsonValue(QJsonArray {8.0, 1.0, 4.0}) << "rope_scaling: expected an object with rope_type, or null, got an array";
        QTest::newRow("rope scaling number") << "" << "rope_scaling" << QJsonValue(8.0) << "rope_scaling: expected an object";
        QTest::newRow("rope su") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "su"}, {"factor", 4.0}}) << "rope_scaling.rope_type: 'su' is not supported (supported: default, linear, llama3, yarn, longrope)";
        QTest::newRow("yarn factor missing") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "yarn"}}) << "rope_scaling.factor: required field is missing";
        QTest::newRow("longrope factors missing") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "longrope"}, {"short_factor", QJsonArray {1.0}}}) << "rope_scaling.long_factor: required field is missing";
        QTest::newRow("rope dynamic, legacy key") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"type", "dynamic"}, {"factor", 2.0}}) << "rope_scaling.type: 'dynamic' is not supported";
        QTest::newRow("rope type missing") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"factor", 8.0}}) << "rope_scaling.rope_type: required field is missing";
        QTest::newRow("rope type not a string") << "" << "rope_scaling" << with("rope_type", 3) << "rope_scaling.rope_type: expected a string";
        QTest::newRow("llama3 factor missing") << "" << "rope_scaling" << without("factor") << "rope_scaling.factor: required field is missing";
        QTest::newRow("llama3 low missing") << "" << "rope_scaling" << without("low_freq_factor") << "rope_scaling.low_freq_factor: required field is missing";
        QTest::newRow("llama3 high as string") << "" << "rope_scaling" << with("high_freq_factor", QStringLiteral("4")) << "rope_scaling.high_freq_factor: expected a positive number";
        QTest::newRow("llama3 original missing") << "" << "rope_scaling" << without("original_max_position_embeddings") << "rope_scaling.original_max_position_embeddings: required field is missing";
        QTest::newRow("llama3 original fractional") << "" << "rope_scaling" << with("original_max_position_embeddings", 8192.5) << "rope_scaling.original_max_position_embeddings: expected a positive integer";
        QTest::newRow("llama3 high below low") << "" << "rope_scaling" << with("high_freq_factor", 0.5) << "model.rope_scaling.high_freq_factor: must not be below model.rope_scaling.low_freq_factor";
        QTest::newRow("linear factor below 1") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "linear"}, {"factor", 0.5}}) << "model.rope_scaling.factor: must lie in [1, inf)";
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
    void repositoryIdFromHubCache()
    {
        QTemporaryDir cache;
        makeHubCache(cache.path());
        HubEnvironment env;
        env.set("HF_HUB_CACHE", cache.path());
        const pb::RunConfig c = pb::importHfConfig(QStringLiteral("meta-llama/Llama-3.2-1B"));
        QCOMPARE(QString::fromStdString(c.model.revision), kMainCommit); // refs/main, recorded like a folder's
        QCOMPARE(c.name, std::string("meta-llama/Llama-3.2-1B"));
        QCOMPARE(c.model.layers, qint64(16));
        QCOMPARE(c.model.ropeScaling.type, pb::RopeScalingType::Llama3);
        QCOMPARE(pb::countParameters(c).total, qint64(1235814400));
        // A tag through its ref, a commit by itself.
        const pb::RunConfig tagged = pb::importHfConfig(QStringLiteral("meta-llama/Llama-3.2-1B@v1.0"));
        QCOMPARE(QString::fromStdString(tagged.model.revision), kOldCommit);
        QCOMPARE(tagged.model.layers, qint64(8));
        QCOMPARE(QString::fromStdString(pb::importHfConfig(QStringLiteral("meta-llama/Llama-3.2-1B@") + kOldCommit).model.revision), kOldCommit);
        // An existing path is always a path, even one shaped like a repository id.
        const QString workingDir = QDir::currentPath();
        QVERIFY(QDir::setCurrent(cache.path()));
        QVERIFY(QDir().mkpath(QStringLiteral("meta-llama/Llama-3.2-1B")));
        writeJson(QStringLiteral("meta-llama/Llama-3.2-1B/config.json"), fixtureJson("qwen2.5-7b"));
        const std::string family = pb::importHfConfig(QStringLiteral("meta-llama/Llama-3.2-1B")).model.family;
        QDir::setCurrent(workingDir);
        QCOMPARE(family, std::string("qwen2"));
    }
    void repositoryIdNotCached()
    {
        QTemporaryDir cache;
        HubEnvironment env;
        env.set("HF_HUB_CACHE", cache.path());
        QString message = errorOf(QStringLiteral("meta-llama/Llama-3.2-1B"));
        for (const QString &part : {QStringLiteral("meta-llama/Llama-3.2-1B: "), QStringLiteral("not in the Hugging Face cache"),
                                    cache.path() + QStringLiteral("/models--meta-llama--Llama-3.2-1B"), QStringLiteral("$HF_HUB_CACHE")})
            QVERIFY2(message.contains(part), qPrintable(message + QStringLiteral("   (missing: ") + part + QLatin1Char(')')));
        // Cached, but not at this revision: the message lists what is there.
        makeHubCache(cache.path());
        message = errorOf(QStringLiteral("meta-llama/Llama-3.2-1B@v2.0"));
        for (const QString &part : {QStringLiteral("meta-llama/Llama-3.2-1B@v2.0: "), QStringLiteral("revision 'v2.0' is not in the Hugging Face cache"),
                                    QStringLiteral("refs/v2.0"), kMainCommit, kOldCommit})
            QVERIFY2(message.contains(part), qPrintable(message + QStringLiteral("   (missing: ") + part + QLatin1Char(')')));
        // A ref whose snapshot was deleted.
        QVERIFY(QDir(cache.filePath(QStringLiteral("models--meta-llama--Llama-3.2-1B/snapshots/") + kOldCommit)).removeRecursively());
        message = errorOf(QStringLiteral("meta-llama/Llama-3.2-1B@v1.0"));
        QVERIFY2(message.contains(QStringLiteral("revision 'v1.0' is commit ") + kOldCommit), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("snapshots/") + kOldCommit + QStringLiteral("/config.json")), qPrintable(message));
        // Not a repository id: the plain missing-path message.
        QVERIFY2(errorOf(cache.filePath(QStringLiteral("none"))).contains(QLatin1String("no such file or folder")), "");
    }
    void repositoryIds_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("valid");
        QTest::addColumn<QString>("revision");
        QTest::newRow("owner/name") << "meta-llama/Llama-3.2-1B" << true << "";
        QTest::newRow("with revision") << "Qwen/Qwen2.5-7B@main" << true << "main";
        QTest::newRow("pull request ref") << "mistralai/Mistral-7B-v0.3@refs/pr/1" << true << "refs/pr/1";
        QTest::newRow("name only") << "gpt2" << false << "";
        QTest::newRow("absolute path") << "/models/llama" << false << "";
        QTest::newRow("relative path") << "./llama/config" << false << "";
        QTest::newRow("three parts") << "a/b/c" << false << "";
        QTest::newRow("revision leaves the folder") << "a/b@../../etc" << false << "";
        QTest::newRow("empty revision") << "a/b@" << false << "";
        QTest::newRow("space") << "meta llama/x" << false << "";
    }
    void repositoryIds()
    {
        QFETCH(QString, text);
        QFETCH(bool, valid);
        QFETCH(QString, revision);
        const auto repo = pb::parseHfRepoId(text);
        QCOMPARE(repo.has_value(), valid);
        if (repo)
            QCOMPARE(repo->revision, revision);
    }
    void hubCacheFolderAsHuggingFaceHub()
    {
        HubEnvironment env;
        env.set("HOME", QStringLiteral("/home/u"));
        QCOMPARE(pb::hfHubCacheDir().path, QStringLiteral("/home/u/.cache/huggingface/hub"));
        env.set("XDG_CACHE_HOME", QStringLiteral("/xdg"));
        QCOMPARE(pb::hfHubCacheDir().path, QStringLiteral("/xdg/huggingface/hub"));
        env.set("HF_HOME", QStringLiteral("~/hf"));
        QCOMPARE(pb::hfHubCacheDir().path, QStringLiteral("/home/u/hf/hub"));
        env.set("HUGGINGFACE_HUB_CACHE", QStringLiteral("/legacy"));
        QCOMPARE(pb::hfHubCacheDir().path, QStringLiteral("/legacy"));
        env.set("HF_HUB_CACHE", QStringLiteral("/hub"));
        QCOMPARE(pb::hfHubCacheDir().path, QStringLiteral("/hub"));
        QCOMPARE(pb::hfHubCacheDir().source, QStringLiteral("$HF_HUB_CACHE"));
    }
    // Mixture-of-experts configs as published: the totals of their model cards (safetensors
    // parameter counts), the active count of one token, the expert fields and the parameter names.
    void moePublishedTotals_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<qint64>("active");
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("preset"); // the preset with the same shape; "" when none ships
        QTest::addColumn<int>("qkNorm");
        QTest::addColumn<bool>("attentionBias");
        QTest::addColumn<qint64>("intermediate");
        QTest::addColumn<qint64>("experts");
        QTest::addColumn<qint64>("perToken");
        QTest::addColumn<qint64>("expertSize");
        QTest::addColumn<qint64>("sharedSize");
        QTest::addColumn<bool>("sharedGate");
        QTest::addColumn<bool>("normalizeTopK");
        QTest::addColumn<double>("auxLoss");
        QTest::addColumn<QString>("parameter"); // one name the parameter table must hold
        QTest::addColumn<QList<qint64>>("parameterShape");
        using Shape = QList<qint64>;
        QTest::newRow("Mixtral-8x7B-v0.1") << hf("mixtral-8x7b-v0.1") << qint64(46702792704) << qint64(12879925248) << "mixtral" << "mixtral-8x7b"
                                           << int(pb::QkNorm::None) << false << qint64(14336) << qint64(8) << qint64(2) << qint64(14336) << qint64(0) << false << true
                                           << 0.02 << "model.layers.31.block_sparse_moe.experts.7.w2.weight" << Shape {4096, 14336};
        QTest::newRow("Qwen3-30B-A3B") << hf("qwen3-30b-a3b") << qint64(30532122624) << qint64(3353032704) << "qwen3_moe" << "qwen3-30b-a3b"
                                       << int(pb::QkNorm::Head) << false << qint64(6144) << qint64(128) << qint64(8) << qint64(768) << qint64(0) << false << true
                                       << 0.001 << "model.layers.0.self_attn.k_norm.weight" << Shape {128};
        QTest::newRow("OLMoE-1B-7B-0924") << hf("olmoe-1b-7b-0924") << qint64(6919161856) << qint64(1282017280) << "olmoe" << "olmoe-1b-7b"
                                          << int(pb::QkNorm::Full) << false << qint64(1024) << qint64(64) << qint64(8) << qint64(1024) << qint64(0) << false << false
                                          << 0.01 << "model.layers.15.self_attn.q_norm.weight" << Shape {2048};
        // Active: not a published figure; the architecture's own count (attention, router, shared
        // expert, embeddings and 4 of 60 experts).
        QTest::newRow("Qwen1.5-MoE-A2.7B") << hf("qwen1.5-moe-a2.7b") << qint64(14315784192) << qint64(2689173504) << "qwen2_moe" << ""
                                           << int(pb::QkNorm::None) << true << qint64(5632) << qint64(60) << qint64(4) << qint64(1408) << qint64(5632) << true << false
                                           << 0.001 << "model.layers.23.mlp.shared_expert_gate.weight" << Shape {1, 2048};
    }
    void moePublishedTotals()
    {
        QFETCH(QString, path);
        QFETCH(qint64, total);
        QFETCH(qint64, active);
        QFETCH(QString, family);
        QFETCH(QString, preset);
        QFETCH(int, qkNorm);
        QFETCH(bool, attentionBias);
        QFETCH(qint64, intermediate);
        QFETCH(qint64, experts);
        QFETCH(qint64, perToken);
        QFETCH(qint64, expertSize);
        QFETCH(qint64, sharedSize);
        QFETCH(bool, sharedGate);
        QFETCH(bool, normalizeTopK);
        QFETCH(double, auxLoss);
        QFETCH(QString, parameter);
        QFETCH(QList<qint64>, parameterShape);
        const pb::RunConfig c = pb::importHfConfig(path);
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, total);
        QCOMPARE(counts.active, active);
        const pb::ModelShape &m = c.model;
        QCOMPARE(QString::fromStdString(m.family), family);
        QCOMPARE(int(m.qkNorm), qkNorm);
        QCOMPARE(m.attentionBias, attentionBias);
        QCOMPARE(m.intermediateSize, intermediate);
        QCOMPARE(m.moe.experts, experts);
        QCOMPARE(m.moe.expertsPerToken, perToken);
        QCOMPARE(m.moe.expertIntermediateSize, expertSize);
        QCOMPARE(m.moe.sharedExpertIntermediateSize, sharedSize);
        QCOMPARE(m.moe.sharedExpertGate, sharedGate);
        QCOMPARE(m.moe.normalizeTopK, normalizeTopK);
        QCOMPARE(m.moe.sparseStep, qint64(1));
        QVERIFY(m.moe.denseLayers.empty());
        QCOMPARE(m.moe.auxLossWeight, auxLoss);
        QCOMPARE(m.moe.routerJitter, 0.0);
        QVERIFY2(hasParameter(c, parameter.toStdString(), std::vector<int64_t>(parameterShape.begin(), parameterShape.end())), qPrintable(parameter));
        QVERIFY(c.train.seqLen <= m.maxPositions);
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
        if (preset.isEmpty())
            return;
        // Same model as the shipped preset, experts included: every field of the model's JSON form
        // but where it came from.
        auto shape = [](const pb::RunConfig &config) {
            QJsonObject o = pb::toJson(config).value(QStringLiteral("model")).toObject();
            for (const char *key : {"preset", "revision", "weights_path"})
                o.remove(QLatin1String(key));
            return o;
        };
        QCOMPARE(shape(c), shape(pb::presetConfig(preset)));
        QCOMPARE(counts.total, pb::countParameters(pb::presetConfig(preset)).total);
    }
    // Optional keys left out take the defaults of the type's Transformers config class.
    void moeDefaults()
    {
        QJsonObject json = fixtureJson("mixtral-8x7b-v0.1");
        for (const char *key : {"router_aux_loss_coef", "router_jitter_noise", "rope_theta", "rms_norm_eps", "sliding_window", "output_router_logits"})
            json.remove(QLatin1String(key));
        pb::ModelShape m = pb::hfModelShape(json, "config.json");
        QCOMPARE(m.moe.auxLossWeight, 0.001); // MixtralConfig
        QCOMPARE(m.moe.routerJitter, 0.0);
        QCOMPARE(m.moe.normalizeTopK, true);
        QCOMPARE(m.ropeTheta, 1e6);
        QCOMPARE(m.normEps, 1e-5);
        json.insert(QStringLiteral("router_jitter_noise"), 0.01);
        QCOMPARE(pb::hfModelShape(json, "config.json").moe.routerJitter, 0.01);

        json = fixtureJson("olmoe-1b-7b-0924");
        for (const char *key : {"router_aux_loss_coef", "norm_topk_prob", "rms_norm_eps", "num_key_value_heads", "clip_qkv"})
            json.remove(QLatin1String(key));
        m = pb::hfModelShape(json, "config.json");
        QCOMPARE(m.moe.auxLossWeight, 0.01); // OlmoeConfig
        QCOMPARE(m.moe.normalizeTopK, false);
        QCOMPARE(m.normEps, 1e-5);
        QCOMPARE(m.kvHeads, qint64(16)); // the attention heads, as OlmoeConfig

        json = fixtureJson("qwen3-30b-a3b");
        for (const char *key : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef", "head_dim", "use_sliding_window"})
            json.remove(QLatin1String(key));
        m = pb::hfModelShape(json, "config.json");
        QCOMPARE(m.moe.normalizeTopK, false); // Qwen3MoeConfig
        QCOMPARE(m.moe.sparseStep, qint64(1));
        QVERIFY(m.moe.denseLayers.empty());
        QCOMPARE(m.moe.auxLossWeight, 0.001);
        QCOMPARE(m.effectiveHeadDim(), qint64(64)); // hidden_size / num_attention_heads
        QCOMPARE(m.qkNorm, pb::QkNorm::Head);

        json = fixtureJson("qwen1.5-moe-a2.7b");
        QCOMPARE(pb::hfModelShape(json, "config.json").attentionBias, true); // no qkv_bias: always biased
        json.insert(QStringLiteral("qkv_bias"), false);
        pb::RunConfig c = pb::hfRunConfig(json, "config.json");
        QCOMPARE(c.model.attentionBias, false);
        QCOMPARE(pb::countParameters(c).total, qint64(14315784192) - 24 * 3 * 2048);
    }
    // decoder_sparse_step and mlp_only_layers keep layers dense with the dense MLP (intermediate_size).
    void qwenMoeDenseLayers()
    {
        QJsonObject json = fixtureJson("qwen1.5-moe-a2.7b");
        json.insert(QStringLiteral("decoder_sparse_step"), 2);
        json.insert(QStringLiteral("mlp_only_layers"), QJsonArray {1});
        const pb::RunConfig c = pb::hfRunConfig(json, "config.json");
        QCOMPARE(c.model.moe.sparseStep, qint64(2));
        QCOMPARE(c.model.moe.denseLayers, std::vector<int64_t>({1}));
        // Sparse: layers 3, 5, ..., 23 (11); dense: the other 13, each a 2048 -> 5632 SwiGLU in place
        // of 60 experts, the router, the shared expert and its gate.
        const int64_t sparseMlp = 60 * 3 * 2048 * 1408 + 60 * 2048 + 3 * 2048 * 5632 + 2048;
        const int64_t denseMlp = 3 * 2048 * 5632;
        QCOMPARE(pb::countParameters(c).total, qint64(14315784192) - 13 * (sparseMlp - denseMlp));
        QVERIFY(hasParameter(c, "model.layers.1.mlp.gate_proj.weight", {5632, 2048}));
        QVERIFY(hasParameter(c, "model.layers.0.mlp.down_proj.weight", {2048, 5632}));
        QVERIFY(hasParameter(c, "model.layers.3.mlp.experts.59.down_proj.weight", {2048, 1408}));
        QVERIFY(!hasParameter(c, "model.layers.1.mlp.gate.weight", {60, 2048}));
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
    }
    // Keys that change nothing the model computes, or say the same twice, are accepted.
    void moeTolerated_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<qint64>("total");
        QTest::newRow("olmoe router z-loss") << "olmoe-1b-7b-0924" << "router_z_loss_coef" << QJsonValue(0.001) << qint64(6919161856);
        QTest::newRow("mixtral window spanning every position") << "mixtral-8x7b-v0.1" << "sliding_window" << QJsonValue(32768) << qint64(46702792704);
        QTest::newRow("mixtral num_experts alias agreeing") << "mixtral-8x7b-v0.1" << "num_experts" << QJsonValue(8) << qint64(46702792704);
        QTest::newRow("mixtral router logits returned") << "mixtral-8x7b-v0.1" << "output_router_logits" << QJsonValue(true) << qint64(46702792704);
        QTest::newRow("qwen3 num_local_experts alias agreeing") << "qwen3-30b-a3b" << "num_local_experts" << QJsonValue(128) << qint64(30532122624);
        QTest::newRow("unknown MoE key set to null") << "qwen3-30b-a3b" << "num_shared_experts" << QJsonValue(QJsonValue::Null) << qint64(30532122624);
        QTest::newRow("qwen2_moe sliding window switched off") << "qwen1.5-moe-a2.7b" << "use_sliding_window" << QJsonValue(false) << qint64(14315784192);
        QTest::newRow("dense llama, num_experts 0") << "llama-3.1-8b" << "num_experts" << QJsonValue(0) << qint64(8030261248);
        QTest::newRow("dense qwen2, num_local_experts null") << "qwen2.5-7b" << "num_local_experts" << QJsonValue(QJsonValue::Null) << qint64(7615616512);
    }
    void moeTolerated()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(qint64, total);
        const pb::RunConfig c = pb::hfRunConfig(edited(fixture.toUtf8().constData(), {}, key, value), "config.json");
        QCOMPARE(pb::countParameters(c).total, total);
    }
    void moeRefusals_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("remove");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("expected");
        const QString mixtral = QStringLiteral("mixtral-8x7b-v0.1"), qwen3 = QStringLiteral("qwen3-30b-a3b"), olmoe = QStringLiteral("olmoe-1b-7b-0924"),
                      qwen15 = QStringLiteral("qwen1.5-moe-a2.7b");
        // Expert, router and MoE settings this import does not read are named, not ignored.
        QTest::newRow("unknown expert key") << olmoe << "" << "num_shared_experts" << QJsonValue(1)
                                            << "num_shared_experts: is a mixture-of-experts setting this import does not model";
        QTest::newRow("unknown router key") << qwen3 << "" << "router_bias" << QJsonValue(true) << "router_bias: is a mixture-of-experts setting this import does not model";
        QTest::newRow("unknown moe key") << mixtral << "" << "moe_layer_freq" << QJsonValue(2) << "moe_layer_freq: is a mixture-of-experts setting";
        QTest::newRow("shared expert on qwen3_moe") << qwen3 << "" << "shared_expert_intermediate_size" << QJsonValue(768)
                                                   << "shared_expert_intermediate_size: is a mixture-of-experts setting";
        QTest::newRow("router z-loss on mixtral") << mixtral << "" << "router_z_loss_coef" << QJsonValue(0.001) << "router_z_loss_coef: is a mixture-of-experts setting";
        QTest::newRow("expert capacity on qwen2_moe") << qwen15 << "" << "expert_capacity" << QJsonValue(64) << "expert_capacity: is a mixture-of-experts setting";
        // Attention this import does not model.
        QTest::newRow("clip_qkv set") << olmoe << "" << "clip_qkv" << QJsonValue(8.0) << "clip_qkv: got the number 8; clipping queries, keys and values is not modelled";
        QTest::newRow("mixtral sliding window") << mixtral << "" << "sliding_window" << QJsonValue(4096)
                                                << "sliding_window: got the number 4096; sliding-window attention is not modelled";
        QTest::newRow("qwen3_moe sliding window") << qwen3 << "" << "use_sliding_window" << QJsonValue(true) << "use_sliding_window: true is not supported";
        QTest::newRow("qwen2_moe sliding window") << qwen15 << "" << "use_sliding_window" << QJsonValue(true) << "use_sliding_window: true is not supported";
        QTest::newRow("attention bias on olmoe") << olmoe << "" << "attention_bias" << QJsonValue(true) << "attention_bias: true is not supported for olmoe";
        QTest::newRow("attention bias on qwen3_moe") << qwen3 << "" << "attention_bias" << QJsonValue(true) << "attention_bias: true is not supported for qwen3_moe";
        // Sizes and counts.
        QTest::newRow("experts missing") << mixtral << "num_local_experts" << "" << QJsonValue() << "num_local_experts: required field is missing";
        QTest::newRow("top-k missing") << qwen15 << "num_experts_per_tok" << "" << QJsonValue() << "num_experts_per_tok: required field is missing";
        QTest::newRow("expert size missing") << qwen3 << "moe_intermediate_size" << "" << QJsonValue() << "moe_intermediate_size: required field is missing";
        QTest::newRow("shared expert size missing") << qwen15 << "shared_expert_intermediate_size" << "" << QJsonValue() << "shared_expert_intermediate_size: required field is missing";
        QTest::newRow("kv heads missing, mixtral") << mixtral << "num_key_value_heads" << "" << QJsonValue() << "num_key_value_heads: required field is missing";
        QTest::newRow("zero experts") << olmoe << "" << "num_experts" << QJsonValue(0) << "num_experts: expected a positive integer";
        QTest::newRow("experts as string") << qwen3 << "" << "num_experts" << QJsonValue(QStringLiteral("128")) << "num_experts: expected a positive integer";
        QTest::newRow("top-k above experts") << olmoe << "" << "num_experts_per_tok" << QJsonValue(65) << "model.moe.experts_per_token: must not exceed model.moe.experts";
        QTest::newRow("alias disagrees") << mixtral << "" << "num_experts" << QJsonValue(4) << "num_experts: is another name for num_local_experts and must equal it (4 != 8)";
        QTest::newRow("alias alone, zero") << mixtral << "num_local_experts" << "num_experts" << QJsonValue(0) << "num_experts: expected a positive integer";
        QTest::newRow("sparse step zero") << qwen15 << "" << "decoder_sparse_step" << QJsonValue(0) << "decoder_sparse_step: expected a positive integer";
        QTest::newRow("dense layers not an array") << qwen3 << "" << "mlp_only_layers" << QJsonValue(3) << "mlp_only_layers: expected an array of layer indices, got the number 3";
        QTest::newRow("dense layer past the last") << qwen3 << "" << "mlp_only_layers" << QJsonValue(QJsonArray {0, 48})
                                                  << "mlp_only_layers[1]: expected a layer index from 0 to 47";
        QTest::newRow("dense layer negative") << qwen15 << "" << "mlp_only_layers" << QJsonValue(QJsonArray {-1}) << "mlp_only_layers[0]: expected a layer index";
        QTest::newRow("norm_topk_prob as string") << qwen3 << "" << "norm_topk_prob" << QJsonValue(QStringLiteral("yes")) << "norm_topk_prob: expected true or false";
        QTest::newRow("aux loss negative") << olmoe << "" << "router_aux_loss_coef" << QJsonValue(-1) << "model.moe.aux_loss_weight: must lie in [0, 1]";
        QTest::newRow("aux loss as string") << mixtral << "" << "router_aux_loss_coef" << QJsonValue(QStringLiteral("0.02")) << "router_aux_loss_coef: expected a number";
        QTest::newRow("jitter 1") << mixtral << "" << "router_jitter_noise" << QJsonValue(1.0) << "model.moe.router_jitter";
        // Dense types carrying experts.
        QTest::newRow("dense mistral with num_local_experts") << "mistral-7b-v0.3" << "" << "num_local_experts" << QJsonValue(8)
                                                             << "num_local_experts: got the number 8, but model_type 'mistral' is a dense model without experts";
        QTest::newRow("dense qwen2 with num_experts") << "qwen2.5-7b" << "" << "num_experts" << QJsonValue(60) << "num_experts: got the number 60, but model_type 'qwen2'";
    }
    void moeRefusals()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, remove);
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        writeJson(dir.filePath(QStringLiteral("config.json")), edited(fixture.toUtf8().constData(), remove, key, value));
        const QString message = errorOf(dir.path());
        QVERIFY2(message.contains(expected), qPrintable(message));
        QVERIFY2(message.contains(QLatin1String("config.json")), qPrintable(message));
    }
    void importedConfigRoundTrips()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("qwen2.5-7b"));
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
    }
};

QTEST_GUILESS_MAIN(TestHfImport)
#include "tst_hf_import.moc"
