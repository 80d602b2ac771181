// The model in words, as `config show`, `compare`, the report and the GUI's config form print it:
// the one-line summary (layers by attention kind, experts, parameters with the active count) and
// the attention trait of the hybrid and latent families, from the shipped presets.
#include "config/ModelTraitsText.h"
#include "config/Presets.h"
#include "config/RunConfig.h"

#include <QtTest>

Q_DECLARE_METATYPE(pb::RunConfig)

namespace {

QString attentionTrait(const pb::ModelShape &m)
{
    for (const auto &[label, value] : pb::describeModelTraits(m))
        if (label == "attention")
            return QString::fromStdString(value);
    return {};
}

pb::RunConfig withLora(pb::RunConfig c)
{
    c.train.mode = pb::TrainMode::Lora;
    return c;
}

// Qwen3.5-9B with full attention on listed layers instead of every 4th (layer_types as imported
// when they follow no interval). Five layers more run Gated DeltaNet: 5 x (67,403,968 - 58,720,768)
// parameters more (linear_attn's in_proj_qkv, _z, _b, _a, conv1d, A_log, dt_bias, norm, out_proj
// against self_attn's gated q_proj, k/v_proj, o_proj, q/k norms) = 8,997,219,264.
pb::RunConfig listedFullLayers()
{
    pb::RunConfig c = pb::presetConfig(QStringLiteral("qwen3.5-9b"));
    c.model.linear.fullLayers = pb::LayerSelection {0, {3, 15, 31}};
    return c;
}

} // namespace

class TestModelTraitsText final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void summary_data()
    {
        QTest::addColumn<pb::RunConfig>("config");
        QTest::addColumn<QString>("summary");
        QTest::addColumn<QString>("attention"); // the "attention" trait; empty: none
        const auto preset = [](const char *name) { return pb::presetConfig(QString::fromLatin1(name)); };
        // Hybrids: N Gated DeltaNet layers of L, wherever the model is described.
        QTest::newRow("qwen3-next-80b-a3b")
            << preset("qwen3-next-80b-a3b")
            << QStringLiteral("qwen3_next: 36 Gated DeltaNet layers of 48 (full attention on every 4th layer); 512 experts, 10 per token, and a shared expert; "
                              "79,674,391,296 parameters, 3,874,929,408 active per token")
            << QStringLiteral("36 Gated DeltaNet (linear_attn) layers of 48: 16 key heads of 128, 32 value heads of 128, conv 4, in_proj_qkvz + in_proj_ba; "
                              "full attention on every 4th layer");
        QTest::newRow("qwen3.5-9b") << preset("qwen3.5-9b") << QStringLiteral("qwen3_5_text: 24 Gated DeltaNet layers of 32 (full attention on every 4th layer); 8,953,803,264 parameters")
                                    << QStringLiteral("24 Gated DeltaNet (linear_attn) layers of 32: 16 key heads of 128, 32 value heads of 128, conv 4, in_proj_qkv/z/b/a; "
                                                      "full attention on every 4th layer");
        QTest::newRow("qwen3.5-9b full layers listed")
            << listedFullLayers() << QStringLiteral("qwen3_5_text: 29 Gated DeltaNet layers of 32 (full attention on layers 3, 15, 31); 8,997,219,264 parameters")
            << QStringLiteral("29 Gated DeltaNet (linear_attn) layers of 32: 16 key heads of 128, 32 value heads of 128, conv 4, in_proj_qkv/z/b/a; "
                              "full attention on layers 3, 15, 31");
        // LoRA adapters on the attention of every layer: fewer parameters train than there are.
        QTest::newRow("qwen3-next-80b-a3b lora")
            << withLora(preset("qwen3-next-80b-a3b"))
            << QStringLiteral("qwen3_next: 36 Gated DeltaNet layers of 48 (full attention on every 4th layer); 512 experts, 10 per token, and a shared expert; "
                              "79,691,533,056 parameters, 3,892,071,168 active per token, 17,141,760 trainable")
            << QStringLiteral("36 Gated DeltaNet (linear_attn) layers of 48: 16 key heads of 128, 32 value heads of 128, conv 4, in_proj_qkvz + in_proj_ba; "
                              "full attention on every 4th layer");
        // The latent and sparse families, and a dense one, for comparison.
        QTest::newRow("moonlight-16b-a3b") << preset("moonlight-16b-a3b")
                                           << QStringLiteral("deepseek_v3: 27 layers of multi-head latent attention; 64 experts, 6 per token, and a shared expert "
                                                             "(26 of 27 layers sparse); 15,960,108,544 parameters, 2,914,774,528 active per token")
                                           << QStringLiteral("multi-head latent: no query latent, key/value latent 512; q/k heads 128 + 64 rotary (interleaved pairs), v heads 128");
        QTest::newRow("mixtral-8x7b") << preset("mixtral-8x7b")
                                      << QStringLiteral("mixtral: 32 layers; 8 experts, 2 per token; 46,702,792,704 parameters, 12,879,925,248 active per token") << QString();
        QTest::newRow("gemma-3-12b") << preset("gemma-3-12b") << QStringLiteral("gemma3_text: 48 layers, 40 with a sliding window of 1024; 11,766,034,176 parameters")
                                     << QStringLiteral("sliding window of 1024 on 40 of 48 layers; full attention on every 6th layer");
        QTest::newRow("llama-3.2-1b") << preset("llama-3.2-1b") << QStringLiteral("llama: 16 layers; 1,235,814,400 parameters") << QString();
    }
    void summary()
    {
        QFETCH(pb::RunConfig, config);
        QFETCH(QString, summary);
        QFETCH(QString, attention);
        QCOMPARE(QString::fromStdString(pb::describeModelSummary(config)), summary);
        QCOMPARE(attentionTrait(config.model), attention);
    }
    void linearLayers()
    {
        const pb::ModelShape next = pb::presetConfig(QStringLiteral("qwen3-next-80b-a3b")).model;
        QCOMPARE(QString::fromStdString(pb::describeLinearLayers(next)), QStringLiteral("36 Gated DeltaNet layers of 48 (full attention on every 4th layer)"));
        pb::ModelShape allLinear = next;
        allLinear.linear.fullLayers = {};
        QCOMPARE(QString::fromStdString(pb::describeLinearLayers(allLinear)), QStringLiteral("48 Gated DeltaNet layers of 48 (no full attention)"));
        QVERIFY(pb::describeLinearLayers(pb::presetConfig(QStringLiteral("llama-3.2-1b")).model).empty());
    }
};

QTEST_GUILESS_MAIN(TestModelTraitsText)
#include "tst_model_traits_text.moc"
