// The run-config form's schedule, validation, checkpoint, data and job fields: each widget writes
// its own field (checked through the JSON names, so a widget wired to the wrong member shows), a
// config loaded into the form comes back unchanged, and a bad value turns the field's own widget
// red and unfolds the panel it sits in.
#include "config/HfImport.h"
#include "ForLooking.h"
#include "config/Presets.h"
#include "config/RunConfigForm.h"
#include "config/RunConfigJson.h"

#include <QAbstractButton>
#include <QJsonArray>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QGroupBox>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>

#include <algorithm>
#include <optional>

using namespace pb;
using namespace pb::ui;

Q_DECLARE_METATYPE(pb::RunConfig)

namespace {

QJsonValue jsonAt(const QJsonObject &root, const QString &path)
{
    QJsonValue v = root;
    for (const QString &key : path.split(QLatin1Char('.')))
        v = v.toObject().value(key);
    return v;
}

QJsonObject withJsonAt(QJsonObject root, QStringList path, const QJsonValue &value)
{
    const QString key = path.takeFirst();
    root.insert(key, path.isEmpty() ? value : QJsonValue(withJsonAt(root.value(key).toObject(), path, value)));
    return root;
}

QByteArray compact(const QJsonObject &o)
{
    return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

// Puts `value` into whichever widget shows the field. Programmatic, so it reaches greyed-out
// fields too: config() must carry every field whatever the kinds around it.
void setField(RunConfigForm &form, const QString &field, const QString &value)
{
    QWidget *w = form.fieldWidget(field);
    QVERIFY2(w, qPrintable(QStringLiteral("no widget for ") + field));
    if (auto *spin = qobject_cast<QSpinBox *>(w)) {
        spin->setValue(value.toInt());
    } else if (auto *dspin = qobject_cast<QDoubleSpinBox *>(w)) {
        dspin->setValue(value.toDouble());
    } else if (auto *combo = qobject_cast<QComboBox *>(w)) {
        if (combo->isEditable()) {
            combo->setCurrentText(value);
        } else {
            const int index = combo->findText(value);
            QVERIFY2(index >= 0, qPrintable(field + QStringLiteral(" does not offer ") + value));
            combo->setCurrentIndex(index);
        }
    } else if (auto *check = qobject_cast<QCheckBox *>(w)) {
        check->setChecked(value == QLatin1String("true"));
    } else if (auto *edit = qobject_cast<QLineEdit *>(w)) {
        edit->setText(value);
    } else {
        QFAIL(qPrintable(field + QStringLiteral(": unexpected widget type ") + QString::fromLatin1(w->metaObject()->className())));
    }
}

void applyEdits(RunConfigForm &form, const QStringList &edits)
{
    for (const QString &edit : edits) {
        const qsizetype eq = edit.indexOf(QLatin1Char('='));
        QVERIFY(eq > 0);
        setField(form, edit.left(eq), edit.mid(eq + 1));
        if (QTest::currentTestFailed())
            return;
    }
}

QStringList flaggedWidgets(const RunConfigForm &form)
{
    QStringList names;
    for (const QWidget *w : form.findChildren<QWidget *>())
        if (w->property("invalidField").toBool())
            names << w->objectName();
    names.sort();
    return names;
}

QString issueText(const RunConfigForm &form)
{
    QStringList lines;
    for (const auto &issue : form.issues())
        lines << QString::fromStdString(issue.field + ": " + issue.message);
    return lines.join(QLatin1Char('\n'));
}

RunConfig everyFieldSet()
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.kernels = KernelPath::Fused;
    c.train.schedule.kind = ScheduleKind::Linear;
    c.train.schedule.warmupSteps = 30;
    c.train.schedule.totalSteps = 777;
    c.train.schedule.minLrRatio = 0.0123456789; // finer than the spin box shows
    c.validation.everySteps = 25;
    c.validation.batches = 3;
    c.checkpoint.everySteps = 40;
    c.checkpoint.dir = "/tmp/pilot checkpoints";
    c.data.kind = DataKind::TokenFile;
    c.data.path = "/data/train.u32";
    c.data.tokenDtype = "uint32";
    c.data.lengths = LengthDistribution::FromFile;
    c.data.minLength = 8;
    c.data.lengthsFile = "/data/lengths.txt";
    c.data.longestFirst = false;
    c.data.learnable = false;
    c.data.syntheticSamples = 999;
    c.data.validationFraction = 25;
    c.job.unit = JobUnit::Epochs;
    c.job.amount = 2.75;
    c.job.datasetTokens = 3.3e11;
    c.job.deadlineHours = 36.5;
    return c;
}

RunConfig noDeadlineHugeJob()
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.schedule.kind = ScheduleKind::Cosine;
    c.train.schedule.totalSteps = 1;
    c.train.schedule.minLrRatio = 0;
    c.data.kind = DataKind::Jsonl;
    c.data.path = "/data/chat.jsonl";
    c.data.tokenDtype = "npy";
    c.data.lengths = LengthDistribution::Uniform;
    c.data.minLength = 16;
    c.job.unit = JobUnit::Tokens;
    c.job.amount = 1.2345678901234567e13;
    c.job.datasetTokens = 0;
    c.job.deadlineHours.reset();
    return c;
}

// tests/data/hf/<dir>/config.json through `config import-hf`.
RunConfig imported(const char *dir)
{
    QFile f(QStringLiteral(PB_TEST_DATA_DIR "/hf/") + QLatin1String(dir) + QStringLiteral("/config.json"));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read tests/data/hf/%s/config.json", dir);
    return hfRunConfig(QJsonDocument::fromJson(f.readAll()).object(), "config.json");
}

// Qwen3.5-9B with full attention on listed layers (layer_types that follow no interval) and LoRA.
RunConfig listedFullLayers()
{
    RunConfig c = presetConfig(QStringLiteral("qwen3.5-9b"));
    c.model.linear.fullLayers = LayerSelection {0, {3, 15, 31}};
    c.train.mode = TrainMode::Lora;
    return c;
}

} // namespace

class TestRunConfigForm final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests")); }

    void editWritesItsField_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QJsonValue>("expected");
        // From tiny: constant schedule 0/200/1, no validation or checkpoints, 512 fixed-length
        // synthetic samples, a job of 1e6 tokens without deadline.
        QTest::newRow("schedule kind") << QStringLiteral("train.schedule.kind") << QStringLiteral("cosine") << QJsonValue(QStringLiteral("cosine"));
        QTest::newRow("warmup steps") << QStringLiteral("train.schedule.warmup_steps") << QStringLiteral("20") << QJsonValue(20.0);
        QTest::newRow("total steps") << QStringLiteral("train.schedule.total_steps") << QStringLiteral("500") << QJsonValue(500.0);
        QTest::newRow("min lr ratio") << QStringLiteral("train.schedule.min_lr_ratio") << QStringLiteral("0.05") << QJsonValue(0.05);
        QTest::newRow("validation every") << QStringLiteral("validation.every_steps") << QStringLiteral("50") << QJsonValue(50.0);
        QTest::newRow("validation batches") << QStringLiteral("validation.batches") << QStringLiteral("4") << QJsonValue(4.0);
        QTest::newRow("checkpoint every") << QStringLiteral("checkpoint.every_steps") << QStringLiteral("100") << QJsonValue(100.0);
        QTest::newRow("checkpoint dir") << QStringLiteral("checkpoint.dir") << QStringLiteral("/tmp/ckpt") << QJsonValue(QStringLiteral("/tmp/ckpt"));
        QTest::newRow("data kind tokens") << QStringLiteral("data.kind") << QStringLiteral("tokens") << QJsonValue(QStringLiteral("tokens"));
        QTest::newRow("data kind jsonl") << QStringLiteral("data.kind") << QStringLiteral("jsonl") << QJsonValue(QStringLiteral("jsonl"));
        QTest::newRow("data path") << QStringLiteral("data.path") << QStringLiteral("/data/train.bin") << QJsonValue(QStringLiteral("/data/train.bin"));
        QTest::newRow("token dtype") << QStringLiteral("data.token_dtype") << QStringLiteral("uint32") << QJsonValue(QStringLiteral("uint32"));
        QTest::newRow("lengths uniform") << QStringLiteral("data.lengths") << QStringLiteral("uniform") << QJsonValue(QStringLiteral("uniform"));
        QTest::newRow("lengths file") << QStringLiteral("data.lengths") << QStringLiteral("file") << QJsonValue(QStringLiteral("file"));
        QTest::newRow("min length") << QStringLiteral("data.min_length") << QStringLiteral("16") << QJsonValue(16.0);
        QTest::newRow("lengths file path") << QStringLiteral("data.lengths_file") << QStringLiteral("/data/lengths.txt") << QJsonValue(QStringLiteral("/data/lengths.txt"));
        QTest::newRow("longest first") << QStringLiteral("data.longest_first") << QStringLiteral("false") << QJsonValue(false);
        QTest::newRow("learnable") << QStringLiteral("data.learnable") << QStringLiteral("false") << QJsonValue(false);
        QTest::newRow("synthetic samples") << QStringLiteral("data.synthetic_samples") << QStringLiteral("2048") << QJsonValue(2048.0);
        QTest::newRow("validation per mille") << QStringLiteral("data.validation_per_mille") << QStringLiteral("50") << QJsonValue(50.0);
        QTest::newRow("job unit") << QStringLiteral("job.unit") << QStringLiteral("epochs") << QJsonValue(QStringLiteral("epochs"));
        QTest::newRow("job amount 1e13") << QStringLiteral("job.amount") << QStringLiteral("1e13") << QJsonValue(1e13);
        QTest::newRow("job amount in digits") << QStringLiteral("job.amount") << QStringLiteral("2_500_000_000_000") << QJsonValue(2.5e12);
        QTest::newRow("dataset tokens") << QStringLiteral("job.dataset_tokens") << QStringLiteral("250000000") << QJsonValue(2.5e8);
        QTest::newRow("deadline") << QStringLiteral("job.deadline_hours") << QStringLiteral("36.5") << QJsonValue(36.5);
        QTest::newRow("kernels") << QStringLiteral("train.kernels") << QStringLiteral("fused") << QJsonValue(QStringLiteral("fused"));
        // The model's traits, under Architecture.
        QTest::newRow("sliding window") << QStringLiteral("model.sliding_window") << QStringLiteral("32") << QJsonValue(32.0);
        QTest::newRow("norm placement") << QStringLiteral("model.norm_placement") << QStringLiteral("sandwich") << QJsonValue(QStringLiteral("sandwich"));
        QTest::newRow("norm unit offset") << QStringLiteral("model.norm_unit_offset") << QStringLiteral("true") << QJsonValue(true);
        QTest::newRow("partial rotary") << QStringLiteral("model.partial_rotary") << QStringLiteral("0.5") << QJsonValue(0.5);
        QTest::newRow("final softcap") << QStringLiteral("model.final_softcap") << QStringLiteral("30") << QJsonValue(30.0);
        QTest::newRow("attention softcap") << QStringLiteral("model.attention_softcap") << QStringLiteral("50") << QJsonValue(50.0);
        QTest::newRow("embedding scale") << QStringLiteral("model.embedding_scale") << QStringLiteral("12") << QJsonValue(12.0);
        QTest::newRow("residual scale") << QStringLiteral("model.residual_scale") << QStringLiteral("0.22") << QJsonValue(0.22);
        QTest::newRow("logits divisor") << QStringLiteral("model.logits_divisor") << QStringLiteral("8") << QJsonValue(8.0);
    }
    void editWritesItsField()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QJsonValue, expected);
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        QVERIFY(form.fieldWidget(field));
        QCOMPARE(form.fieldWidget(field)->objectName(), field);
        const QJsonObject before = toJson(form.config());
        QVERIFY2(jsonAt(before, field) != expected, "the row must change the field");

        QSignalSpy changed(&form, &RunConfigForm::changed);
        setField(form, field, value);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(changed.count() > 0);
        const QJsonObject after = toJson(form.config());
        QVERIFY2(jsonAt(after, field) == expected, compact(after).constData());
        // The widget writes its own field and no other.
        const QJsonObject wanted = withJsonAt(before, field.split(QLatin1Char('.')), expected);
        QVERIFY2(after == wanted, (compact(after) + "\n != \n" + compact(wanted)).constData());
    }

    void roundTrip_data()
    {
        QTest::addColumn<RunConfig>("config");
        QTest::newRow("every field set") << everyFieldSet();
        QTest::newRow("no deadline, huge job") << noDeadlineHugeJob();
        // The dense families' traits come back unchanged, those the form does not show included.
        for (const char *preset : {"gemma-3-12b", "gemma-2-9b", "olmo-2-7b", "olmo-3-7b", "phi-4", "glm-4-9b", "smollm3-3b", "granite-3.3-8b", "ministral-3-8b", "gemma-4-31b"})
            QTest::newRow(preset) << presetConfig(QString::fromLatin1(preset));
        // The sparse families' routing, stacked experts and latent attention likewise.
        for (const char *preset : {"gpt-oss-20b", "moonlight-16b-a3b", "llama-4-scout-17b-16e", "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b"})
            QTest::newRow(preset) << presetConfig(QString::fromLatin1(preset));
        // The hybrids' linear attention and output gate: the presets, Qwen3-Next-80B-A3B's config.json
        // as imported, and full layers given as a list.
        for (const char *preset : {"qwen3-next-80b-a3b", "qwen3.5-9b"})
            QTest::newRow(preset) << presetConfig(QString::fromLatin1(preset));
        QTest::newRow("qwen3-next-80b-a3b imported") << imported("qwen3-next-80b-a3b");
        QTest::newRow("qwen3.5-9b full layers listed, lora") << listedFullLayers();
    }
    // A hybrid's group shows for a model with Gated DeltaNet layers only; each of its fields writes
    // its own config path and no other; the summary follows the edits.
    void linearGroupEditWritesItsField_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QJsonValue>("expected");
        QTest::newRow("full every") << QStringLiteral("model.linear_attention.full_layers.every") << QStringLiteral("2") << QJsonValue(2.0);
        QTest::newRow("full layers") << QStringLiteral("model.linear_attention.full_layers.layers") << QStringLiteral("0, 5 9") << QJsonValue(QJsonArray {0, 5, 9});
        QTest::newRow("key heads") << QStringLiteral("model.linear_attention.key_heads") << QStringLiteral("8") << QJsonValue(8.0);
        QTest::newRow("value heads") << QStringLiteral("model.linear_attention.value_heads") << QStringLiteral("64") << QJsonValue(64.0);
        QTest::newRow("key head dim") << QStringLiteral("model.linear_attention.key_head_dim") << QStringLiteral("64") << QJsonValue(64.0);
        QTest::newRow("value head dim") << QStringLiteral("model.linear_attention.value_head_dim") << QStringLiteral("256") << QJsonValue(256.0);
        QTest::newRow("conv kernel") << QStringLiteral("model.linear_attention.conv_kernel") << QStringLiteral("3") << QJsonValue(3.0);
        QTest::newRow("layout") << QStringLiteral("model.linear_attention.layout") << QStringLiteral("qkv_z_b_a") << QJsonValue(QStringLiteral("qkv_z_b_a"));
        QTest::newRow("output gate") << QStringLiteral("model.attention_output_gate") << QStringLiteral("false") << QJsonValue(QJsonValue::Undefined);
    }
    void linearGroupEditWritesItsField()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QJsonValue, expected);
        RunConfigForm form;
        form.setConfig(imported("qwen3-next-80b-a3b"));
        QVERIFY(form.fieldWidget(field));
        QCOMPARE(form.fieldWidget(field)->objectName(), field);
        QVERIFY2(form.fieldWidget(field)->toolTip().contains(QLatin1String("Config path: ") + field), qPrintable(form.fieldWidget(field)->toolTip()));
        const QJsonObject before = toJson(form.config());
        QVERIFY2(jsonAt(before, field) != expected, "the row must change the field");
        QSignalSpy changed(&form, &RunConfigForm::changed);
        setField(form, field, value);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(changed.count() > 0);
        const QJsonObject after = toJson(form.config());
        QVERIFY2(jsonAt(after, field) == expected, compact(after).constData());
        // The widget writes its own field and no other (a trait at its default is not written).
        QJsonObject wanted = withJsonAt(before, field.split(QLatin1Char('.')), expected);
        if (expected.isUndefined()) {
            QJsonObject model = wanted.value(QStringLiteral("model")).toObject();
            model.remove(field.section(QLatin1Char('.'), 1));
            wanted.insert(QStringLiteral("model"), model);
        }
        QVERIFY2(after == wanted, (compact(after) + "\n != \n" + compact(wanted)).constData());
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
    }
    void linearGroupShowsWhereRelevant()
    {
        RunConfigForm form;
        form.setExpanded(true);
        form.resize(1100, 1000);
        form.show();
        QVERIFY(QTest::qWaitForWindowExposed(&form));
        auto *group = form.findChild<QGroupBox *>(QStringLiteral("linearAttentionGroup"));
        QVERIFY(group);
        QWidget *keyHeads = form.fieldWidget(QStringLiteral("model.linear_attention.key_heads"));
        QVERIFY(keyHeads);
        for (const char *preset : {"tiny", "moonlight-16b-a3b", "qwen3-30b-a3b", "gemma-3-12b"}) {
            form.setConfig(presetConfig(QString::fromLatin1(preset)));
            QVERIFY2(!group->isVisible(), preset);
        }
        const RunConfig next = imported("qwen3-next-80b-a3b");
        form.setConfig(next);
        QVERIFY(group->isVisible() && keyHeads->isVisible());
        auto *summary = form.findChild<QLabel *>(QStringLiteral("linearAttentionSummary"));
        QVERIFY(summary);
        QCOMPARE(summary->text(), QStringLiteral("36 Gated DeltaNet layers of 48 (full attention on every 4th layer)"));
        auto *traits = form.findChild<QLabel *>(QStringLiteral("traitsSummary"));
        QVERIFY2(traits->text().contains(QLatin1String("36 Gated DeltaNet (linear_attn) layers of 48")), qPrintable(traits->text()));
        QCOMPARE(static_cast<QSpinBox *>(keyHeads)->value(), 16);
        QCOMPARE(static_cast<QComboBox *>(form.fieldWidget(QStringLiteral("model.linear_attention.layout")))->currentText(), QStringLiteral("qkvz_ba"));
        QVERIFY(static_cast<QCheckBox *>(form.fieldWidget(QStringLiteral("model.attention_output_gate")))->isChecked());
        // An edit lands in the config and the summaries follow it.
        setField(form, QStringLiteral("model.linear_attention.full_layers.every"), QStringLiteral("2"));
        QCOMPARE(form.config().model.linear.fullLayers.every, int64_t(2));
        QCOMPARE(form.config().model.fullAttentionLayers(), int64_t(24));
        QCOMPARE(summary->text(), QStringLiteral("24 Gated DeltaNet layers of 48 (full attention on every 2nd layer)"));
        QVERIFY2(traits->text().contains(QLatin1String("24 Gated DeltaNet (linear_attn) layers of 48")), qPrintable(traits->text()));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        // What the validator refuses is marked on its own field: value heads not a multiple of the key heads.
        setField(form, QStringLiteral("model.linear_attention.value_heads"), QStringLiteral("24"));
        QVERIFY(!form.isValid());
        QCOMPARE(flaggedWidgets(form), QStringList {QStringLiteral("model.linear_attention.value_heads")});
        setField(form, QStringLiteral("model.linear_attention.value_heads"), QStringLiteral("32"));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        // A list that does not read: the field is red, the config keeps the last list that did.
        setField(form, QStringLiteral("model.linear_attention.full_layers.layers"), QStringLiteral("3, seven"));
        QCOMPARE(flaggedWidgets(form), QStringList {QStringLiteral("model.linear_attention.full_layers.layers")});
        QVERIFY(form.config().model.linear.fullLayers.layers.empty());
        setField(form, QStringLiteral("model.linear_attention.full_layers.layers"), QStringLiteral("3"));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        QCOMPARE(form.config().model.linear.fullLayers.layers, std::vector<int64_t> {3});
        setField(form, QStringLiteral("model.linear_attention.full_layers.layers"), QString());
        setField(form, QStringLiteral("model.linear_attention.full_layers.every"), QStringLiteral("4"));
        QCOMPARE(configHash(form.config()), configHash(next));
        QVERIFY(saveForLooking(form, QStringLiteral("run-config-form-qwen3-next.png")));
        // Back to a model without it: hidden, and its config keeps its hash.
        const RunConfig moonlight = presetConfig(QStringLiteral("moonlight-16b-a3b"));
        form.setConfig(moonlight);
        QVERIFY(!group->isVisible());
        QCOMPARE(configHash(form.config()), configHash(moonlight));
    }
    // Gemma 4's global layers: the group shows for such a model only, each field writes its own
    // config path, the summary follows the edits, a bad value is marked on its field, and another
    // model keeps its hash.
    void globalGroupShowsWhereRelevant()
    {
        RunConfigForm form;
        form.setExpanded(true);
        form.resize(1100, 1000);
        form.show();
        QVERIFY(QTest::qWaitForWindowExposed(&form));
        auto *group = form.findChild<QGroupBox *>(QStringLiteral("globalLayersGroup"));
        QVERIFY(group);
        for (const char *preset : {"tiny", "gemma-3-12b", "qwen3-next-80b-a3b"}) {
            form.setConfig(presetConfig(QString::fromLatin1(preset)));
            QVERIFY2(!group->isVisible(), preset);
        }
        const RunConfig gemma4 = presetConfig(QStringLiteral("gemma-4-31b"));
        form.setConfig(gemma4);
        QVERIFY(group->isVisible());
        auto *summary = form.findChild<QLabel *>(QStringLiteral("globalLayersSummary"));
        QVERIFY(summary);
        QCOMPARE(summary->text(), QStringLiteral("10 of 60 layers global: heads of 512, 4 key/value heads, values from k_proj; sliding layers: heads of 256, 16 key/value heads"));
        for (const char *field : {"model.global_head_dim", "model.global_kv_heads", "model.global_values_from_keys", "model.rope_proportional", "model.value_norm", "model.layer_scalar"}) {
            QWidget *w = form.fieldWidget(QString::fromLatin1(field));
            QVERIFY2(w && w->isVisible(), field);
            QVERIFY2(w->toolTip().contains(QLatin1String("Config path: ") + QLatin1String(field)), qPrintable(w->toolTip()));
        }
        QCOMPARE(static_cast<QSpinBox *>(form.fieldWidget(QStringLiteral("model.global_head_dim")))->value(), 512);
        // An edit writes its own field and no other; the summary follows.
        const QJsonObject before = toJson(form.config());
        setField(form, QStringLiteral("model.global_kv_heads"), QStringLiteral("8"));
        QCOMPARE(form.config().model.traits.globalKvHeads, int64_t(8));
        QVERIFY(toJson(form.config()) == withJsonAt(before, {QStringLiteral("model"), QStringLiteral("global_kv_heads")}, QJsonValue(8.0)));
        QVERIFY2(summary->text().contains(QLatin1String("8 key/value heads, values from k_proj")), qPrintable(summary->text()));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        // What the validator refuses is marked on its own field: 5 global heads do not divide 32.
        setField(form, QStringLiteral("model.global_kv_heads"), QStringLiteral("5"));
        QVERIFY(!form.isValid());
        QCOMPARE(flaggedWidgets(form), QStringList {QStringLiteral("model.global_kv_heads")});
        setField(form, QStringLiteral("model.global_kv_heads"), QStringLiteral("4"));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        setField(form, QStringLiteral("model.layer_scalar"), QStringLiteral("false"));
        QVERIFY(!form.config().model.traits.layerScalar);
        setField(form, QStringLiteral("model.layer_scalar"), QStringLiteral("true"));
        QCOMPARE(configHash(form.config()), configHash(gemma4));
        QVERIFY(saveForLooking(form, QStringLiteral("run-config-form-gemma4.png")));
        // E2B: the per-layer input and the shared key/value layers in the same group and summary.
        const RunConfig e2b = presetConfig(QStringLiteral("gemma-4-e2b"));
        form.setConfig(e2b);
        QVERIFY(group->isVisible());
        QVERIFY2(summary->text().endsWith(QLatin1String("; layers 15-34 read the keys and values of layers 13, 14, their MLPs 12288 wide; a per-layer input of 256 in every layer")),
                 qPrintable(summary->text()));
        for (const char *field : {"model.per_layer_input", "model.per_layer_vocab", "model.kv_shared_layers", "model.double_wide_mlp"}) {
            QWidget *w = form.fieldWidget(QString::fromLatin1(field));
            QVERIFY2(w && w->isVisible(), field);
            QVERIFY2(w->toolTip().contains(QLatin1String("Config path: ") + QLatin1String(field)), qPrintable(w->toolTip()));
        }
        QCOMPARE(configHash(form.config()), configHash(e2b));
        setField(form, QStringLiteral("model.kv_shared_layers"), QStringLiteral("10"));
        QCOMPARE(form.config().model.traits.kvSharedLayers, int64_t(10));
        QVERIFY2(summary->text().contains(QLatin1String("layers 25-34 read the keys and values of layers 23, 24")), qPrintable(summary->text()));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        // Every layer shared leaves none to make keys and values: marked on its field.
        setField(form, QStringLiteral("model.kv_shared_layers"), QStringLiteral("35"));
        QVERIFY(!form.isValid());
        QCOMPARE(flaggedWidgets(form), QStringList {QStringLiteral("model.kv_shared_layers")});
        setField(form, QStringLiteral("model.kv_shared_layers"), QStringLiteral("20"));
        QCOMPARE(configHash(form.config()), configHash(e2b));
        // The last layer's full attention (model.last_layer_global) is an architecture check beside
        // the pattern: at 12 layers (every 5th global) layer 11 is global only with it.
        QWidget *lastGlobal = form.fieldWidget(QStringLiteral("model.last_layer_global"));
        QVERIFY(lastGlobal && lastGlobal->isVisible() && lastGlobal->isEnabled());
        QVERIFY(static_cast<QCheckBox *>(lastGlobal)->isChecked());
        setField(form, QStringLiteral("model.layers"), QStringLiteral("12"));
        setField(form, QStringLiteral("model.kv_shared_layers"), QStringLiteral("2"));
        QVERIFY2(summary->text().startsWith(QLatin1String("3 of 12 layers global")), qPrintable(summary->text()));
        setField(form, QStringLiteral("model.last_layer_global"), QStringLiteral("false"));
        QVERIFY(!form.config().model.traits.lastLayerGlobal);
        QVERIFY2(summary->text().startsWith(QLatin1String("2 of 12 layers global")), qPrintable(summary->text()));
        form.setConfig(e2b);
        QVERIFY(saveForLooking(form, QStringLiteral("run-config-form-gemma4-e2b.png")));
        const RunConfig gemma3 = presetConfig(QStringLiteral("gemma-3-12b"));
        form.setConfig(gemma3);
        QVERIFY(!group->isVisible());
        QCOMPARE(configHash(form.config()), configHash(gemma3));
    }
    // The experts' routing rows show for a model with experts, the latent rows for latent attention,
    // the group for neither is hidden; an edit there writes its field.
    void sparseGroupShowsWhereRelevant()
    {
        RunConfigForm form;
        form.setExpanded(true);
        form.resize(1100, 900);
        form.show();
        QVERIFY(QTest::qWaitForWindowExposed(&form));
        QWidget *scoring = form.fieldWidget(QStringLiteral("model.moe.scoring"));
        QWidget *kvRank = form.fieldWidget(QStringLiteral("model.latent_attention.kv_lora_rank"));
        QVERIFY(scoring && kvRank);
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        QVERIFY2(!scoring->isVisible() && !kvRank->isVisible(), "a dense model shows no routing or latent rows");
        form.setConfig(presetConfig(QStringLiteral("gpt-oss-20b")));
        QVERIFY2(scoring->isVisible() && !kvRank->isVisible(), "gpt-oss: experts, no latent attention");
        RunConfig moonlight = presetConfig(QStringLiteral("moonlight-16b-a3b"));
        form.setConfig(moonlight);
        QVERIFY2(scoring->isVisible() && kvRank->isVisible(), "Moonlight: experts and latent attention");
        QCOMPARE(static_cast<QComboBox *>(scoring)->currentText(), QStringLiteral("sigmoid"));
        setField(form, QStringLiteral("model.latent_attention.kv_lora_rank"), QStringLiteral("256"));
        setField(form, QStringLiteral("model.moe.routed_scale"), QStringLiteral("2.5"));
        const RunConfig edited = form.config();
        QCOMPARE(edited.model.latent.kvLoraRank, int64_t(256));
        QCOMPARE(edited.model.moe.routedScale, 2.5);
        QCOMPARE(edited.model.latent.qkRopeHeadDim, moonlight.model.latent.qkRopeHeadDim);
        QVERIFY(saveForLooking(form, QStringLiteral("run-config-form-moonlight.png")));
        // Back to a dense model: the rows hide and its config keeps its hash.
        const RunConfig tiny = presetConfig(QStringLiteral("tiny"));
        form.setConfig(tiny);
        QVERIFY(!kvRank->isVisible());
        QCOMPARE(configHash(form.config()), configHash(tiny));
    }
    // The traits in words under "Architecture", updated as a trait is edited.
    void traitsSummary()
    {
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("gemma-3-12b")));
        auto *summary = form.findChild<QLabel *>(QStringLiteral("traitsSummary"));
        QVERIFY(summary);
        QVERIFY2(summary->text().contains(QLatin1String("sliding window of 1024 on 40 of 48 layers; full attention on every 6th layer")), qPrintable(summary->text()));
        QVERIFY2(summary->text().contains(QLatin1String("sandwich")), qPrintable(summary->text()));
        setField(form, QStringLiteral("model.sliding_window"), QStringLiteral("512"));
        QVERIFY2(summary->text().contains(QLatin1String("sliding window of 512")), qPrintable(summary->text()));
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        QVERIFY2(summary->text().startsWith(QLatin1String("Llama's")), qPrintable(summary->text()));
        QVERIFY2(!form.fieldWidget(QStringLiteral("model.global_layers.every"))->isEnabled(), "no window: nothing to keep full");
        if (screenshotsWanted()) {
            form.setConfig(presetConfig(QStringLiteral("gemma-3-12b")));
            form.setExpanded(true);
            form.resize(1100, 900);
            form.show();
            QVERIFY(QTest::qWaitForWindowExposed(&form));
            QVERIFY(saveForLooking(form, QStringLiteral("run-config-form-gemma3.png")));
        }
    }
    void roundTrip()
    {
        QFETCH(RunConfig, config);
        RunConfigForm form;
        // Another config first, so a widget that setConfig forgets keeps a value that shows.
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        form.setConfig(config);
        const QJsonObject back = toJson(form.config());
        QVERIFY2(back == toJson(config), (compact(back) + "\n != \n" + compact(toJson(config))).constData());
        QCOMPARE(configHash(form.config()), configHash(config));
        QCOMPARE(form.config().job.deadlineHours.has_value(), config.job.deadlineHours.has_value());
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        QVERIFY2(!form.isExpanded(), "a valid config leaves the panel folded");
    }

    void badValueMarksItsWidget_data()
    {
        QTest::addColumn<QStringList>("edits");
        QTest::addColumn<QString>("flagged");
        QTest::addColumn<QStringList>("fix");
        const auto row = [](const char *name, QStringList edits, const char *flagged, QStringList fix) {
            QTest::newRow(name) << edits << QString::fromLatin1(flagged) << fix;
        };
        row("validation without batches", {QStringLiteral("validation.every_steps=10")}, "validation.batches", {QStringLiteral("validation.batches=2")});
        row("zero total steps", {QStringLiteral("train.schedule.total_steps=0")}, "train.schedule.total_steps", {QStringLiteral("train.schedule.total_steps=10")});
        row("min lr ratio above 1", {QStringLiteral("train.schedule.min_lr_ratio=1.5")}, "train.schedule.min_lr_ratio", {QStringLiteral("train.schedule.min_lr_ratio=0.5")});
        row("token file without path", {QStringLiteral("data.kind=tokens")}, "data.path", {QStringLiteral("data.path=/data/train.bin")});
        row("unknown token dtype", {QStringLiteral("data.kind=tokens"), QStringLiteral("data.path=/x.bin"), QStringLiteral("data.token_dtype=int8")}, "data.token_dtype",
            {QStringLiteral("data.token_dtype=npy")});
        row("lengths file missing", {QStringLiteral("data.lengths=file")}, "data.lengths_file", {QStringLiteral("data.lengths_file=/data/lengths.txt")});
        row("min length over seq len", {QStringLiteral("data.lengths=uniform"), QStringLiteral("data.min_length=100")}, "data.min_length", {QStringLiteral("data.min_length=32")});
        row("no synthetic samples", {QStringLiteral("data.synthetic_samples=0")}, "data.synthetic_samples", {QStringLiteral("data.synthetic_samples=64")});
        row("validation per mille 1000", {QStringLiteral("data.validation_per_mille=1000")}, "data.validation_per_mille", {QStringLiteral("data.validation_per_mille=999")});
        row("zero amount", {QStringLiteral("job.amount=0")}, "job.amount", {QStringLiteral("job.amount=1e13")});
        row("amount not a number", {QStringLiteral("job.amount=lots")}, "job.amount", {QStringLiteral("job.amount=5e9")});
        row("epochs without dataset tokens", {QStringLiteral("job.unit=epochs")}, "job.dataset_tokens", {QStringLiteral("job.dataset_tokens=1e9")});
        row("negative dataset tokens", {QStringLiteral("job.dataset_tokens=-1")}, "job.dataset_tokens", {QStringLiteral("job.dataset_tokens=0")});
        row("negative deadline", {QStringLiteral("job.deadline_hours=-2")}, "job.deadline_hours", {QStringLiteral("job.deadline_hours=")});
        row("zero deadline", {QStringLiteral("job.deadline_hours=0")}, "job.deadline_hours", {QStringLiteral("job.deadline_hours=12")});
        row("deadline not a number", {QStringLiteral("job.deadline_hours=soon")}, "job.deadline_hours", {QStringLiteral("job.deadline_hours= ")});
        row("full layers without a window", {QStringLiteral("model.global_layers.every=2")}, "model.global_layers.every", {QStringLiteral("model.sliding_window=16")});
        row("rotary share above 1", {QStringLiteral("model.partial_rotary=1.5")}, "model.partial_rotary", {QStringLiteral("model.partial_rotary=0.5")});
        row("soft-cap not a number", {QStringLiteral("model.final_softcap=high")}, "model.final_softcap", {QStringLiteral("model.final_softcap=30")});
    }
    void badValueMarksItsWidget()
    {
        QFETCH(QStringList, edits);
        QFETCH(QString, flagged);
        QFETCH(QStringList, fix);
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        QVERIFY(!form.isExpanded());
        QWidget *w = form.fieldWidget(flagged);
        QVERIFY(w);
        QVERIFY(!w->isVisibleTo(&form));
        const QString help = w->toolTip(); // the field's own help, and the config path it sets
        QVERIFY2(help.endsWith(QStringLiteral("Config path: ") + flagged), qPrintable(help));

        applyEdits(form, edits);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(!form.isValid());
        QCOMPARE(flaggedWidgets(form), QStringList {flagged});
        QVERIFY2(w->toolTip() != help && w->toolTip().endsWith(help), "the rule is the field's tooltip, above its help");
        QVERIFY(w->styleSheet().contains(QStringLiteral("background-color")));
        QVERIFY(std::any_of(form.issues().begin(), form.issues().end(), [&](const ValidationIssue &i) { return QString::fromStdString(i.field) == flagged; }));
        QVERIFY2(form.isExpanded() && w->isVisibleTo(&form), "a problem in the folded panel unfolds it");
        QVERIFY2(w->isEnabled(), "a red field can be put right");

        applyEdits(form, fix);
        if (QTest::currentTestFailed())
            return;
        QVERIFY2(form.isValid(), qPrintable(issueText(form)));
        QVERIFY(!w->property("invalidField").toBool());
        QCOMPARE(w->toolTip(), help); // the rule is gone, the help is back
    }

    void deadlineTypedByKeyboard()
    {
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        form.setExpanded(true);
        auto *deadline = qobject_cast<QLineEdit *>(form.fieldWidget(QStringLiteral("job.deadline_hours")));
        QVERIFY(deadline);
        QVERIFY(!form.config().job.deadlineHours);
        QTest::keyClicks(deadline, QStringLiteral("-3"));
        QVERIFY(deadline->property("invalidField").toBool());
        QTest::keyClick(deadline, Qt::Key_Home);
        QTest::keyClick(deadline, Qt::Key_Delete);
        QVERIFY(form.isValid());
        QVERIFY(form.config().job.deadlineHours == 3.0);
        QTest::keyClick(deadline, Qt::Key_End);
        QTest::keyClick(deadline, Qt::Key_Backspace);
        QVERIFY(!form.config().job.deadlineHours);
    }

    void kindsEnableTheirFields()
    {
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        const auto enabled = [&](const char *field) { return form.fieldWidget(QString::fromLatin1(field))->isEnabled(); };
        QVERIFY(!enabled("data.path"));
        QVERIFY(!enabled("data.token_dtype"));
        QVERIFY(enabled("data.synthetic_samples"));
        QVERIFY(enabled("data.learnable"));
        QVERIFY(!enabled("data.min_length"));
        QVERIFY(!enabled("data.lengths_file"));
        QVERIFY(!enabled("validation.batches"));

        setField(form, QStringLiteral("data.kind"), QStringLiteral("tokens"));
        QVERIFY(enabled("data.path"));
        QVERIFY(enabled("data.token_dtype"));
        QVERIFY(!enabled("data.synthetic_samples"));
        QVERIFY(!enabled("data.learnable"));
        setField(form, QStringLiteral("data.kind"), QStringLiteral("jsonl"));
        QVERIFY(enabled("data.path"));
        QVERIFY(!enabled("data.token_dtype"));
        setField(form, QStringLiteral("data.lengths"), QStringLiteral("uniform"));
        QVERIFY(enabled("data.min_length"));
        QVERIFY(!enabled("data.lengths_file"));
        setField(form, QStringLiteral("data.lengths"), QStringLiteral("file"));
        QVERIFY(!enabled("data.min_length"));
        QVERIFY(enabled("data.lengths_file"));
        setField(form, QStringLiteral("validation.every_steps"), QStringLiteral("5"));
        QVERIFY(enabled("validation.batches"));
    }

    void panelFoldsAndUnfolds()
    {
        RunConfigForm form;
        form.setConfig(presetConfig(QStringLiteral("tiny")));
        QWidget *schedule = form.fieldWidget(QStringLiteral("train.schedule.kind"));
        QVERIFY(schedule);
        QVERIFY(!form.isExpanded());
        QVERIFY(!schedule->isVisibleTo(&form));
        QVERIFY(form.fieldWidget(QStringLiteral("train.seq_len"))->isVisibleTo(&form));
        auto *toggle = form.findChild<QAbstractButton *>(QStringLiteral("moreSettingsToggle"));
        QVERIFY(toggle);
        toggle->click();
        QVERIFY(form.isExpanded());
        QVERIFY(schedule->isVisibleTo(&form));
        toggle->click();
        QVERIFY(!form.isExpanded());
        QVERIFY(!schedule->isVisibleTo(&form));
    }
};

QTEST_MAIN(TestRunConfigForm)
#include "tst_run_config_form.moc"
