// Every dense family against Transformers itself: a tiny random-weight model per model_type, its
// config.json, weights and reference (input ids, float64 logits, loss and every parameter's
// gradient) produced once on the device by tests/bench/hf_family_fixtures.py with Transformers 5.17.
// Our engine imports the config, loads the same weights from safetensors and must reproduce them,
// on the eager and the fused path, with and without recompute.
#include "config/HfImport.h"
#include "config/RunConfig.h"
#include "engine/TorchCompat.h"
#include "model/Safetensors.h"
#include "model/Transformer.h"
#include "model/WeightLoader.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include "RelativeNormError.h"

#include <QtTest>

using namespace pb;

namespace {

const QString kFixtures = QStringLiteral(PB_SOURCE_DIR "/tests/data/hf-parity");

struct Reference {
    torch::Tensor inputIds, logits, loss;
    std::map<std::string, torch::Tensor> grads;
    int64_t totalParameters = 0;
};

torch::Tensor tensorOf(SafetensorsFolder &folder, const SafetensorEntry &e)
{
    const auto type = e.dtype == "F64" ? torch::kDouble : e.dtype == "I64" ? torch::kLong : torch::kFloat;
    return torch::from_blob(const_cast<uchar *>(folder.data(e)), e.shape, torch::TensorOptions().dtype(type)).clone();
}

Reference readReference(const QString &dir)
{
    Reference r;
    SafetensorsFolder folder(dir + QStringLiteral("/reference"));
    for (const auto &[name, entry] : folder.entries()) {
        if (name == "input_ids")
            r.inputIds = tensorOf(folder, entry);
        else if (name == "logits")
            r.logits = tensorOf(folder, entry);
        else if (name == "loss")
            r.loss = tensorOf(folder, entry);
        else if (name.rfind("grad.", 0) == 0)
            r.grads[name.substr(5)] = tensorOf(folder, entry);
    }
    QFile meta(dir + QStringLiteral("/meta.json"));
    if (meta.open(QIODevice::ReadOnly))
        r.totalParameters = QJsonDocument::fromJson(meta.readAll()).object().value(QStringLiteral("total_params")).toInteger();
    return r;
}

// Transformers' causal-LM loss: each position predicts the next token; the last predicts nothing.
torch::Tensor shiftedTargets(const torch::Tensor &ids)
{
    auto targets = torch::full_like(ids, -100);
    targets.narrow(1, 0, ids.size(1) - 1).copy_(ids.narrow(1, 1, ids.size(1) - 1));
    return targets;
}

// The loss of `c`'s model with the fixture's weights on the reference's tokens, under CPU bf16
// autocast where c is bf16-mixed.
double fixtureLoss(const QString &dir, const RunConfig &c, const Reference &ref)
{
    DecoderModel model(c, ModelRuntime {true, false}, torch::kCPU);
    loadSafetensors(*model, dir);
    const compat::AutocastGuard autocast(torch::kCPU, c.train.precision == Precision::Bf16Mixed, torch::kBFloat16);
    return model->loss(ref.inputIds, shiftedTargets(ref.inputIds)).item<double>();
}

} // namespace

class TestHfParity : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void family_data()
    {
        QTest::addColumn<QString>("type");
        QTest::addColumn<int>("kernels");
        QTest::addColumn<bool>("recompute");
        const QStringList types = QDir(kFixtures).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
        QVERIFY2(types.size() >= 10, qPrintable(QStringLiteral("expected the committed fixtures of at least 10 families, found %1").arg(types.size())));
        for (const QString &type : types) {
            QTest::newRow(qPrintable(type + QStringLiteral("/eager"))) << type << 0 << false;
            QTest::newRow(qPrintable(type + QStringLiteral("/fused"))) << type << 1 << false;
            QTest::newRow(qPrintable(type + QStringLiteral("/eager+recompute"))) << type << 0 << true;
        }
    }
    // fp32: the loss within 1e-5 relative of Transformers' float64 loss, logits and every gradient
    // within 1e-4 relative (fp32 against float64 arithmetic).
    void family()
    {
        QFETCH(QString, type);
        QFETCH(int, kernels);
        QFETCH(bool, recompute);
        const QString dir = kFixtures + QLatin1Char('/') + type;
        RunConfig c = importHfConfig(dir);
        c.train.precision = Precision::Fp32;
        c.train.kernels = kernels ? KernelPath::Fused : KernelPath::Eager;
        const Reference ref = readReference(dir);
        QVERIFY(ref.inputIds.defined() && ref.loss.defined() && ref.logits.defined());
        QCOMPARE(countParameters(c).total, ref.totalParameters);

        torch::manual_seed(0);
        DecoderModel model(c, ModelRuntime {true, recompute}, torch::kCPU);
        const auto report = loadSafetensors(*model, dir);
        QCOMPARE(report.ignored, int64_t(0));
        model->train();
        const auto loss = model->loss(ref.inputIds, shiftedTargets(ref.inputIds));
        const double expected = ref.loss.item<double>();
        const double lossError = std::abs(loss.item<double>() - expected) / std::abs(expected);
        QVERIFY2(lossError < 1e-5, qPrintable(QStringLiteral("loss %1 against Transformers' %2 (relative %3)").arg(loss.item<double>(), 0, 'g', 10).arg(expected, 0, 'g', 10).arg(lossError)));
        loss.backward();
        QCOMPARE(static_cast<size_t>(model->named_parameters().size()), ref.grads.size());
        // A gradient that is zero in exact arithmetic (a key bias on a layer without rotary shifts
        // every score of a query alike, which softmax ignores) is rounding noise on both sides: each
        // is compared against the largest gradient's scale where it is smaller.
        double largest = 0;
        for (const auto &[name, grad] : ref.grads)
            largest = std::max(largest, grad.to(torch::kDouble).norm().item<double>());
        for (const auto &item : model->named_parameters()) {
            const auto it = ref.grads.find(item.key());
            QVERIFY2(it != ref.grads.end(), qPrintable(QString::fromStdString("no reference gradient for " + item.key())));
            // A routed expert no token chose gets no gradient, Transformers' a zero one (or none, saved as zeros).
            const bool unrouted = !item.value().grad().defined() && item.key().find(".experts.") != std::string::npos;
            QVERIFY2(item.value().grad().defined() || unrouted, qPrintable(QString::fromStdString("no gradient for " + item.key())));
            const auto ours = unrouted ? torch::zeros(item.value().sizes(), torch::kDouble) : item.value().grad().to(torch::kDouble), theirs = it->second.to(torch::kDouble);
            const double e = (ours - theirs).norm().item<double>() / std::max(theirs.norm().item<double>(), 1e-4 * largest);
            QVERIFY2(e < 1e-4, qPrintable(QString::fromStdString(item.key() + ": gradient off by " + std::to_string(e) + " relative (norm " +
                                                                 std::to_string(theirs.norm().item<double>()) + ")")));
        }
        if (kernels == 0 && !recompute) {
            torch::NoGradGuard noGrad;
            const double e = relativeNormError(model->logits(ref.inputIds), ref.logits);
            QVERIFY2(e < 1e-5, qPrintable(QStringLiteral("logits off by %1 relative").arg(e)));
        }
    }
    // Under bf16 autocast (fp32 masters) the loss stays within bf16 rounding of the float64 one, on
    // the eager path and on the fused one (whose norms, q/k norms among them, return bf16 where
    // eager's fp32 weight promotes them, and whose rotary then turns bf16 q and k).
    void familyBf16_data()
    {
        QTest::addColumn<QString>("type");
        QTest::addColumn<bool>("fused");
        for (const QString &type : QDir(kFixtures).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
            QTest::newRow(qPrintable(type + QStringLiteral("/eager"))) << type << false;
            QTest::newRow(qPrintable(type + QStringLiteral("/fused"))) << type << true;
        }
    }
    void familyBf16()
    {
        QFETCH(QString, type);
        QFETCH(bool, fused);
        const QString dir = kFixtures + QLatin1Char('/') + type;
        RunConfig c = importHfConfig(dir);
        c.train.precision = Precision::Bf16Mixed;
        c.train.kernels = fused ? KernelPath::Fused : KernelPath::Eager;
        const Reference ref = readReference(dir);
        const double loss = fixtureLoss(dir, c, ref);
        const double expected = ref.loss.item<double>();
        const double e = std::abs(loss - expected) / std::abs(expected);
        QVERIFY2(e < 1e-2, qPrintable(QStringLiteral("bf16-mixed loss %1 against %2 (relative %3)").arg(loss).arg(expected).arg(e)));
        qInfo("%s bf16-mixed %s: relative %.2e", qPrintable(type), fused ? "fused" : "eager", e);
    }

    // Transformers casts the rotary tables to the hidden stream's dtype, so over fp32 masters under
    // autocast it turns bf16 q and k by fp32 tables (q * cos promotes) and rounds them once, at
    // SDPA's cast: OLMo 2's form (model.traits.rope_fp32: fp32 tables, the result cast back), which
    // the eager path takes whenever its hidden stream is fp32. Under pure bf16 the stream and the
    // tables are bf16, and the two forms differ.
    void eagerRotaryTurnsInTheStreamsDtype_data()
    {
        QTest::addColumn<QString>("type");
        QTest::newRow("llama") << QStringLiteral("llama");
        QTest::newRow("deepseek_v3 (latent attention)") << QStringLiteral("deepseek_v3");
    }
    void eagerRotaryTurnsInTheStreamsDtype()
    {
        QFETCH(QString, type);
        const QString dir = kFixtures + QLatin1Char('/') + type;
        const Reference ref = readReference(dir);
        auto loss = [&](Precision precision, bool ropeFp32) {
            RunConfig c = importHfConfig(dir);
            c.train.precision = precision;
            c.train.kernels = KernelPath::Eager;
            c.model.traits.ropeFp32 = ropeFp32;
            return fixtureLoss(dir, c, ref);
        };
        QCOMPARE(loss(Precision::Bf16Mixed, false), loss(Precision::Bf16Mixed, true));
        const double bf16 = loss(Precision::Bf16, false), bf16TablesFp32 = loss(Precision::Bf16, true);
        QVERIFY2(bf16 != bf16TablesFp32, qPrintable(QStringLiteral("pure bf16: %1 either way").arg(bf16)));
    }
};

QTEST_GUILESS_MAIN(TestHfParity)
#include "tst_hf_parity.moc"
