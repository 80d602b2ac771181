// The configuration view on real widgets: a bad value turns its field red with the rule as the
// tooltip; changing the sequence length, precision or LoRA rank changes the budget bars; a config
// saved to a file loads back.
#include "config/ConfigView.h"
#include "config/MemoryBudgetWidget.h"
#include "config/Presets.h"
#include "config/RunConfigForm.h"
#include "estimate/CardCapacities.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryStore.h"

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QImage>
#include <QtTest>

using namespace pb;
using namespace pb::ui;

namespace {

QSpinBox *spin(ConfigView &view, const char *field)
{
    auto *w = view.findChild<QSpinBox *>(QString::fromLatin1(field));
    if (!w)
        qFatal("no spin box %s", field);
    return w;
}

const MemoryEstimate &estimateOf(const ConfigView &view, size_t card)
{
    return *view.budget()->budgets().at(card).estimate;
}

} // namespace

class TestConfigView final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { QCoreApplication::setOrganizationName(QStringLiteral("pilotbench-tests")); }

    void badValueShowsError_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<int>("bad");
        QTest::addColumn<int>("good");
        // tiny: 4 heads, 2 KV heads, max_positions 256, seq_len 64.
        QTest::newRow("kv heads not dividing heads") << QStringLiteral("model.kv_heads") << 3 << 2;
        QTest::newRow("zero sequence length") << QStringLiteral("train.seq_len") << 0 << 64;
        QTest::newRow("zero micro-batch") << QStringLiteral("train.micro_batch") << 0 << 4;
        QTest::newRow("zero layers") << QStringLiteral("model.layers") << 0 << 2;
    }
    void badValueShowsError()
    {
        QFETCH(QString, field);
        QFETCH(int, bad);
        QFETCH(int, good);
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        QVERIFY(view.isValid());
        QSpinBox *box = spin(view, field.toLatin1().constData());
        const QString help = QStringLiteral("Config path: ") + field; // every field names what it sets
        QCOMPARE(box->toolTip(), help);

        box->setValue(bad);
        QVERIFY(!view.isValid());
        QVERIFY(box->property("invalidField").toBool());
        QVERIFY2(!box->toolTip().isEmpty(), "the rule is the field's tooltip");
        QVERIFY(box->styleSheet().contains(QStringLiteral("background-color")));
        const auto *issues = view.findChild<QLabel *>(QStringLiteral("issueLabel"));
        QVERIFY(issues->text().contains(field));
        QVERIFY(view.budget()->budgets().empty()); // no budget for an invalid config
        auto *run = view.findChild<QWidget *>(QStringLiteral("runPilotButton"));
        QVERIFY(!run->isEnabled());

        box->setValue(good);
        QVERIFY(view.isValid());
        QVERIFY(!box->property("invalidField").toBool());
        QCOMPARE(box->toolTip(), help);
        QVERIFY(run->isEnabled());
        QCOMPARE(view.budget()->budgets().size(), cardCapacities().size());
    }

    // An edit marks the preset box and the source "(edited)"; another preset asks before it
    // discards the edits, and a refusal keeps them (and the box on the edited preset).
    void presetEditsAreMarkedAndKept()
    {
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        auto *combo = view.findChild<QComboBox *>(QStringLiteral("presetCombo"));
        auto *source = view.findChild<QLabel *>(QStringLiteral("configSource"));
        QVERIFY(combo && source);
        QVERIFY(!view.edited());
        QCOMPARE(combo->currentText(), QStringLiteral("tiny"));
        auto *layers = view.findChild<QSpinBox *>(QStringLiteral("model.layers"));
        QVERIFY(layers);
        layers->setValue(3);
        QVERIFY(view.edited());
        QCOMPARE(combo->currentText(), QStringLiteral("tiny (edited)"));
        QCOMPARE(source->text(), QStringLiteral("preset tiny (edited)"));
        QString asked;
        view.setDiscardConfirmation([&](const QString &question) { asked = question; return false; });
        combo->setCurrentIndex(combo->findText(QStringLiteral("small")));
        QVERIFY2(asked.contains(QStringLiteral("discard your edits to preset tiny")), qPrintable(asked));
        QCOMPARE(view.config().model.layers, 3);
        QCOMPARE(combo->currentText(), QStringLiteral("tiny (edited)"));
        // Back to the loaded value: no longer edited.
        layers->setValue(2);
        QVERIFY(!view.edited());
        QCOMPARE(combo->currentText(), QStringLiteral("tiny"));
        layers->setValue(4);
        view.setDiscardConfirmation([](const QString &) { return true; });
        combo->setCurrentIndex(combo->findText(QStringLiteral("small")));
        QCOMPARE(view.config().model.preset, std::string("small"));
        QVERIFY(!view.edited());
        QCOMPARE(source->text(), QStringLiteral("preset small"));
    }

    // Every part of a bar has its tooltip (a tiny model's parts too, drawn as slivers); a 70B full
    // fine-tune past the scale shows a break and how much does not fit.
    void budgetBarsExplainThemselves()
    {
        ConfigView view;
        view.resize(1280, 800);
        view.loadPreset(QStringLiteral("tiny"));
        MemoryBudgetWidget *budget = view.budget();
        budget->resize(520, budget->sizeHint().height());
        QImage canvas(budget->size(), QImage::Format_ARGB32);
        budget->render(&canvas);
        // The first card's bar starts under its name: its first pixels are weights.
        QString tip;
        for (int y = 0; y < budget->height() && tip.isEmpty(); ++y)
            tip = budget->toolTipAt(QPoint(5, y)); // the bar starts at 4 px
        QVERIFY2(tip.contains(QStringLiteral("weights")) && tip.contains(QStringLiteral("% of the peak")), qPrintable(tip));
        view.loadPreset(QStringLiteral("llama-3.1-70b"));
        budget->resize(520, budget->sizeHint().height());
        budget->render(&canvas);
        QString capacity;
        for (int y = 0; y < budget->height() && capacity.isEmpty(); ++y) {
            const QString t = budget->toolTipAt(QPoint(budget->width() - 10, y));
            if (t.contains(QStringLiteral("gradients")) || t.contains(QStringLiteral("weights")))
                capacity = t;
        }
        QVERIFY2(!capacity.isEmpty(), "the bar past the scale still tells its part");
    }

    void seedTypedByKeyboard()
    {
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        auto *seed = view.findChild<QLineEdit *>(QStringLiteral("seed"));
        seed->clear();
        QTest::keyClicks(seed, QStringLiteral("12x"));
        QVERIFY(!view.isValid());
        QVERIFY(seed->property("invalidField").toBool());
        QTest::keyClick(seed, Qt::Key_Backspace);
        QVERIFY(view.isValid());
        QCOMPARE(view.config().seed, uint64_t(12));
    }

    void seqLenChangesBudget()
    {
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        const MemoryEstimate before = estimateOf(view, 0);
        spin(view, "train.seq_len")->setValue(128);
        QCOMPARE(view.config().train.seqLen, int64_t(128));
        const MemoryEstimate after = estimateOf(view, 0);
        // Weights and optimizer state do not depend on the sequence; activations and logits grow.
        QCOMPARE(after.breakdown.weights(), before.breakdown.weights());
        QCOMPARE(after.breakdown.optimizer, before.breakdown.optimizer);
        QVERIFY(after.breakdown.activations > before.breakdown.activations);
        QVERIFY(after.breakdown.logits > before.breakdown.logits);
        QVERIFY(after.totalBytes > before.totalBytes);
        // The largest micro-batch that fits shrinks when each sample is twice as long.
        QVERIFY(after.maxMicroBatch < before.maxMicroBatch);
    }

    void storedPilotsCalibrateTheirCard()
    {
        // Two H200 pilots measured 10% and 20% above their estimates: the H200 row is calibrated by
        // their median (1.15), the other cards keep the raw figure.
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.db"));
        {
            HistoryStore store(db);
            addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cuda"), QStringLiteral("2.11.0"), QStringLiteral("NVIDIA H200"), "x", 1000, 1100, {}});
            addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cuda"), QStringLiteral("2.11.0"), QStringLiteral("NVIDIA H200"), "y", 1000, 1200, {}});
        }
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        view.setHistoryDatabase(db);
        size_t h200 = cardCapacities().size();
        for (size_t i = 0; i < cardCapacities().size(); ++i)
            if (cardCapacities()[i].id == "h200-141gb") // the SXM part the residuals' device name matches, not the NVL one
                h200 = i;
        QVERIFY(h200 < cardCapacities().size());
        for (size_t i = 0; i < cardCapacities().size(); ++i) {
            const MemoryEstimate e = estimateOf(view, i);
            if (i != h200) {
                QCOMPARE(e.calibrationSamples, 0);
                QVERIFY(!e.calibratedTotalBytes);
                continue;
            }
            QCOMPARE(e.calibrationSamples, 2);
            QVERIFY(std::abs(e.calibrationRatio - 1.15) < 1e-9);
            QVERIFY(e.calibratedPeakAllocatedBytes);
            QVERIFY(std::abs(static_cast<double>(*e.calibratedPeakAllocatedBytes) - 1.15 * static_cast<double>(e.peakAllocatedBytes)) <= 1.0);
        }
        // A history that is not a database leaves the budget uncalibrated, not broken.
        QFile junk(dir.filePath(QStringLiteral("junk.db")));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("not sqlite");
        junk.close();
        view.setHistoryDatabase(junk.fileName());
        QCOMPARE(estimateOf(view, h200).calibrationSamples, 0);
    }

    void loraRankAndPrecisionChangeBudget()
    {
        ConfigView view;
        view.loadPreset(QStringLiteral("small"));
        auto *mode = view.findChild<QComboBox *>(QStringLiteral("train.mode"));
        mode->setCurrentText(QStringLiteral("lora"));
        QVERIFY(view.isValid());
        const MemoryEstimate rank16 = estimateOf(view, 1);
        spin(view, "train.lora.rank")->setValue(64);
        const MemoryEstimate rank64 = estimateOf(view, 1);
        QVERIFY(rank64.breakdown.optimizer > rank16.breakdown.optimizer);
        QVERIFY(rank64.breakdown.trainableWeights > rank16.breakdown.trainableWeights); // adapters: rank x (in + out) per target

        auto *precision = view.findChild<QComboBox *>(QStringLiteral("train.precision"));
        precision->setCurrentText(QStringLiteral("fp32"));
        const MemoryEstimate fp32 = estimateOf(view, 1);
        precision->setCurrentText(QStringLiteral("bf16"));
        const MemoryEstimate bf16 = estimateOf(view, 1);
        // Frozen base weights: 4 bytes each in fp32, 2 in bf16.
        QCOMPARE(fp32.breakdown.frozenWeights, 2 * bf16.breakdown.frozenWeights);

        // QLoRA keeps the adapter fields open and the projections' base in NF4: the frozen weights
        // shrink and nothing trainable changes; fp32 is refused, named on the precision field.
        mode->setCurrentText(QStringLiteral("qlora"));
        QVERIFY(spin(view, "train.lora.rank")->isEnabled());
        QVERIFY(view.isValid());
        const MemoryEstimate qlora = estimateOf(view, 1);
        QVERIFY2(qlora.breakdown.frozenWeights < bf16.breakdown.frozenWeights / 2, qPrintable(QString::number(qlora.breakdown.frozenWeights)));
        QCOMPARE(qlora.breakdown.optimizer, bf16.breakdown.optimizer);
        precision->setCurrentText(QStringLiteral("fp32"));
        QVERIFY(!view.isValid());
        QVERIFY(precision->toolTip().contains(QStringLiteral("qlora")));
        // The mode's own help stays through all of it.
        QVERIFY(mode->toolTip().contains(QStringLiteral("NF4")));
    }

    void saveAndLoadRoundTrip()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString path = dir.filePath(QStringLiteral("run.json"));
        ConfigView view;
        view.loadPreset(QStringLiteral("tiny"));
        spin(view, "train.seq_len")->setValue(96);
        spin(view, "train.grad_accum")->setValue(3);
        QString error;
        QVERIFY2(view.saveFile(path, &error), qPrintable(error));
        spin(view, "train.seq_len")->setValue(32);
        QVERIFY2(view.loadFile(path, &error), qPrintable(error));
        QCOMPARE(spin(view, "train.seq_len")->value(), 96);
        QCOMPARE(view.config().train.gradAccum, int64_t(3));
        QVERIFY(!view.loadFile(dir.filePath(QStringLiteral("missing.json")), &error));
        QVERIFY(error.contains(QStringLiteral("missing.json")));
    }
};

QTEST_MAIN(TestConfigView)
#include "tst_config_view.moc"
