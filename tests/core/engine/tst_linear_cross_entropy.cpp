// The chunked linear cross-entropy (train.kernels = fused) against the eager head and loss on
// random, odd shapes: the same loss and gradients, with ignored targets, tied and frozen heads, a
// chunk that does not divide the tokens, and under bf16 autocast within bf16's rounding; the
// model's fused path against its eager one (tst_fused_ops tests each fused op on its own).
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
        // The loss's own gradient (1: the kept gradients handed on as they are) and a scaled one.
        const auto inputs = weightTrains ? std::vector<torch::Tensor> {h, w} : std::vector<torch::Tensor> {h};
        for (const double multiplier : {1.0, 1.7}) {
            const auto g = torch::autograd::grad({multiplier == 1.0 ? fused : fused * multiplier}, inputs, {}, /*retain_graph=*/true);
            const auto r = torch::autograd::grad({multiplier == 1.0 ? reference : reference * multiplier}, inputs, {}, /*retain_graph=*/true);
            for (size_t i = 0; i < g.size(); ++i) {
                QCOMPARE(g[i].scalar_type(), r[i].scalar_type());
                QVERIFY2(torch::allclose(g[i], r[i], 1e-5, 1e-6),
                         qPrintable(QStringLiteral("x%1: gradient %2 differs by %3").arg(multiplier).arg(i).arg((g[i] - r[i]).abs().max().item<double>())));
            }
        }
    }

    // Rows padded to a multiple of 8 (the CUDA kernel's rule), the vocabulary's last few rows in
    // GEMMs of their own: the loss and both gradients are the unpadded call's (double compute), for
    // a weight cast or not, trained or frozen, and for a vocabulary already a multiple of 8 in
    // wider rows. A stride below the vocabulary is refused.
    void paddedRowsMatch_data()
    {
        QTest::addColumn<bool>("castWeight");
        QTest::addColumn<bool>("weightTrains");
        QTest::addColumn<int>("vocab");
        QTest::newRow("51 tokens, fp32 weight cast") << true << true << 51;
        QTest::newRow("51 tokens, frozen fp32 weight") << true << false << 51;
        QTest::newRow("51 tokens, weight in the compute dtype") << false << true << 51;
        QTest::newRow("48 tokens in rows of 56") << false << true << 48;
        QTest::newRow("5 tokens: no lead rows") << false << true << 5;
    }
    void paddedRowsMatch()
    {
        QFETCH(bool, castWeight);
        QFETCH(bool, weightTrains);
        QFETCH(int, vocab);
        torch::manual_seed(6);
        const int64_t tokens = 23, hidden = 16, ld = 56;
        auto h = torch::randn({tokens, hidden}, torch::kDouble).requires_grad_(true);
        auto w = torch::randn({vocab, hidden}, castWeight ? torch::kFloat : torch::kDouble).mul_(0.5).requires_grad_(weightTrains);
        auto t = torch::randint(0, vocab, {tokens}, torch::kLong);
        t[4] = -100;
        const auto inputs = weightTrains ? std::vector<torch::Tensor> {h, w} : std::vector<torch::Tensor> {h};
        const auto plain = linearCrossEntropy(h, w, t, 7);
        const auto padded = linearCrossEntropy(h, w, t, 7, {}, ld);
        QVERIFY2(std::abs(padded.item<double>() - plain.item<double>()) < 1e-12, qPrintable(QStringLiteral("%1 vs %2").arg(padded.item<double>()).arg(plain.item<double>())));
        const auto g = torch::autograd::grad({padded}, inputs);
        const auto r = torch::autograd::grad({plain}, inputs);
        for (size_t i = 0; i < g.size(); ++i) {
            QCOMPARE(g[i].sizes(), r[i].sizes());
            QVERIFY(g[i].is_contiguous());
            QVERIFY2(torch::allclose(g[i], r[i], 1e-12, 1e-12), qPrintable(QString::number((g[i] - r[i]).abs().max().item<double>())));
        }
        bool refused = false;
        try {
            linearCrossEntropy(h, w, t, 7, {}, vocab - 1);
        } catch (const c10::Error &) {
            refused = true;
        }
        QVERIFY(refused);
    }

    // Under bf16 autocast both paths compute the head in bf16 and the loss in fp32; the tolerance
    // is bf16's: logits rounded to 8 bits of mantissa (relative 2^-8) move the loss by well under 1%.
    // (Also with rows padded to 80, the 77-token vocabulary's last 5 rows in GEMMs of their own.)
    void matchesUnderAutocast_data()
    {
        QTest::addColumn<int>("rowStride");
        QTest::newRow("rows of the vocabulary") << 0;
        QTest::newRow("rows padded to 80") << 80;
    }
    void matchesUnderAutocast()
    {
        QFETCH(int, rowStride);
        torch::manual_seed(5);
        auto h = torch::randn({29, 32}).requires_grad_(true);
        auto w = torch::randn({77, 32}).mul_(0.2).requires_grad_(true);
        auto t = torch::randint(0, 77, {29}, torch::kLong);
        compat::setAutocast(c10::DeviceType::CPU, true, torch::kBFloat16);
        const auto fused = linearCrossEntropy(h, w, t, 6, {}, rowStride);
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

    // The model with train.kernels = fused (norms, SwiGLU, rotary, loss) gives the eager model's
    // loss and gradients (fp32), tied and untied heads, with LoRA, recompute and q/k norms.
    void modelPathsAgree_data()
    {
        QTest::addColumn<bool>("tied");
        QTest::addColumn<bool>("lora");
        QTest::addColumn<bool>("recompute");
        QTest::addColumn<bool>("qkNorm");
        QTest::newRow("untied, full") << false << false << false << false;
        QTest::newRow("tied, full") << true << false << false << false;
        QTest::newRow("untied, LoRA") << false << true << false << false;
        QTest::newRow("tied, full, recompute") << true << false << true << false;
        QTest::newRow("untied, LoRA, recompute, q/k norm") << false << true << true << true;
        // Tied: the lookup adds its rows into the head's gradient (model/TiedEmbedding.h), which a
        // loss gradient other than 1 scales in place first; a second backward adds into .grad.
        QTest::newRow("tied, full, loss x 0.5, two backwards") << true << false << false << false;
    }
    void modelPathsAgree()
    {
        QFETCH(bool, tied);
        QFETCH(bool, lora);
        QFETCH(bool, recompute);
        QFETCH(bool, qkNorm);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.tieEmbeddings = tied;
        if (qkNorm)
            c.model.qkNorm = QkNorm::Head;
        if (lora)
            c.train.mode = TrainMode::Lora;
        auto tokens = (torch::manual_seed(3), torch::randint(0, c.model.vocabSize, {3, 21}, torch::kLong));
        const auto x = tokens.slice(1, 0, 20), y = tokens.slice(1, 1, 21);
        std::map<std::string, torch::Tensor> grads[2];
        double losses[2];
        for (int fused = 0; fused < 2; ++fused) {
            c.train.kernels = fused ? KernelPath::Fused : KernelPath::Eager;
            DecoderModel model(c, ModelRuntime {false, recompute}, torch::kCPU);
            model->initialise(1);
            auto loss = model->loss(x, y);
            const bool twice = QLatin1String(QTest::currentDataTag()).endsWith(QLatin1String("two backwards"));
            (twice ? loss * 0.5 : loss).backward();
            if (twice)
                (model->loss(x, y) * 0.5).backward();
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
        // The budget keeps a chunk within 512 MiB: Llama-3.2-1B's 128,256-token vocabulary at 2
        // bytes a logit takes 2,092 tokens; without the kernel (bf16 and an fp32 copy, 6 bytes) 697;
        // fp32 needs no copy (4 bytes).
        QCOMPARE(linearCrossEntropyBytesPerLogit(2, true), int64_t(2));
        QCOMPARE(linearCrossEntropyBytesPerLogit(2, false), int64_t(6));
        QCOMPARE(linearCrossEntropyBytesPerLogit(4, false), int64_t(4));
        QCOMPARE(linearCrossEntropyChunkTokens(16384, 128256, 2), int64_t(2092));
        QCOMPARE(linearCrossEntropyChunkTokens(16384, 128256, 6), int64_t(697));
        QCOMPARE(linearCrossEntropyChunkTokens(10, 50, 4), int64_t(10)); // a small vocabulary: one chunk
        QCOMPARE(linearCrossEntropyChunkTokens(10, int64_t(1) << 40, 4), int64_t(1)); // never fewer than one token
        // On the kernel's path at least 4,096 tokens (Gemma's vocabulary in bf16: 2 GiB), or 2 GiB of logits.
        QCOMPARE(linearCrossEntropyChunkTokens(8192, 262144, 2, true), int64_t(4096));
        QCOMPARE(linearCrossEntropyChunkTokens(8192, 262144, 4, true), int64_t(2048));
        QCOMPARE(linearCrossEntropyChunkTokens(16384, 128256, 2, true), int64_t(4096));
        QCOMPARE(linearCrossEntropyChunkTokens(16384, 32000, 2, true), int64_t(8388)); // the budget's is larger
        QCOMPARE(linearCrossEntropyChunkTokens(1000, 262144, 2, true), int64_t(1000));
    }
};

QTEST_GUILESS_MAIN(TestLinearCrossEntropy)
#include "tst_linear_cross_entropy.moc"
