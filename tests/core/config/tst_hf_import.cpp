// Hugging Face config.json import: exact published counts, revision, weights folder, refusals.
#include "config/HfHubCache.h"
#include "config/HfImport.h"
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
        QTest::newRow("string size") << "" << "hidden_size" << QJsonValue(QStringLiteral("4096")) << "hidden_size: expected a positive integer";
        QTest::newRow("zero heads") << "" << "num_attention_heads" << QJsonValue(0) << "num_attention_heads: expected a positive integer";
        QTest::newRow("activation") << "" << "hidden_act" << QJsonValue(QStringLiteral("relu")) << "unsupported activation 'relu'";
        QTest::newRow("o_proj bias") << "" << "attention_bias" << QJsonValue(true) << "attention_bias: true is not supported";
        QTest::newRow("mlp bias") << "" << "mlp_bias" << QJsonValue(true) << "mlp_bias: true is not supported";
        QTest::newRow("kv heads rule") << "" << "num_key_value_heads" << QJsonValue(7) << "model.kv_heads: must divide model.attention_heads";
        // rope_scaling: refused rather than dropped, since it sets every position the model sees.
        const QJsonObject llama3 {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
        const auto with = [&](const char *key, const QJsonValue &v) { QJsonObject o = llama3; o.insert(QLatin1String(key), v); return QJsonValue(o); };
        const auto without = [&](const char *key) { QJsonObject o = llama3; o.remove(QLatin1String(key)); return QJsonValue(o); };
        QTest::newRow("rope scaling string") << "" << "rope_scaling" << QJsonValue(QStringLiteral("llama3")) << "rope_scaling: expected an object with rope_type, or null, got the string \"llama3\"";
        QTest::newRow("rope scaling array") << "" << "rope_scaling" << QJsonValue(QJsonArray {8.0, 1.0, 4.0}) << "rope_scaling: expected an object with rope_type, or null, got an array";
        QTest::newRow("rope scaling number") << "" << "rope_scaling" << QJsonValue(8.0) << "rope_scaling: expected an object";
        QTest::newRow("rope yarn") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"rope_type", "yarn"}, {"factor", 4.0}}) << "rope_scaling.rope_type: 'yarn' is not supported (supported: default, linear, llama3)";
        QTest::newRow("rope dynamic, legacy key") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"type", "dynamic"}, {"factor", 2.0}}) << "rope_scaling.type: 'dynamic' is not supported";
        QTest::newRow("rope type missing") << "" << "rope_scaling" << QJsonValue(QJsonObject {{"factor", 8.0}}) << "rope_scaling.rope_type: required field is missing";
        QTest::newRow("rope type not a string") << "" << "rope_scaling" << with("rope_type", 3) << "rope_scaling.rope_type: expected a string";
        QTest::newRow("llama3 factor missing") << "" << "rope_scaling" << without("factor") << "rope_scaling.factor: required field is missing";
        QTest::newRow("llama3 low missing") << "" << "rope_scaling" << without("low_freq_factor") << "rope_scaling.low_freq_factor: required field is missing";
        QTest::newRow("llama3 high as string") << "" << "rope_scaling" << with("high_freq_factor", QStringLiteral("4")) << "rope_scaling.high_freq_factor: expected a positive number";
        QTest::newRow("llama3 original missing") << "" << "rope_scaling" << without("original_max_position_embeddings") << "rope_scaling.original_max_position_embeddings: required field is missing";
        QTest::newRow("llama3 original fractional") << "" << "rope_scaling" << with("original_max_position_embeddings", 8192.5) << "rope_scaling.original_max_position_embeddings: expected a positive integer";
        QTest::newRow("llama3 high not above low") << "" << "rope_scaling" << with("high_freq_factor", 1.0) << "model.rope_scaling.high_freq_factor: must exceed model.rope_scaling.low_freq_factor";
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
    void importedConfigRoundTrips()
    {
        const pb::RunConfig c = pb::importHfConfig(hf("qwen2.5-7b"));
        QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
    }
};

QTEST_GUILESS_MAIN(TestHfImport)
#include "tst_hf_import.moc"
