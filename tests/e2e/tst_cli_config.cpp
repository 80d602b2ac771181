// The config commands as a user runs them: exit codes 0/2, messages naming the file or field,
// --set overrides, and nothing written when the input is bad.
#include "e2e/CliProcess.h"
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

using Result = pbtest::CliResult;

Result cli(const QStringList &args) { return pbtest::runCli(args); }

QJsonObject json(const Result &r) { return QJsonDocument::fromJson(r.out.toUtf8()).object(); }

QString data(const char *path) { return QStringLiteral(PB_TEST_DATA_DIR "/") + QLatin1String(path); }

QByteArray fileBytes(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The CLI with HF_HUB_CACHE set to `cache`.
Result cliWithHubCache(const QStringList &args, const QString &cache)
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("HF_HUB_CACHE"), cache);
    const pbtest::CliBytes raw = pbtest::runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, 120000, env);
    return {raw.exitCode, QString::fromUtf8(raw.out), QString::fromUtf8(raw.err)};
}

bool writeFile(const QString &path, const QByteArray &bytes)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

const QString kCommit = QStringLiteral("4e20de362430cd3b72f300e6b0f18e50e7166e08");

} // namespace

class TestCliConfig : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void presetsJson()
    {
        const Result r = cli({QStringLiteral("presets"), QStringLiteral("--json")});
        QCOMPARE(r.code, 0);
        const QJsonArray list = json(r).value(QStringLiteral("presets")).toArray();
        QVERIFY(list.size() >= 8);
        bool found = false;
        for (const auto &v : list) {
            const QJsonObject p = v.toObject();
            if (p.value(QStringLiteral("name")).toString() != QLatin1String("llama-3.1-8b"))
                continue;
            found = true;
            QCOMPARE(p.value(QStringLiteral("total_params")).toInteger(), qint64(8030261248));
            QCOMPARE(p.value(QStringLiteral("trainable_params")).toInteger(), qint64(8030261248));
            QCOMPARE(p.value(QStringLiteral("layers")).toInt(), 32);
            QCOMPARE(p.value(QStringLiteral("hidden_size")).toInt(), 4096);
            QCOMPARE(p.value(QStringLiteral("family")).toString(), QStringLiteral("llama"));
        }
        QVERIFY(found);
    }
    void presetsText()
    {
        const Result r = cli({QStringLiteral("presets")});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains(QLatin1String("70,553,706,496")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QLatin1String("1,235,814,400")), qPrintable(r.out));
    }
    void newToStdoutAndFile()
    {
        const Result r = cli({QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--preset"), QStringLiteral("tiny")});
        QCOMPARE(r.code, 0);
        const QJsonObject c = json(r);
        QCOMPARE(c.value(QStringLiteral("schema_version")).toInt(), 1);
        QCOMPARE(c.value(QStringLiteral("model")).toObject().value(QStringLiteral("preset")).toString(), QStringLiteral("tiny"));
        QCOMPARE(c.value(QStringLiteral("train")).toObject().value(QStringLiteral("precision")).toString(), QStringLiteral("fp32"));

        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("run.json"));
        const Result w = cli({QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--preset"), QStringLiteral("tiny"), QStringLiteral("--out"), file,
                              QStringLiteral("--set"), QStringLiteral("train.micro_batch=2")});
        QCOMPARE(w.code, 0);
        const Result s = cli({QStringLiteral("config"), QStringLiteral("show"), file, QStringLiteral("--json")});
        QCOMPARE(s.code, 0);
        QCOMPARE(json(s).value(QStringLiteral("total_params")).toInteger(), qint64(125248));
        QCOMPARE(json(s).value(QStringLiteral("train")).toObject().value(QStringLiteral("micro_batch")).toInt(), 2);
    }
    void nothingWrittenOnError_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown preset") << QStringList {"--preset", "gpt-5"} << "unknown preset";
        QTest::newRow("rule broken by --set") << QStringList {"--preset", "tiny", "--set", "train.seq_len=9999"} << "train.seq_len: must not exceed model.max_positions";
        QTest::newRow("unknown --set path") << QStringList {"--preset", "tiny", "--set", "train.lora.rnak=8"} << "train.lora.rnak";
        QTest::newRow("wrong --set type") << QStringList {"--preset", "tiny", "--set", "train.recompute=maybe"} << "train.recompute: expected true or false";
    }
    void nothingWrittenOnError()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString fresh = dir.filePath(QStringLiteral("fresh.json"));
        Result r = cli(QStringList {QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--out"), fresh} + args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
        QVERIFY(!QFile::exists(fresh));
        // An existing file is left exactly as it was.
        const QString existing = dir.filePath(QStringLiteral("existing.json"));
        {
            QFile f(existing);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("keep me\n");
        }
        r = cli(QStringList {QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--out"), existing} + args);
        QCOMPARE(r.code, 2);
        QCOMPARE(fileBytes(existing), QByteArray("keep me\n"));
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList {QStringLiteral("existing.json")});
    }
    void validate_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("code");
        QTest::addColumn<QStringList>("expected"); // in stdout for code 0 and rule issues, stderr otherwise
        QTest::newRow("valid file") << QStringList {data("configs/tiny-copy.json")} << 0 << QStringList {"valid"};
        QTest::newRow("valid preset") << QStringList {"preset:llama-3.1-70b"} << 0 << QStringList {"valid"};
        QTest::newRow("minimal file") << QStringList {data("configs/minimal.json")} << 0 << QStringList {"valid"};
        QTest::newRow("every broken rule") << QStringList {data("configs/invalid-rules.json")} << 2
                                           << QStringList {"invalid: 3 issue(s)", "model.attention_heads: must divide model.hidden_size", "model.kv_heads: must divide model.attention_heads", "train.seq_len: must not exceed model.max_positions"};
        QTest::newRow("lora rank via --set") << QStringList {"preset:tiny", "--set", "train.mode=lora", "--set", "train.lora.rank=64"} << 2 << QStringList {"train.lora.rank: must not exceed the width"};
        QTest::newRow("malformed") << QStringList {data("configs/malformed.json")} << 2 << QStringList {"malformed.json", "not valid JSON at line 2"};
        QTest::newRow("truncated") << QStringList {data("configs/truncated.json")} << 2 << QStringList {"truncated.json", "truncated?"};
        QTest::newRow("wrong type") << QStringList {data("configs/wrong-type.json")} << 2 << QStringList {"train.seq_len: expected an integer"};
        QTest::newRow("unknown key") << QStringList {data("configs/unknown-key.json")} << 2 << QStringList {"model.hiden_size: unknown key"};
        QTest::newRow("newer schema") << QStringList {data("configs/newer-schema.json")} << 2 << QStringList {"schema_version", "newer PilotBench"};
        QTest::newRow("missing file") << QStringList {data("configs/absent.json")} << 2 << QStringList {"absent.json: no such file"};
        QTest::newRow("no argument") << QStringList {} << 2 << QStringList {"expected 1 argument"};
    }
    void validate()
    {
        QFETCH(QStringList, args);
        QFETCH(int, code);
        QFETCH(QStringList, expected);
        const Result r = cli(QStringList {QStringLiteral("config"), QStringLiteral("validate")} + args);
        QCOMPARE(r.code, code);
        const QString text = r.out + r.err;
        for (const QString &part : expected)
            QVERIFY2(text.contains(part), qPrintable(QStringLiteral("missing '%1' in:\n%2").arg(part, text)));
    }
    void validateJson()
    {
        const Result r = cli({QStringLiteral("config"), QStringLiteral("validate"), data("configs/invalid-rules.json"), QStringLiteral("--json")});
        QCOMPARE(r.code, 2);
        const QJsonObject o = json(r);
        QCOMPARE(o.value(QStringLiteral("valid")).toBool(true), false);
        QCOMPARE(o.value(QStringLiteral("issues")).toArray().size(), 3);
        QCOMPARE(o.value(QStringLiteral("issues")).toArray().at(0).toObject().value(QStringLiteral("field")).toString(), QStringLiteral("model.attention_heads"));
    }
    void showWithOverrides()
    {
        const Result r = cli({QStringLiteral("config"), QStringLiteral("show"), QStringLiteral("preset:llama-3.1-8b"), QStringLiteral("--json"),
                              QStringLiteral("--set"), QStringLiteral("train.mode=lora"), QStringLiteral("--set"), QStringLiteral("train.lora.rank=16")});
        QCOMPARE(r.code, 0);
        const QJsonObject o = json(r);
        // LoRA r=16 on q,k,v,o of 32 layers: 32 * 16 * (2*(4096+4096) + 2*(4096+1024)) = 13,631,488.
        QCOMPARE(o.value(QStringLiteral("trainable_params")).toInteger(), qint64(13631488));
        QCOMPARE(o.value(QStringLiteral("total_params")).toInteger(), qint64(8030261248 + 13631488));
        QCOMPARE(o.value(QStringLiteral("config_hash")).toString().size(), 64);
        QCOMPARE(o.value(QStringLiteral("train")).toObject().value(QStringLiteral("mode")).toString(), QStringLiteral("lora"));
    }
    void showText()
    {
        const Result r = cli({QStringLiteral("config"), QStringLiteral("show"), QStringLiteral("preset:tiny")});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains(QLatin1String("125,248 total, 125,248 trainable")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QLatin1String("2 layers, hidden 64, 4 heads (2 kv, head dim 16)")), qPrintable(r.out));
    }
    // A family of 2026 as a user meets it: import its config.json, see its traits, pilot a tiny
    // model of it on the CPU from the weights beside the config.
    void denseFamilyEndToEnd()
    {
        const Result shown = cli({QStringLiteral("config"), QStringLiteral("show"), QStringLiteral("preset:gemma-3-12b")});
        QCOMPARE(shown.code, 0);
        QVERIFY2(shown.out.contains(QLatin1String("11,766,034,176 total")), qPrintable(shown.out));
        QVERIFY2(shown.out.contains(QLatin1String("sliding window of 1024 on 40 of 48 layers; full attention on every 6th layer")), qPrintable(shown.out));
        QVERIFY2(shown.out.contains(QLatin1String("norms         sandwich (four per layer), scaled by 1 + weight")), qPrintable(shown.out));

        QTemporaryDir dir;
        const QString config = dir.filePath(QStringLiteral("gemma2.json"));
        const Result imported = cli({QStringLiteral("config"), QStringLiteral("import-hf"), data("hf-parity/gemma2"), QStringLiteral("--set"), QStringLiteral("train.seq_len=24"),
                                     QStringLiteral("--out"), config});
        QCOMPARE(imported.code, 0);
        const Result pilot = cli({QStringLiteral("pilot"), QStringLiteral("--config"), config, QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"),
                                  QStringLiteral("--db"), dir.filePath(QStringLiteral("h.db"))});
        QVERIFY2(pilot.code == 0, qPrintable(pilot.err + pilot.out));
        // The other stages on the same family: a scaling step over two sharded CPU ranks and the
        // restore proof in a fresh process (checkpoints under Gemma 2's own names).
        const Result scale = cli({QStringLiteral("scale"), QStringLiteral("--config"), config, QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"),
                                  QStringLiteral("fsdp"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"),
                                  QStringLiteral("--db"), dir.filePath(QStringLiteral("h.db"))});
        QVERIFY2(scale.code == 0, qPrintable(scale.err + scale.out));
        const Result restore = cli({QStringLiteral("restore-check"), QStringLiteral("--config"), config, QStringLiteral("--steps-before"), QStringLiteral("2"),
                                    QStringLiteral("--steps-after"), QStringLiteral("2"), QStringLiteral("--db"), dir.filePath(QStringLiteral("h.db"))});
        QVERIFY2(restore.code == 0 && restore.out.contains(QLatin1String("restore check: PASS")), qPrintable(restore.err + restore.out));
    }
    void importHf()
    {
        const Result r = cli({QStringLiteral("config"), QStringLiteral("import-hf"), data("hf/qwen2.5-7b")});
        QCOMPARE(r.code, 0);
        const QJsonObject model = json(r).value(QStringLiteral("model")).toObject();
        QCOMPARE(model.value(QStringLiteral("family")).toString(), QStringLiteral("qwen2"));
        QCOMPARE(model.value(QStringLiteral("attention_bias")).toBool(), true);
        QCOMPARE(model.value(QStringLiteral("vocab_size")).toInt(), 152064);

        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("qwen.json"));
        QCOMPARE(cli({QStringLiteral("config"), QStringLiteral("import-hf"), data("hf/llama-3.1-8b"), QStringLiteral("--out"), file}).code, 0);
        const Result s = cli({QStringLiteral("config"), QStringLiteral("show"), file, QStringLiteral("--json")});
        QCOMPARE(s.code, 0);
        QCOMPARE(json(s).value(QStringLiteral("total_params")).toInteger(), qint64(8030261248));

        const Result missing = cli({QStringLiteral("config"), QStringLiteral("import-hf"), dir.filePath(QStringLiteral("none"))});
        QCOMPARE(missing.code, 2);
        QVERIFY2(missing.err.contains(QLatin1String("no such file or folder")), qPrintable(missing.err));
    }
    void importHfFromHubCache()
    {
        // A hub cache as huggingface_hub leaves it: refs/main names the commit of snapshots/<commit>.
        QTemporaryDir cache;
        const QString repo = cache.filePath(QStringLiteral("models--meta-llama--Llama-3.2-1B"));
        QVERIFY(writeFile(repo + QStringLiteral("/refs/main"), kCommit.toUtf8()));
        QVERIFY(writeFile(repo + QStringLiteral("/snapshots/") + kCommit + QStringLiteral("/config.json"),
                          fileBytes(data("hf/hub/models--meta-llama--Llama-3.2-1B/snapshots/0123456789abcdef0123456789abcdef01234567/config.json"))));
        const Result r = cliWithHubCache({QStringLiteral("config"), QStringLiteral("import-hf"), QStringLiteral("meta-llama/Llama-3.2-1B")}, cache.path());
        QCOMPARE(r.code, 0);
        const QJsonObject config = json(r);
        QCOMPARE(config.value(QStringLiteral("name")).toString(), QStringLiteral("meta-llama/Llama-3.2-1B"));
        const QJsonObject model = config.value(QStringLiteral("model")).toObject();
        QCOMPARE(model.value(QStringLiteral("revision")).toString(), kCommit);
        const QJsonObject scaling = model.value(QStringLiteral("rope_scaling")).toObject();
        QCOMPARE(scaling.value(QStringLiteral("type")).toString(), QStringLiteral("llama3"));
        QCOMPARE(scaling.value(QStringLiteral("factor")).toDouble(), 32.0);
        QCOMPARE(scaling.value(QStringLiteral("original_max_positions")).toInt(), 8192);

        // Not cached: exit 2 naming the repository and where it looked; nothing is downloaded.
        QTemporaryDir empty;
        const Result missing = cliWithHubCache({QStringLiteral("config"), QStringLiteral("import-hf"), QStringLiteral("meta-llama/Llama-3.1-8B")}, empty.path());
        QCOMPARE(missing.code, 2);
        QVERIFY2(missing.err.contains(QLatin1String("meta-llama/Llama-3.1-8B: ")), qPrintable(missing.err));
        QVERIFY2(missing.err.contains(empty.path() + QStringLiteral("/models--meta-llama--Llama-3.1-8B")), qPrintable(missing.err));
        QVERIFY2(missing.err.contains(QLatin1String("$HF_HUB_CACHE")), qPrintable(missing.err));
        const Result revision = cliWithHubCache({QStringLiteral("config"), QStringLiteral("import-hf"), QStringLiteral("meta-llama/Llama-3.2-1B@v9")}, cache.path());
        QCOMPARE(revision.code, 2);
        QVERIFY2(revision.err.contains(QLatin1String("revision 'v9' is not in the Hugging Face cache")), qPrintable(revision.err));
    }
    void importHfRefusesUnsupportedRopeScaling_data()
    {
        QTest::addColumn<QByteArray>("scaling");
        QTest::addColumn<QString>("expected");
        QTest::newRow("string") << QByteArray(R"("llama3")") << "rope_scaling: expected an object";
        QTest::newRow("array") << QByteArray("[32, 1, 4, 8192]") << "rope_scaling: expected an object";
        QTest::newRow("yarn without factor") << QByteArray(R"({"rope_type": "yarn"})") << "rope_scaling.factor: required field is missing";
        QTest::newRow("dynamic") << QByteArray(R"({"type": "dynamic", "factor": 2.0})") << "rope_scaling.type: 'dynamic' is not supported";
    }
    void importHfRefusesUnsupportedRopeScaling()
    {
        QFETCH(QByteArray, scaling);
        QFETCH(QString, expected);
        QJsonObject config = QJsonDocument::fromJson(fileBytes(data("hf/llama-3.1-8b/config.json"))).object();
        QVERIFY(!config.isEmpty());
        config.insert(QStringLiteral("rope_scaling"), QJsonDocument::fromJson("[" + scaling + "]").array().at(0));
        QTemporaryDir dir;
        QVERIFY(writeFile(dir.filePath(QStringLiteral("config.json")), QJsonDocument(config).toJson()));
        const QString out = dir.filePath(QStringLiteral("out.json"));
        const Result r = cli({QStringLiteral("config"), QStringLiteral("import-hf"), dir.path(), QStringLiteral("--out"), out});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(expected), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));
    }
    void badCommands()
    {
        QCOMPARE(cli({QStringLiteral("config")}).code, 2);
        const Result r = cli({QStringLiteral("config"), QStringLiteral("frobnicate")});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains(QLatin1String("unknown subcommand")));
        QCOMPARE(cli({QStringLiteral("config"), QStringLiteral("show"), QStringLiteral("--bogus")}).code, 2);
        QCOMPARE(cli({QStringLiteral("config"), QStringLiteral("show"), QStringLiteral("--help")}).code, 0);
    }
};

QTEST_GUILESS_MAIN(TestCliConfig)
#include "tst_cli_config.moc"
