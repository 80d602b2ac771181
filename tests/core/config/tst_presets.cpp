// Every shipped preset loads, validates, and has the published parameter count exactly.
#include "HfImportTestUtil.h"
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QJsonDocument>
#include <QRegularExpression>
#include <QtTest>

class TestPresets : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void publishedCounts_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<bool>("tied");
        // Totals as published on the model cards / safetensors metadata.
        QTest::newRow("llama-3.2-1b") << "llama-3.2-1b" << qint64(1235814400) << true;
        QTest::newRow("llama-3.1-8b") << "llama-3.1-8b" << qint64(8030261248) << false;
        QTest::newRow("llama-3.1-70b") << "llama-3.1-70b" << qint64(70553706496) << false;
        QTest::newRow("mistral-7b") << "mistral-7b" << qint64(7248023552) << false;
        QTest::newRow("qwen2.5-7b") << "qwen2.5-7b" << qint64(7615616512) << false;
        QTest::newRow("qwen2.5-0.5b") << "qwen2.5-0.5b" << qint64(494032768) << true;
        // The dense families of 2026: Transformers 5.17's own count of the same config.json
        // (tests/data/hf/<name>/config.json, counted on the H200 by tests/bench/hf_family_fixtures.py
        // --counts into tests/data/hf-parity/published-counts.json); text models only.
        QTest::newRow("qwen3-8b") << "qwen3-8b" << qint64(8190735360) << false;
        QTest::newRow("gemma-3-12b") << "gemma-3-12b" << qint64(11766034176) << true;
        QTest::newRow("gemma-2-9b") << "gemma-2-9b" << qint64(9241705984) << true;
        QTest::newRow("olmo-2-7b") << "olmo-2-7b" << qint64(7298617344) << false;
        QTest::newRow("phi-4") << "phi-4" << qint64(14659507200) << false;
        QTest::newRow("smollm3-3b") << "smollm3-3b" << qint64(3075098624) << true;
        QTest::newRow("glm-4-9b") << "glm-4-9b" << qint64(9400279040) << false;
        QTest::newRow("granite-3.3-8b") << "granite-3.3-8b" << qint64(8170864640) << true;
        QTest::newRow("ministral-3-8b") << "ministral-3-8b" << qint64(8489553920) << false;
        // OLMo 3 7B (tests/data/hf/olmo-3-7b): counted by hand (2 x 100278 x 4096 embeddings, 32 layers
        // of 202,391,552, the final norm) and by Transformers 5.17's Olmo3ForCausalLM (2026-12-07, H100 host).
        QTest::newRow("olmo-3-7b") << "olmo-3-7b" << qint64(7298011136) << false;
        // Gemma 4 31B's text model (tests/data/hf/gemma-4-31b, its shapes from Transformers' converter):
        // counted by hand in tst_hf_import_gemma4 and by Transformers 5.17 in published-counts.json.
        QTest::newRow("gemma-4-31b") << "gemma-4-31b" << qint64(30697345280) << true;
        // E2B and E4B (tests/data/hf/gemma-4-e2b, -e4b): Transformers 5.17's Gemma4ForCausalLM counts
        // the same (published-counts.json); half of E2B is its per-layer table (262144 x 35 x 256).
        QTest::newRow("gemma-4-e2b") << "gemma-4-e2b" << qint64(4628569344) << true;
        QTest::newRow("gemma-4-e4b") << "gemma-4-e4b" << qint64(7463013376) << true;
        // Qwen3.5-9B's text model (tests/data/hf/qwen3.5-9b): Transformers 5.17's Qwen3_5ForCausalLM
        // counts the same (published-counts.json); 8.95B is the untied text model's published size.
        QTest::newRow("qwen3.5-9b") << "qwen3.5-9b" << qint64(8953803264) << false;
    }
    void publishedCounts()
    {
        QFETCH(QString, name);
        QFETCH(qint64, total);
        QFETCH(bool, tied);
        const pb::RunConfig c = pb::presetConfig(name);
        QCOMPARE(QString::fromStdString(c.model.preset), name);
        QCOMPARE(c.model.tieEmbeddings, tied);
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, total);
        QCOMPARE(counts.trainable, total); // full fine-tuning
        QCOMPARE(c.train.precision, pb::Precision::Bf16Mixed);
        QCOMPARE(c.train.optimizer.kind, pb::OptimizerKind::AdamW);
        QCOMPARE(c.train.seqLen, qint64(2048));
    }
    // Mixtures of experts: every expert's weights in the total (memory), experts_per_token of them
    // in the active count (FLOPs); both as published. By hand for Mixtral-8x7B: per layer q,o
    // 2*4096^2, k,v 2*4096*1024, router 8*4096, 8 experts 3*4096*14336, norms 2*4096.
    void mixtureOfExpertsCounts_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<qint64>("active");
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b" << qint64(46702792704) << qint64(12879925248);
        QTest::newRow("qwen3-30b-a3b") << "qwen3-30b-a3b" << qint64(30532122624) << qint64(3353032704);
        QTest::newRow("olmoe-1b-7b") << "olmoe-1b-7b" << qint64(6919161856) << qint64(1282017280);
        // Transformers 5.17's count of Moonlight-16B-A3B (tests/data/hf-parity/published-counts.json).
        QTest::newRow("moonlight-16b-a3b") << "moonlight-16b-a3b" << qint64(15960108544) << qint64(2914774528);
        // Llama4ForCausalLM (the text model of Llama-4-Scout-17B-16E), as Transformers 5.17 counts it
        // (tests/data/hf-parity/published-counts.json).
        // GptOssForCausalLM of openai/gpt-oss-20b as Transformers 5.17 counts it (experts as bf16
        // tensors, not the checkpoint's MXFP4 blocks; tests/data/hf-parity/published-counts.json).
        QTest::newRow("gpt-oss-20b") << "gpt-oss-20b" << qint64(20914757184) << qint64(4187440704);
        QTest::newRow("llama-4-scout-17b-16e") << "llama-4-scout-17b-16e" << qint64(107769861120) << qint64(17172894720);
        // Qwen3-Next-80B-A3B ("80B total, 3B activated"): 36 Gated DeltaNet and 12 gated full-attention
        // layers, 512 experts top 10 plus a gated shared expert (tst_hf_import_qwen_hybrid counts it by
        // hand from the shapes; Transformers' own count is not on record yet).
        QTest::newRow("qwen3-next-80b-a3b") << "qwen3-next-80b-a3b" << qint64(79674391296) << qint64(3874929408);
    }
    // The hybrid presets are their committed config.json (tests/data/hf/<dir>) through
    // `config import-hf`: the same model section (but the preset's name), so the same counts.
    void hybridPresetsAreTheirImportedConfigs_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("hfDir");
        QTest::addColumn<qint64>("total");
        QTest::addColumn<qint64>("active");
        QTest::addColumn<qint64>("linearLayers");
        QTest::newRow("qwen3-next-80b-a3b") << "qwen3-next-80b-a3b" << "qwen3-next-80b-a3b" << qint64(79674391296) << qint64(3874929408) << qint64(36);
        QTest::newRow("qwen3.5-9b") << "qwen3.5-9b" << "qwen3.5-9b" << qint64(8953803264) << qint64(8953803264) << qint64(24);
    }
    void hybridPresetsAreTheirImportedConfigs()
    {
        QFETCH(QString, name);
        QFETCH(QString, hfDir);
        QFETCH(qint64, total);
        QFETCH(qint64, active);
        QFETCH(qint64, linearLayers);
        const QJsonObject file = pbtest::fixture(qPrintable(hfDir));
        QVERIFY2(!file.isEmpty(), qPrintable(pbtest::hf(qPrintable(hfDir))));
        const pb::RunConfig imported = pb::hfRunConfig(file, "config.json");
        const pb::RunConfig preset = pb::presetConfig(name);
        QJsonObject importedModel = pb::toJson(imported).value(QStringLiteral("model")).toObject();
        QJsonObject presetModel = pb::toJson(preset).value(QStringLiteral("model")).toObject();
        QCOMPARE(importedModel.take(QStringLiteral("preset")).toString(), QStringLiteral("hf-import"));
        QCOMPARE(presetModel.take(QStringLiteral("preset")).toString(), name);
        QVERIFY2(presetModel == importedModel,
                 (QJsonDocument(presetModel).toJson(QJsonDocument::Compact) + "\n != \n" + QJsonDocument(importedModel).toJson(QJsonDocument::Compact)).constData());
        QVERIFY(preset.model.linear.enabled());
        QCOMPARE(preset.model.layers - preset.model.fullAttentionLayers(), linearLayers);
        QVERIFY(preset.model.traits.attentionOutputGate);
        const pb::ParamCounts fromPreset = pb::countParameters(preset);
        const pb::ParamCounts fromFile = pb::countParameters(imported);
        QCOMPARE(fromPreset.total, fromFile.total);
        QCOMPARE(fromPreset.active, fromFile.active);
        QCOMPARE(fromPreset.total, total);
        QCOMPARE(fromPreset.active, active);
        // LoRA on the attention of every layer: the full layers' q/k/v/o and linear_attn's projections.
        const pb::RunConfig lora = pb::loadRunConfig(QStringLiteral("preset:") + name, {QStringLiteral("train.mode=lora")});
        QVERIFY2(pb::validateRunConfig(lora).empty(), qPrintable(name));
        QVERIFY(pb::countParameters(lora).lora > 0);
    }
    void mixtureOfExpertsCounts()
    {
        QFETCH(QString, name);
        QFETCH(qint64, total);
        QFETCH(qint64, active);
        const pb::RunConfig c = pb::presetConfig(name);
        QVERIFY(c.model.moe.enabled());
        const pb::ParamCounts counts = pb::countParameters(c);
        QCOMPARE(counts.total, total);
        QCOMPARE(counts.active, active);
        QCOMPARE(counts.trainable, total);
    }
    void denseActiveIsTotal()
    {
        const pb::ParamCounts counts = pb::countParameters(pb::presetConfig(QStringLiteral("llama-3.2-1b")));
        QCOMPARE(counts.active, counts.total);
    }
    void llama1bIsTheH200ComparisonConfig()
    {
        const pb::RunConfig c = pb::presetConfig(QStringLiteral("llama-3.2-1b"));
        QCOMPARE(c.train.microBatch, qint64(8));
        QCOMPARE(c.model.headDim, qint64(64));
        QCOMPARE(c.model.ropeTheta, 500000.0);
    }
    void ropeScalingAsPublished_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<double>("factor"); // 0: none
        // rope_scaling of the models' config.json on the Hub: llama3, low 1, high 4, original 8192.
        QTest::newRow("llama-3.2-1b") << "llama-3.2-1b" << 32.0;
        QTest::newRow("llama-3.1-8b") << "llama-3.1-8b" << 8.0;
        QTest::newRow("llama-3.1-70b") << "llama-3.1-70b" << 8.0;
        QTest::newRow("mistral-7b") << "mistral-7b" << 0.0;
        QTest::newRow("qwen2.5-7b") << "qwen2.5-7b" << 0.0;
        QTest::newRow("qwen2.5-0.5b") << "qwen2.5-0.5b" << 0.0;
        QTest::newRow("tiny") << "tiny" << 0.0;
    }
    void ropeScalingAsPublished()
    {
        QFETCH(QString, name);
        QFETCH(double, factor);
        const pb::RopeScaling s = pb::presetConfig(name).model.ropeScaling;
        if (factor == 0) {
            QCOMPARE(s.type, pb::RopeScalingType::None);
            return;
        }
        QCOMPARE(s.type, pb::RopeScalingType::Llama3);
        QCOMPARE(s.factor, factor);
        QCOMPARE(s.lowFreqFactor, 1.0);
        QCOMPARE(s.highFreqFactor, 4.0);
        QCOMPARE(s.originalMaxPositions, qint64(8192));
    }
    void tinyByHand()
    {
        const pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        // embed 256*64 + head 256*64 + final norm 64 + 2 layers * (norms 2*64 + q 64*64 + k,v 2*64*32
        // + o 64*64 + mlp 3*64*176) = 16384*2 + 64 + 2*(128 + 4096 + 4096 + 4096 + 33792) = 125,248
        QCOMPARE(pb::countParameters(c).total, qint64(125248));
        QCOMPARE(c.train.precision, pb::Precision::Fp32);
        QCOMPARE(c.train.seqLen, qint64(64));
        QCOMPARE(c.train.microBatch, qint64(4));
        QCOMPARE(c.data.kind, pb::DataKind::Synthetic);
        QVERIFY(c.data.learnable);
        QCOMPARE(c.train.optimizer.lr, 3e-3);
        QCOMPARE(pb::defaultPresetName(), QStringLiteral("tiny"));
    }
    void smallShape()
    {
        const pb::RunConfig c = pb::presetConfig(QStringLiteral("small"));
        QCOMPARE(c.model.layers, qint64(4));
        QCOMPARE(c.model.hiddenSize, qint64(256));
        QCOMPARE(c.train.seqLen, qint64(256));
        // embed + head 2*2048*256 = 1,048,576; final norm 256; per layer: norms 512, q 256*256 = 65,536,
        // k+v 2*256*128 = 65,536, o 65,536, mlp 3*256*688 = 528,384, so 725,504; 4 layers 2,902,016.
        QCOMPARE(pb::countParameters(c).total, qint64(1048576 + 256 + 2902016));
    }
    void everyPresetIsValidAndNamedForItsFile()
    {
        const QStringList names = pb::presetNames();
        QVERIFY2(names.size() >= 8, qPrintable(names.join(QLatin1Char(','))));
        static const QRegularExpression pattern(QStringLiteral("^[a-z0-9][a-z0-9.-]*$"));
        for (const QString &name : names) {
            QVERIFY2(pattern.match(name).hasMatch(), qPrintable(name));
            const pb::RunConfig c = pb::presetConfig(name);
            QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(name));
            QCOMPARE(QString::fromStdString(c.name), name);
            QCOMPARE(QString::fromStdString(c.model.preset), name);
            // Presets are complete files: writing them back changes nothing.
            QCOMPARE(pb::configHash(pb::runConfigFromJson(pb::toJson(c))), pb::configHash(c));
        }
    }
    void unknownPresetListsKnownOnes()
    {
        try {
            pb::presetConfig(QStringLiteral("llama-9"));
            QFAIL("expected an error");
        } catch (const pb::InvalidInputError &e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.contains(QLatin1String("unknown preset")), e.what());
            QVERIFY2(message.contains(QLatin1String("llama-3.1-8b")), e.what());
            QCOMPARE(e.code(), pb::ExitCode::InvalidInput);
        }
    }
    void loraOnPresetCountsAdapters()
    {
        // Llama-3.1-8B, LoRA r=16 on q,k,v,o: per layer 16*(4096+4096) + 2*16*(4096+1024) + 16*(4096+4096)
        // = 425,984; times 32 layers = 13,631,488 trainable.
        const pb::RunConfig c = pb::loadRunConfig(QStringLiteral("preset:llama-3.1-8b"), {QStringLiteral("train.mode=lora"), QStringLiteral("train.lora.rank=16")});
        const auto counts = pb::countParameters(c);
        QCOMPARE(counts.trainable, qint64(13631488));
        QCOMPARE(counts.total, qint64(8030261248) + 13631488);
    }
};

QTEST_GUILESS_MAIN(TestPresets)
#include "tst_presets.moc"
