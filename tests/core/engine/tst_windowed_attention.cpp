// Sliding-window attention on the flash kernel's own window (model/WindowedAttention.h): refused off
// CUDA and for inputs flash does not take (so the CPU build keeps SDPA's masked form); on a CUDA
// device, the output and all three gradients against a float64 masked reference of Transformers'
// window (query i sees keys i - W < j <= i), and a model's fused step with the kernel against the
// same step with SDPA's masked form.
#include "config/Presets.h"
#include "engine/TorchCompat.h"
#include "model/Transformer.h"
#include "model/WindowedAttention.h"

#include <QtTest>

#include <cmath>

using namespace pb;

namespace {

// Softmax attention in float64 with k and v shared by `groups` query heads and the window as a mask.
torch::Tensor referenceAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, int64_t window)
{
    const int64_t groups = q.size(1) / k.size(1), t = q.size(2);
    const auto ke = k.repeat_interleave(groups, 1), ve = v.repeat_interleave(groups, 1);
    const auto pos = torch::arange(t, torch::kLong);
    const auto distance = pos.unsqueeze(1) - pos.unsqueeze(0);
    const auto seen = distance.ge(0).logical_and(distance.lt(window));
    const auto scores = torch::matmul(q, ke.transpose(-2, -1)).mul(scale).masked_fill(seen.logical_not(), -std::numeric_limits<double>::infinity());
    return torch::matmul(torch::softmax(scores, -1), ve);
}

// |a - b| over the largest |b| (or `floor` where that is larger): one figure for a whole bf16 tensor.
double relativeError(const torch::Tensor &a, const torch::Tensor &b, double floor = 1e-30)
{
    const auto ref = b.to(torch::kDouble).cpu();
    return (a.to(torch::kDouble).cpu() - ref).abs().max().item<double>() / std::max(floor, ref.abs().max().item<double>());
}

} // namespace

class TestWindowedAttention : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Off CUDA, or in fp32, the kernel is refused: the caller keeps SDPA's masked form.
    void refusedWhereFlashCannotRun()
    {
        const auto q = torch::randn({1, 4, 16, 64}).to(torch::kBFloat16), k = torch::randn({1, 2, 16, 64}).to(torch::kBFloat16);
        QVERIFY(!windowKernelTakes(q, k, k));
        QVERIFY_EXCEPTION_THROWN(windowedAttention(q, k, k, 0.125, 4), std::exception);
        if (!torch::cuda::is_available())
            return;
        const auto qc = q.cuda(), kc = k.cuda();
        QVERIFY(windowKernelTakes(qc, kc, kc));
        QVERIFY(!windowKernelTakes(qc.to(torch::kFloat), kc.to(torch::kFloat), kc.to(torch::kFloat)));   // fp32: no flash
        const auto wide = torch::randn({1, 4, 16, 512}, qc.options()), wideKv = torch::randn({1, 2, 16, 512}, qc.options());
        QVERIFY(!windowKernelTakes(wide, wideKv, wideKv));                                                 // past 256 wide
        QVERIFY(!windowKernelTakes(qc, kc.to(torch::kHalf), kc));                                          // mixed dtypes
    }

    // A sliding layer given no shared mask (DecoderModel leaves it out where it expects the kernel)
    // and refused by the kernel (here: the CPU) makes its own: the output of the shared mask's,
    // not the causal one's.
    void aSlidingLayerWithoutTheSharedMaskMakesItsOwn()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.traits.slidingWindow = 5;
        c.train.precision = Precision::Fp32;
        c.train.kernels = KernelPath::Fused;
        SelfAttention attention(c, ModelRuntime {}, torch::TensorOptions().dtype(torch::kFloat), 0);
        torch::manual_seed(11);
        {
            torch::NoGradGuard noGrad;
            for (auto &p : attention->parameters())
                p.set_data(torch::randn(p.sizes()) * 0.3);
        }
        const int64_t t = 24;
        const auto x = torch::randn({2, t, c.model.hiddenSize});
        LayerInputs shared, own, causal; // no rotary tables: a NoPE layer
        shared.windowMask = slidingWindowMask(t, 5, x.device());
        const auto a = attention->forward(x, shared), b = attention->forward(x, own);
        QVERIFY(torch::equal(a, b));
        SelfAttention global(c, ModelRuntime {}, torch::TensorOptions().dtype(torch::kFloat), -1); // no layer: not sliding
        {
            torch::NoGradGuard noGrad;
            const auto weights = attention->named_parameters();
            for (auto &p : global->named_parameters())
                p.value().set_data(weights[p.key()].clone());
        }
        QVERIFY(!torch::allclose(global->forward(x, causal), a, 1e-4, 1e-4));
    }

    void matchesTheFloat64Window_data()
    {
        QTest::addColumn<int>("headDim");
        QTest::addColumn<int>("window");
        QTest::addColumn<int>("kvHeads");
        QTest::newRow("d64 W1 (each query its own key)") << 64 << 1 << 2;
        QTest::newRow("d64 W17") << 64 << 17 << 2;
        QTest::newRow("d128 W128 MHA") << 128 << 128 << 8;
        QTest::newRow("d256 W100 GQA (Gemma's head)") << 256 << 100 << 2;
        QTest::newRow("d256 W299 (the whole sequence but one)") << 256 << 299 << 4;
        QTest::newRow("d128 W1000 (wider than the sequence: causal)") << 128 << 1000 << 1;
    }
    void matchesTheFloat64Window()
    {
        if (!torch::cuda::is_available() || !windowKernelRuns(torch::Device(torch::kCUDA, 0), torch::kBFloat16, 8))
            QSKIP("no CUDA device with LibTorch's windowed flash kernel");
        QFETCH(int, headDim);
        QFETCH(int, window);
        QFETCH(int, kvHeads);
        torch::manual_seed(headDim + window);
        const int64_t b = 2, heads = 8, t = 300;
        const double scale = 1.0 / std::sqrt(static_cast<double>(headDim));
        // [B, T, heads, D] storage seen as [B, heads, T, D], as the rotary leaves q and k.
        const auto q0 = torch::randn({b, t, heads, headDim}, torch::kDouble).transpose(1, 2);
        const auto k0 = torch::randn({b, t, kvHeads, headDim}, torch::kDouble).transpose(1, 2);
        const auto v0 = torch::randn({b, t, kvHeads, headDim}, torch::kDouble).transpose(1, 2);
        const auto gradOut = torch::randn({b, heads, t, headDim}, torch::kDouble);
        auto bf = [](const torch::Tensor &x) { return x.to(torch::kBFloat16).to(torch::kDouble); };   // the inputs both sides see
        auto qr = bf(q0).requires_grad_(), kr = bf(k0).requires_grad_(), vr = bf(v0).requires_grad_();
        const auto ref = referenceAttention(qr, kr, vr, scale, window);
        ref.backward(bf(gradOut));
        auto dev = [](const torch::Tensor &x) { return x.transpose(1, 2).to(torch::kBFloat16).cuda().transpose(1, 2).requires_grad_(); };
        auto q = dev(q0), k = dev(k0), v = dev(v0);
        const auto out = windowedAttention(q, k, v, scale, window);
        out.backward(gradOut.to(torch::kBFloat16).cuda());
        // With a window of 1 the softmax has one key: dq and dk are exactly 0, so they are judged
        // against dv's scale (the same products of O(1) values) rather than their own.
        const double gradScale = vr.grad().abs().max().item<double>();
        const double eo = relativeError(out, ref), eq = relativeError(q.grad(), qr.grad(), gradScale), ek = relativeError(k.grad(), kr.grad(), gradScale),
                     ev = relativeError(v.grad(), vr.grad());
        // bf16 output and gradients (8 bits of mantissa) from fp32 accumulation: a few roundings.
        QVERIFY2(eo < 2e-2 && eq < 2e-2 && ek < 2e-2 && ev < 2e-2,
                 qPrintable(QStringLiteral("relative: out %1, dq %2, dk %3, dv %4").arg(eo).arg(eq).arg(ek).arg(ev)));
        // A window one narrower must differ: the test sees the window's edge (where the two windows'
        // outputs differ by more than bf16 can tell: not at 299 of 300 keys, one key in 299 apart).
        if (window > 1 && window < t) {
            const auto narrower = referenceAttention(qr.detach(), kr.detach(), vr.detach(), scale, window - 1);
            if (relativeError(narrower, ref) > 0.1)
                QVERIFY2(relativeError(out, narrower) > 5e-2, qPrintable(QStringLiteral("against the narrower window %1").arg(relativeError(out, narrower))));
        }
    }

    // A sliding-window model's fused step: the windowed kernel (the default on a card) against SDPA's
    // masked form (flash switched off, so windowKernelTakes refuses): the same loss and gradients.
    void aModelStepMatchesTheMaskedForm()
    {
#if PB_TORCH_AT_LEAST(2, 0)
        if (!torch::cuda::is_available())
            QSKIP("no CUDA device");
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.attentionHeads = 8;
        c.model.kvHeads = 2;
        c.model.headDim = 64;
        c.model.layers = 3;
        c.model.traits.slidingWindow = 24;
        c.model.traits.globalLayers = LayerSelection {2, {}};
        c.train.precision = Precision::Bf16;
        c.train.kernels = KernelPath::Fused;
        torch::manual_seed(3);
        const auto tokens = torch::randint(0, c.model.vocabSize, {2, 97}, torch::kLong).cuda();
        const auto x = tokens.slice(1, 0, 96), y = tokens.slice(1, 1, 97);
        auto run = [&](bool flash, std::vector<torch::Tensor> &grads) {
            at::globalContext().setSDPUseFlash(flash);
            DecoderModel model(c, ModelRuntime {}, torch::kCUDA);
            model->initialise(1);
            auto loss = model->loss(x, y);
            loss.backward();
            for (const auto &p : model->trainableParameters())
                grads.push_back(p.grad().to(torch::kDouble).cpu());
            at::globalContext().setSDPUseFlash(true);
            return loss.item<double>();
        };
        std::vector<torch::Tensor> windowed, masked;
        const double a = run(true, windowed), b = run(false, masked);
        QVERIFY2(std::abs(a - b) <= 1e-2 * std::abs(b), qPrintable(QStringLiteral("loss %1 against %2").arg(a).arg(b)));
        QCOMPARE(windowed.size(), masked.size());
        double worst = 0;
        for (size_t i = 0; i < windowed.size(); ++i)
            worst = std::max(worst, relativeError(windowed[i], masked[i]));
        QVERIFY2(worst < 5e-2, qPrintable(QStringLiteral("worst relative gradient difference %1").arg(worst)));
#else
        QSKIP("LibTorch 1.13 has no SDPA to compare with");
#endif
    }
};

QTEST_GUILESS_MAIN(TestWindowedAttention)
#include "tst_windowed_attention.moc"
