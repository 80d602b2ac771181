// The chunked linear cross-entropy (train.kernels = fused) against the eager head and loss on
// random, odd shapes: the same loss and gradients, with ignored targets, tied and frozen heads, a
// chunk that does not divide the tokens, and under bf16 autocast within bf16's rounding.
#include "config/Presets.h"
#include "engine/TorchCompat.h"
#include "estimate/ActivationModel.h"
#include "model/LinearCrossEntropy.h"
#include "model/Transformer.h"

#include <QtTest>

using namespace pb;

namespace {

torch::Tensor eager(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &targets)
{
    const auto logits = torch::nn::functional::linear(hidden, weight);
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

} // namespace

class TestLinearCrossEntropy : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matchesTheEagerLoss_data()
    {
        QTest::addColumn<int>("tokens");
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<int>("chunk");
        QTest::addColumn<bool>("weightTrains");
        QTest::addColumn<bool>("ignoreSome");
        QTest::newRow("one chunk") << 8 << 16 << 40 << 8 << true << false;
        QTest::newRow("odd chunks, ignored targets") << 37 << 24 << 101 << 5 << true << true;
        QTest::newRow("chunk from the rule") << 33 << 8 << 97 << 0 << true << true;
        QTest::newRow("frozen head (LoRA)") << 19 << 16 << 50 << 4 << false << true;
        QTest::newRow("one token per chunk") << 6 << 4 << 11 << 1 << true << false;
    }
    void matchesTheEagerLoss()
    {
        QFETCH(int, tokens);
        QFETCH(int, hidden);
        QFETCH(int, vocab);
        QFETCH(int, chunk);
        QFETCH(bool, weightTrains);
        QFETCH(bool, ignoreSome);
        torch::manual_seed(4);
        const auto opts = torch::TensorOptions().dtype(torch::kDouble);
        auto h = torch::randn({tokens, hidden}, opts).requires_grad_(true);
        auto w = torch::randn({vocab, hidden}, opts).mul_(0.5).requires_grad_(weightTrains);
        auto t = torch::randint(0, vocab, {tokens}, torch::kLong);
        if (ignoreSome)
            t.index_put_({torch::arange(0, tokens, 3)}, -100);
        const auto fused = linearCrossEntropy(h, w, t, chunk);
        const auto reference = eager(h, w, t);
        // The loss is fp32 on both paths (as Transformers upcasts the logits); its value and the
        // gradients of the double inputs agree to fp32's rounding.
        QVERIFY2(std::abs(fused.item<double>() - reference.item<double>()) < 1e-5, qPrintable(QStringLiteral("%1 vs %2").arg(fused.item<double>()).arg(reference.item<double>())));
        const auto g = torch::autograd::grad({fused * 1.7}, weightTrains ? std::vector<torch::Tensor> {h, w} : std::vector<torch::Tensor> {h});
        const auto r = torch::autograd::grad({reference * 1.7}, weightTrains ? std::vector<torch::Tensor> {h, w} : std::vector<torch::Tensor> {h});
        for (size_t i = 0; i < g.size(); ++i) {
            QCOMPARE(g[i].scalar_type(), r[i].scalar_type());
            QVERIFY2(torch::allclose(g[i], r[i], 1e-5, 1e-6), qPrintable(QStringLiteral("gradient %1 differs by %2").arg(i).arg((g[i] - r[i]).abs().max().item<double>())));
        }
    }

    // Under bf16 autocast both paths compute the head in bf16 and the loss in fp32; the tolerance
    // is bf16's: logits rounded to 8 bits of mantissa (relative 2^-8) move the loss by well under 1%.
    void matchesUnderAutocast()
    {
        torch::manual_seed(5);
        auto h = torch::randn({29, 32}).requires_grad_(true);
        auto w = torch::randn({77, 32}).mul_(0.2).requires_grad_(true);
        auto t = torch::randint(0, 77, {29}, torch::kLong);
        compat::setAutocast(c10::DeviceType::CPU, true, torch::kBFloat16);
        const auto fused = linearCrossEntropy(h, w, t, 6);
        const auto reference = eager(h, w, t);
        compat::setAutocast(c10::DeviceType::CPU, false, torch::kBFloat16);
        QVERIFY(std::abs(fused.item<double>() - reference.item<double>()) < 1e-2 * std::abs(reference.item<double>()));
        const auto g = torch::autograd::grad({fused}, {h, w});
        const auto r = torch::autograd::grad({reference}, {h, w});
        for (size_t i = 0; i < 2; ++i) {
            QCOMPARE(g[i].scalar_type(), torch::kFloat); // the masters' dtype, as the eager cast's backward gives
            const double scale = r[i].abs().max().item<double>();
            QVERIFY2((g[i] - r[i]).abs().max().item<double>() < 2e-2 * scale, qPrintable(QString::number((g[i] - r[i]).abs().max().item<double>() / scale)));
        }
    }

    // The model with train.kernels = fused gives the eager model's loss and gradients (fp32), tied
    // and untied heads, with LoRA.
    void modelPathsAgree_data()
    {
        QTest::addColumn<bool>("tied");
        QTest::addColumn<bool>("lora");
        QTest::newRow("untied, full") << false << false;
        QTest::newRow("tied, full") << true << false;
        QTest::newRow("untied, LoRA") << false << true;
    }
    void modelPathsAgree()
    {
        QFETCH(bool, tied);
        QFETCH(bool, lora);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.tieEmbeddings = tied;
        if (lora)
            c.train.mode = TrainMode::Lora;
        auto tokens = (torch::manual_seed(3), torch::randint(0, c.model.vocabSize, {3, 21}, torch::kLong));
        const auto x = tokens.slice(1, 0, 20), y = tokens.slice(1, 1, 21);
        std::map<std::string, torch::Tensor> grads[2];
        double losses[2];
        for (int fused = 0; fused < 2; ++fused) {
            c.train.kernels = fused ? KernelPath::Fused : KernelPath::Eager;
            DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
            model->initialise(1);
            auto loss = model->loss(x, y);
            loss.backward();
            losses[fused] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                if (item.value().grad().defined())
                    grads[fused][item.key()] = item.value().grad();
        }
        QVERIFY(std::abs(losses[1] - losses[0]) < 1e-5);
        QCOMPARE(grads[1].size(), grads[0].size());
        for (const auto &[name, g] : grads[0])
            QVERIFY2(torch::allclose(grads[1][name], g, 1e-4, 1e-6), name.c_str());
    }

    void chunkRule()
    {
        // Qwen2.5-0.5B: vocabulary 151,936 over hidden 896 is 170 chunks; 16,384 tokens give 97 each,
        // so a chunk's logits (97 x 151,936) are about the hidden states' size (16,384 x 896).
        QCOMPARE(linearCrossEntropyChunkTokens(16384, 151936, 896), int64_t(97));
        QCOMPARE(linearCrossEntropyChunkTokens(10, 50, 100), int64_t(10)); // a small vocabulary: one chunk
    }
};

QTEST_GUILESS_MAIN(TestLinearCrossEntropy)
#include "tst_linear_cross_entropy.moc"
