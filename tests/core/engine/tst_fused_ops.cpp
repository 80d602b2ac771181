// The fused ops (model/FusedOps.h: cross-entropy gradient in place, RMSNorm in Llama's, Gemma's and OLMo 2's forms, SwiGLU and GeGLU, rotary)
// against the eager ops they replace, on the CPU's composite ops and, where there is a GPU, the
// CUDA kernels: odd sizes, unaligned storage (the kernels' one-element path), fp32 and bf16; and a bf16-autocast model whose fused path gives the
// eager path's loss and gradients within bf16's rounding.
#include "config/Presets.h"
#include "engine/MemoryProbe.h"
#include "engine/TorchCompat.h"
#include "model/FusedOps.h"
#include "model/Transformer.h"

#include "RelativeNormError.h"
#include "TestDevices.h"

#include <QtTest>

using namespace pb;

class TestFusedOps : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The in-place loss and gradient of a chunk against autograd's cross-entropy, on odd shapes,
    // with ignored rows, in fp32 and bf16 (whose gradient is the fp32 one rounded once).
    void crossEntropyGradInPlaceMatchesAutograd_data()
    {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 7x1001", qPrintable(device)) << 7 << 1001 << false << device;
            QTest::addRow("%s fp32 1x3", qPrintable(device)) << 1 << 3 << false << device;
            QTest::addRow("%s bf16 13x517", qPrintable(device)) << 13 << 517 << true << device;
            QTest::addRow("%s bf16 5x151936", qPrintable(device)) << 5 << 151936 << true << device;
        }
    }
    void crossEntropyGradInPlaceMatchesAutograd()
    {
        QFETCH(int, rows);
        QFETCH(int, vocab);
        QFETCH(bool, bf16);
        QFETCH(QString, device);
        torch::manual_seed(rows * 1000 + vocab);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const auto logits = (torch::randn({rows, vocab}) * 4).to(dev, type);
        auto targets = torch::randint(0, vocab, {rows}, torch::kLong);
        if (rows > 2)
            targets[1] = -100;
        targets = targets.to(dev);
        const double scale = 0.25;
        auto ref = logits.to(torch::kFloat).clone().requires_grad_(true);
        const auto refLoss = torch::nn::functional::cross_entropy(
            ref, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kNone));
        (refLoss.sum() * scale).backward();
        auto work = logits.clone();
        const auto rowLoss = crossEntropyGradInPlace(work, targets, scale);
        // fp32 loss and gradient to fp32 rounding; a bf16 gradient to one bf16 rounding (2^-8
        // relative) of the fp32 one, the kernel's fast exp adding a few fp32 ulps before it.
        QVERIFY(torch::allclose(rowLoss, refLoss, 1e-5, 1e-5));
        QCOMPARE(work.scalar_type(), type);
        QVERIFY(torch::allclose(work.to(torch::kFloat), ref.grad(), bf16 ? 1e-2 : 1e-5, 1e-7));
    }

    // Granite's divisor and Gemma's soft cap inside the loss: the rows' losses and the stored
    // logits' gradient against autograd through z / divisor and softcap * tanh(z / softcap) in
    // fp32 (a bf16 chunk: the composite rounds each step as eager does, the kernel none).
    void crossEntropyGradInPlaceCapsLikeAutograd_data()
    {
        QTest::addColumn<double>("divisor");
        QTest::addColumn<double>("softcap");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 softcap 30", qPrintable(device)) << 1.0 << 30.0 << false << device;
            QTest::addRow("%s fp32 divisor 2.5 softcap 20", qPrintable(device)) << 2.5 << 20.0 << false << device;
            QTest::addRow("%s fp32 divisor 8", qPrintable(device)) << 8.0 << 0.0 << false << device;
            QTest::addRow("%s bf16 softcap 30", qPrintable(device)) << 1.0 << 30.0 << true << device;
        }
    }
    void crossEntropyGradInPlaceCapsLikeAutograd()
    {
        QFETCH(double, divisor);
        QFETCH(double, softcap);
        QFETCH(bool, bf16);
        QFETCH(QString, device);
        torch::manual_seed(7);
        const torch::Device dev(device.toStdString());
        const int64_t rows = 9, vocab = 1032;
        const auto logits = (torch::randn({rows, vocab}) * 40).to(dev, bf16 ? torch::kBFloat16 : torch::kFloat);
        auto targets = torch::randint(0, vocab, {rows}, torch::kLong);
        targets[2] = -100;
        targets = targets.to(dev);
        auto ref = logits.to(torch::kFloat).clone().requires_grad_(true);
        auto capped = ref / divisor;
        if (softcap > 0)
            capped = softcap * torch::tanh(capped / softcap);
        const auto refLoss = torch::nn::functional::cross_entropy(
            capped, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kNone));
        (refLoss.sum() * 0.5).backward();
        auto work = logits.clone();
        const auto rowLoss = crossEntropyGradInPlace(work, targets, 0.5, divisor, softcap);
        const double tolerance = bf16 ? 2e-2 : 1e-5;
        QVERIFY(torch::allclose(rowLoss, refLoss, tolerance, 1e-5));
        if (bf16) {
            // A capped logit near 30 rounded to bf16 moves by up to 0.06, its probability by 6%: the
            // gradient is compared as a whole.
            const double error = ((work.to(torch::kFloat) - ref.grad()).norm() / ref.grad().norm()).item<double>();
            qInfo("bf16 gradient error %.3g", error);
            QVERIFY(error < 3e-2);
        } else {
            QVERIFY(torch::allclose(work.to(torch::kFloat), ref.grad(), tolerance, 1e-7));
        }
        // The cap's derivative matters here: the uncapped gradient differs by more than the bound.
        if (softcap > 0)
            QVERIFY(!torch::allclose(work.to(torch::kFloat) * (1 - torch::tanh(ref / divisor / softcap).square()), ref.grad(), tolerance, 1e-7));
    }

    // The fused RMSNorm's output and gradients against LlamaRMSNorm's composite ops, fp32 and
    // under bf16 autocast (where the fused output is bf16: the composite's output rounded once).
    void fusedRmsNormMatchesComposite_data()
    {
        QTest::addColumn<bool>("autocast");
        QTest::addColumn<bool>("bf16Input");
        QTest::addColumn<int>("cols");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 67", qPrintable(device)) << false << false << 67 << device;
            QTest::addRow("%s bf16 autocast 67", qPrintable(device)) << true << false << 67 << device;
            QTest::addRow("%s bf16 autocast 2048", qPrintable(device)) << true << false << 2048 << device;
            QTest::addRow("%s bf16 input 896", qPrintable(device)) << false << true << 896 << device;
        }
    }
    void fusedRmsNormMatchesComposite()
    {
        QFETCH(bool, autocast);
        QFETCH(bool, bf16Input);
        QFETCH(int, cols);
        QFETCH(QString, device);
        torch::manual_seed(3);
        const torch::Device dev(device.toStdString());
        const auto type = bf16Input ? torch::kBFloat16 : torch::kFloat;
        const auto x = torch::randn({3, 5, cols}).to(dev, type).requires_grad_(true);
        const auto w = (torch::rand({cols}) + 0.5).to(dev, type).requires_grad_(true);
        const auto dy = torch::randn({3, 5, cols}).to(dev);
        const double eps = 1e-5;
        auto composite = [&](const torch::Tensor &in, const torch::Tensor &weight) {
            const auto h = in.to(torch::kFloat);
            return weight * (h * torch::rsqrt(h.pow(2).mean(-1, true) + eps)).to(in.scalar_type());
        };
        const auto ref = composite(x, w);
        ref.backward(dy.to(ref.scalar_type()));
        const auto refDx = x.grad().clone(), refDw = w.grad().clone();
        x.grad().zero_();
        w.grad().zero_();
        torch::Tensor y;
        compat::setAutocast(dev.type(), autocast, torch::kBFloat16);
        y = fusedRmsNorm(x, w, eps);
        compat::setAutocast(dev.type(), false, torch::kBFloat16);
        QCOMPARE(y.scalar_type(), autocast || bf16Input ? torch::kBFloat16 : torch::kFloat);
        // The output: the composite's rounded once to bf16 (one bf16 ulp where the fp32 sums of
        // squares differ in order), or fp32 to fp32 rounding.
        const bool low = autocast || bf16Input;
        QVERIFY(torch::allclose(y.to(torch::kFloat), ref.to(torch::kFloat), low ? 8e-3 : 1e-5, 1e-5));
        y.backward(dy.to(y.scalar_type()));
        // Gradients: the incoming gradient rounded to bf16 under autocast, so within bf16's 2^-8.
        const double tol = low ? 2e-2 : 1e-4;
        QVERIFY(torch::allclose(x.grad().to(torch::kFloat), refDx.to(torch::kFloat), tol, tol));
        QVERIFY(torch::allclose(w.grad().to(torch::kFloat), refDw.to(torch::kFloat), tol, low ? 5e-2 : 1e-4));
    }

    // Gemma's and OLMo 2's forms of the fused RMSNorm against their composites (model/Transformer.cpp's
    // eager RmsNorm): (1 + weight) and the fp32 product, on per-head rows (128 columns: one warp a
    // row on CUDA) and on hidden-width rows (a block a row), fp32 and bf16 input.
    void fusedRmsNormFormsMatchComposite_data()
    {
        QTest::addColumn<bool>("unitOffset");
        QTest::addColumn<bool>("scaleInFp32");
        QTest::addColumn<bool>("bf16Input");
        QTest::addColumn<int>("cols");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s gemma fp32 128", qPrintable(device)) << true << true << false << 128 << device;
            QTest::addRow("%s gemma bf16 128", qPrintable(device)) << true << true << true << 128 << device;
            QTest::addRow("%s gemma bf16 2304", qPrintable(device)) << true << true << true << 2304 << device;
            QTest::addRow("%s olmo2 fp32 67", qPrintable(device)) << false << true << false << 67 << device;
            QTest::addRow("%s olmo2 bf16 1100", qPrintable(device)) << false << true << true << 1100 << device;
            QTest::addRow("%s unit offset only bf16 96", qPrintable(device)) << true << false << true << 96 << device;
            QTest::addRow("%s llama bf16 128", qPrintable(device)) << false << false << true << 128 << device;
        }
    }
    void fusedRmsNormFormsMatchComposite()
    {
        QFETCH(bool, unitOffset);
        QFETCH(bool, scaleInFp32);
        QFETCH(bool, bf16Input);
        QFETCH(int, cols);
        QFETCH(QString, device);
        torch::manual_seed(cols);
        const torch::Device dev(device.toStdString());
        const auto type = bf16Input ? torch::kBFloat16 : torch::kFloat;
        const auto x = (torch::randn({4, 9, cols}) * 2).to(dev, type).requires_grad_(true);
        // Gemma's weights sit near 0 (the scale is 1 + w), the others near 1.
        const auto w = ((torch::rand({cols}) - 0.5) * 0.4 + (unitOffset ? 0.0 : 1.0)).to(dev, type).requires_grad_(true);
        const auto dy = torch::randn({4, 9, cols}).to(dev, type);
        const double eps = 1e-6;
        const auto h = x.to(torch::kFloat);
        const auto xn = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
        const auto ref = scaleInFp32 ? (xn * (unitOffset ? 1.0 + w.to(torch::kFloat) : w.to(torch::kFloat))).to(type)
                                     : (unitOffset ? 1.0 + w : w) * xn.to(type);
        ref.backward(dy.to(ref.scalar_type()));
        const auto refDx = x.grad().clone(), refDw = w.grad().clone();
        x.grad().zero_();
        w.grad().zero_();
        const auto y = fusedRmsNorm(x, w, eps, unitOffset, scaleInFp32);
        QCOMPARE(y.scalar_type(), type);
        const double fwd = bf16Input ? 8e-3 : 1e-5, tol = bf16Input ? 2e-2 : 1e-4;
        QVERIFY2(relativeNormError(y, ref) < fwd, qPrintable(QStringLiteral("output off by %1").arg(relativeNormError(y, ref))));
        y.backward(dy);
        QVERIFY2(relativeNormError(x.grad(), refDx) < tol, qPrintable(QStringLiteral("dx off by %1").arg(relativeNormError(x.grad(), refDx))));
        QVERIFY2(relativeNormError(w.grad(), refDw) < tol, qPrintable(QStringLiteral("dw off by %1").arg(relativeNormError(w.grad(), refDw))));
        // The form matters: Llama's form differs from Gemma's on the same tensors.
        if (unitOffset) {
            torch::NoGradGuard noGrad;
            QVERIFY(relativeNormError(fusedRmsNorm(x, w, eps), ref) > 0.1);
        }
    }

    // The residual add folded into the norm (fusedAddRmsNorm's one node) against the add followed
    // by fusedRmsNorm, as the block ran them before: both outputs and the gradients of the stream,
    // the branch and the weight, with a gradient arriving at the sum itself (the next residual add)
    // and at the norm's output. The CPU's node runs the same LibTorch ops, so it must agree bit for
    // bit; the kernel rounds where those ops round.
    void fusedAddRmsNormMatchesAddThenNorm_data()
    {
        QTest::addColumn<QString>("form");   // stream/branch dtypes
        QTest::addColumn<double>("scale");
        QTest::addColumn<bool>("gemma");
        QTest::addColumn<int>("cols");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            for (int cols : {2048, 67}) {
                QTest::addRow("%s fp32 stream, bf16 autocast %d", qPrintable(device), cols) << "autocast" << 1.0 << false << cols << device;
                QTest::addRow("%s fp32 %d", qPrintable(device), cols) << "fp32" << 1.0 << false << cols << device;
                QTest::addRow("%s bf16 %d", qPrintable(device), cols) << "bf16" << 1.0 << false << cols << device;
            }
            QTest::addRow("%s bf16, residual scale 0.22 (Granite)", qPrintable(device)) << "bf16" << 0.22 << false << 1536 << device;
            QTest::addRow("%s autocast, residual scale 0.22", qPrintable(device)) << "autocast" << 0.22 << false << 1536 << device;
            QTest::addRow("%s autocast, Gemma's norm", qPrintable(device)) << "autocast" << 1.0 << true << 2304 << device;
        }
    }
    void fusedAddRmsNormMatchesAddThenNorm()
    {
        QFETCH(QString, form);
        QFETCH(double, scale);
        QFETCH(bool, gemma);
        QFETCH(int, cols);
        QFETCH(QString, device);
        torch::manual_seed(cols);
        const torch::Device dev(device.toStdString());
        const bool autocast = form == QLatin1String("autocast");
        const auto stream = form == QLatin1String("bf16") ? torch::kBFloat16 : torch::kFloat;
        const auto branchType = form == QLatin1String("fp32") ? torch::kFloat : torch::kBFloat16;
        const auto x0 = (torch::randn({2, 7, cols}) * 3).to(dev, stream), b0 = torch::randn({2, 7, cols}).to(dev, branchType);
        const auto w0 = ((torch::rand({cols}) - 0.5) * 0.4 + (gemma ? 0.0 : 1.0)).to(dev, stream);
        const auto dh = torch::randn({2, 7, cols}).to(dev, stream), dy = torch::randn({2, 7, cols}).to(dev, branchType);
        torch::Tensor h[2], y[2], dx[2], db[2], dw[2];
        for (int fold : {0, 1}) {
            const auto x = x0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
            compat::setAutocast(dev.type(), autocast, torch::kBFloat16);
            if (fold) {
                std::tie(h[1], y[1]) = fusedAddRmsNorm(x, b, scale, w, 1e-6, gemma, gemma);
            } else {
                h[0] = x + (scale == 1.0 ? b : b * scale);
                y[0] = fusedRmsNorm(h[0], w, 1e-6, gemma, gemma);
            }
            compat::setAutocast(dev.type(), false, torch::kBFloat16);
            // One node, except for rows the kernel does not take (then the two ops): checked, so
            // the comparison cannot pass by running the reference twice.
            const bool oneNode = !(dev.is_cuda() && cols % 8 != 0);
            if (fold)
                QVERIFY2(h[1].grad_fn() && QString::fromStdString(h[1].grad_fn()->name()).contains(QLatin1String("AddRmsNorm")) == oneNode,
                         h[1].grad_fn() ? h[1].grad_fn()->name().c_str() : "no grad_fn");
            torch::autograd::backward({h[fold], y[fold]}, {dh, dy});
            dx[fold] = x.grad();
            db[fold] = b.grad();
            dw[fold] = w.grad();
        }
        QCOMPARE(h[1].scalar_type(), h[0].scalar_type());
        QCOMPARE(y[1].scalar_type(), y[0].scalar_type());
        QCOMPARE(db[1].scalar_type(), branchType);
        const bool kernel = dev.is_cuda() && cols % 8 == 0;
        const std::pair<const char *, std::pair<torch::Tensor, torch::Tensor>> outputs[] = {
            {"h", {h[1], h[0]}}, {"y", {y[1], y[0]}}, {"dx", {dx[1], dx[0]}}, {"dbranch", {db[1], db[0]}}, {"dw", {dw[1], dw[0]}}};
        for (const auto &[what, pair] : outputs) {
            // The kernel's sums run in another order than LibTorch's (the statistics, dw's
            // partials): one unit of the dtype at most. Elsewhere the very same ops.
            const double e = relativeNormError(pair.first, pair.second);
            const double bound = kernel ? (pair.second.scalar_type() == torch::kFloat ? 1e-6 : 8e-3) : 0.0;
            QVERIFY2(e <= bound, qPrintable(QStringLiteral("%1 off by %2 (bound %3)").arg(QLatin1String(what)).arg(e).arg(bound)));
        }
    }

    // The GeGLU forms of the fused gated activation (Gemma's gelu_pytorch_tanh, the exact erf GELU)
    // against eager's gelu(gate) * up and its backward.
    void gegluMatchesEager_data()
    {
        QTest::addColumn<bool>("tanh");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("offset");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s tanh fp32", qPrintable(device)) << true << false << 0 << device;
            QTest::addRow("%s tanh bf16", qPrintable(device)) << true << true << 0 << device;
            QTest::addRow("%s tanh bf16 unaligned", qPrintable(device)) << true << true << 1 << device;
            QTest::addRow("%s erf fp32", qPrintable(device)) << false << false << 0 << device;
            QTest::addRow("%s erf bf16", qPrintable(device)) << false << true << 0 << device;
        }
    }
    void gegluMatchesEager()
    {
        QFETCH(bool, tanh);
        QFETCH(bool, bf16);
        QFETCH(int, offset);
        QFETCH(QString, device);
        const int n = 4100;
        torch::manual_seed(n + offset);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const auto g0 = (torch::randn({n + offset}) * 3).to(dev, type), u0 = torch::randn({n + offset}).to(dev, type);
        const auto dy = torch::randn({n}).to(dev, type);
        auto g = g0.slice(0, offset).detach().requires_grad_(true), u = u0.slice(0, offset).detach().requires_grad_(true);
        const auto ref = torch::gelu(g, tanh ? "tanh" : "none") * u;
        ref.backward(dy);
        const auto refDg = g.grad().clone(), refDu = u.grad().clone();
        g.grad().zero_();
        u.grad().zero_();
        const auto out = fusedGatedActivation(g, u, tanh ? GateActivation::GeluTanh : GateActivation::GeluErf);
        QCOMPARE(out.scalar_type(), type);
        out.backward(dy);
        const double fwd = bf16 ? 8e-3 : 1e-6, bwd = bf16 ? 1.6e-2 : 1e-5;
        QVERIFY2(relativeNormError(out, ref) < fwd, qPrintable(QStringLiteral("output off by %1").arg(relativeNormError(out, ref))));
        QVERIFY2(relativeNormError(u.grad(), refDu) < fwd, qPrintable(QStringLiteral("du off by %1").arg(relativeNormError(u.grad(), refDu))));
        QVERIFY2(relativeNormError(g.grad(), refDg) < bwd, qPrintable(QStringLiteral("dg off by %1").arg(relativeNormError(g.grad(), refDg))));
        // The other GELU differs by up to about 5e-4 of a unit: in fp32 the check tells them apart
        // (in bf16 the difference is below the rounding).
        if (!bf16) {
            torch::NoGradGuard noGrad;
            QVERIFY(relativeNormError(fusedGatedActivation(g, u, tanh ? GateActivation::GeluErf : GateActivation::GeluTanh), ref) > 1e-5);
        }
    }

    void swigluMatchesEager_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("offset");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 1001", qPrintable(device)) << 1001 << false << 0 << device;
            QTest::addRow("%s bf16 4096", qPrintable(device)) << 4096 << true << 0 << device;
            QTest::addRow("%s bf16 4100 packs and tail", qPrintable(device)) << 4100 << true << 0 << device;
            QTest::addRow("%s bf16 4099 unaligned", qPrintable(device)) << 4099 << true << 1 << device;
        }
    }
    // The same roundings as eager's silu and multiply (forward) and their backwards: equal up to
    // the last bit of an fp32 exp, which can move a bf16 rounding by one unit (2^-8) in the
    // forward and, through two roundings, two units in gate's gradient.
    void swigluMatchesEager()
    {
        QFETCH(int, n);
        QFETCH(bool, bf16);
        QFETCH(int, offset);
        QFETCH(QString, device);
        torch::manual_seed(n);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        // Storage one element longer, sliced at `offset`: an offset of one element is not 16-byte aligned.
        const auto g0 = (torch::randn({n + offset}) * 3).to(dev, type), u0 = torch::randn({n + offset}).to(dev, type);
        const auto dy = torch::randn({n}).to(dev, type);
        auto g = g0.slice(0, offset).detach().requires_grad_(true), u = u0.slice(0, offset).detach().requires_grad_(true);
        const auto ref = torch::silu(g) * u;
        ref.backward(dy);
        const auto refDg = g.grad().clone(), refDu = u.grad().clone();
        g.grad().zero_();
        u.grad().zero_();
        const auto out = fusedSwiglu(g, u);
        QCOMPARE(out.scalar_type(), type);
        out.backward(dy);
        const double fwd = bf16 ? 8e-3 : 1e-6, bwd = bf16 ? 1.6e-2 : 1e-5;
        QVERIFY(torch::allclose(out.to(torch::kFloat), ref.to(torch::kFloat), fwd, 1e-6));
        QVERIFY(torch::allclose(u.grad().to(torch::kFloat), refDu.to(torch::kFloat), fwd, 1e-6));
        QVERIFY(torch::allclose(g.grad().to(torch::kFloat), refDg.to(torch::kFloat), bwd, 1e-6));
    }

    void packedGatedActivationMatchesEager_data()
    {
        QTest::addColumn<int>("width");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<bool>("gelu");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 silu width 40", qPrintable(device)) << 40 << false << false << device;
            QTest::addRow("%s bf16 silu width 1024", qPrintable(device)) << 1024 << true << false << device;
            QTest::addRow("%s bf16 gelu tanh width 1027 (no packs)", qPrintable(device)) << 1027 << true << true << device;
        }
    }
    // Phi-3's and GLM-4's MLP on one fused gate_up output: as eager's chunk, activation and product,
    // and the one gradient of that output as autograd gathers the two halves' (same tolerances as
    // swigluMatchesEager: the composite is eager's ops, the kernel its roundings).
    void packedGatedActivationMatchesEager()
    {
        QFETCH(int, width);
        QFETCH(bool, bf16);
        QFETCH(bool, gelu);
        QFETCH(QString, device);
        torch::manual_seed(width);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        auto gateUp = (torch::randn({2, 3, 2 * width}) * 3).to(dev, type).requires_grad_(true);
        const auto dy = torch::randn({2, 3, width}).to(dev, type);
        const auto g = gateUp.narrow(-1, 0, width), u = gateUp.narrow(-1, width, width);
        const auto ref = (gelu ? torch::gelu(g, "tanh") : torch::silu(g)) * u;
        ref.backward(dy);
        const auto refGrad = gateUp.grad().clone();
        gateUp.grad().zero_();
        const auto out = fusedGatedActivationPacked(gateUp, gelu ? GateActivation::GeluTanh : GateActivation::Silu);
        QCOMPARE(out.sizes(), ref.sizes());
        out.backward(dy);
        const double fwd = bf16 ? 8e-3 : 1e-6, bwd = bf16 ? 1.6e-2 : 1e-5;
        QVERIFY(torch::allclose(out.to(torch::kFloat), ref.to(torch::kFloat), fwd, 1e-6));
        QVERIFY(torch::allclose(gateUp.grad().to(torch::kFloat), refGrad.to(torch::kFloat), bwd, 1e-6));
        QVERIFY(!torch::allclose(gateUp.grad().narrow(-1, 0, width).to(torch::kFloat), gateUp.grad().narrow(-1, width, width).to(torch::kFloat)));
    }

    void rotaryMatchesReference_data()
    {
        QTest::addColumn<int>("headDim");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s fp32 hd 10", qPrintable(device)) << 10 << false << device;
            QTest::addRow("%s bf16 hd 64", qPrintable(device)) << 64 << true << device;
            QTest::addRow("%s bf16 hd 128", qPrintable(device)) << 128 << true << device;
        }
    }
    // x * cos + rotate_half(x) * sin computed in fp32 and rounded once, and its exact transpose as
    // the gradient, against autograd of the fp32 composite. The tables are random (not the model's
    // duplicated halves) so the transpose is checked entry by entry.
    void rotaryMatchesReference()
    {
        QFETCH(int, headDim);
        QFETCH(bool, bf16);
        QFETCH(QString, device);
        torch::manual_seed(headDim);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t b = 2, t = 7, heads = 3;
        const auto x = torch::randn({b, t, heads, headDim}).to(dev, type).requires_grad_(true);
        const auto cos = torch::randn({t, headDim}).to(dev), sin = torch::randn({t, headDim}).to(dev);
        const auto dy = torch::randn({b, t, heads, headDim}).to(dev, type);
        const auto xf = x.to(torch::kFloat);
        const auto c4 = cos.view({1, t, 1, headDim}), s4 = sin.view({1, t, 1, headDim});
        const auto ref = xf * c4 + rotateHalf(xf) * s4;
        ref.backward(dy.to(torch::kFloat));
        const auto refDx = x.grad().clone();
        x.grad().zero_();
        const auto y = fusedRotary(x, cos, sin);
        QCOMPARE(y.scalar_type(), type);
        QCOMPARE(y.sizes(), x.sizes());
        y.backward(dy);
        // One rounding of the fp32 result (bf16: 2^-8 relative); fp32 to its summation order.
        const double tol = bf16 ? 8e-3 : 1e-5;
        QVERIFY(torch::allclose(y.to(torch::kFloat), ref.detach(), tol, 1e-5));
        QVERIFY(torch::allclose(x.grad().to(torch::kFloat), refDx.to(torch::kFloat), tol, 1e-5));
    }

    // The folded residual adds (the norm nodes that take the add, and the adds deferred from block
    // to block) against the same model with every add apart (ModelRuntime::foldResidualAdd off):
    // the same loss and gradients bit for bit, no higher step peak, and a forward peak at most one
    // branch tensor higher (a folded add holds its branch while the norm's output is made). LoRA
    // on down_proj alone under bf16 autocast (a 16-bit stream, gradient-free attention outputs)
    // and full training; a 64-token head leaves the forward's peak inside the blocks.
    void foldedAddsKeepLossAndPeak_data()
    {
        QTest::addColumn<bool>("lora");
        QTest::newRow("LoRA on down_proj") << true;
        QTest::newRow("full") << false;
    }
    void foldedAddsKeepLossAndPeak()
    {
        QFETCH(bool, lora);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.layers = 2;
        c.model.vocabSize = 64;
        c.train.precision = Precision::Bf16Mixed;
        c.train.kernels = KernelPath::Fused;
        if (lora) {
            c.train.mode = TrainMode::Lora;
            c.train.lora.targets = {"down_proj"};
        }
        const auto tokens = (torch::manual_seed(5), torch::randint(0, c.model.vocabSize, {4, 129}, torch::kLong));
        const auto x = tokens.slice(1, 0, 128), y = tokens.slice(1, 1, 129);
        MemoryProbe probe("cpu");
        double losses[2];
        int64_t peaks[2], forwardPeaks[2];
        std::map<std::string, torch::Tensor> grads[2];
        for (int fold : {0, 1}) {
            ModelRuntime runtime;
            runtime.fusedAttention = false;
            runtime.foldResidualAdd = fold == 1;
            DecoderModel model(c, runtime, torch::kCPU);
            model->initialise(1);
            for (auto &item : model->named_parameters()) // PEFT's zero B would leave A's gradient zero
                if (item.key().find("lora_B") != std::string::npos) {
                    torch::NoGradGuard noGrad;
                    item.value().normal_(0, 0.02);
                }
            const int64_t before = probe.read().allocatedBytes;
            probe.resetPeak();
            compat::setAutocast(torch::kCPU, true, torch::kBFloat16);
            auto loss = model->loss(x, y);
            compat::setAutocast(torch::kCPU, false, torch::kBFloat16);
            forwardPeaks[fold] = probe.read().peakAllocatedBytes - before;
            loss.backward();
            peaks[fold] = probe.read().peakAllocatedBytes - before;
            losses[fold] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                if (item.value().grad().defined())
                    grads[fold][item.key()] = item.value().grad().clone();
        }
        qInfo("peak above the weights, forward / step: adds apart %lld / %lld B, folded %lld / %lld B; loss %.9g / %.9g",
              static_cast<long long>(forwardPeaks[0]), static_cast<long long>(peaks[0]), static_cast<long long>(forwardPeaks[1]),
              static_cast<long long>(peaks[1]), losses[0], losses[1]);
        QCOMPARE(losses[1], losses[0]);
        QCOMPARE(grads[1].size(), grads[0].size());
        for (const auto &[name, g] : grads[0])
            QVERIFY2(torch::equal(grads[1].at(name), g), name.c_str());
        // A folded add holds its branch while the norm's output is made (the kernel reads both);
        // apart, the branch went before the norm ran: at most that one 16-bit tensor more.
        const int64_t branchBytes = 2 * x.numel() * c.model.hiddenSize;
        QVERIFY2(forwardPeaks[1] <= forwardPeaks[0] + branchBytes, "the folded adds raised the forward's peak by more than one branch");
        QVERIFY2(peaks[1] <= peaks[0], "the folded adds raised the step's peak");
    }

    // The tiny model under bf16 autocast, same seed and batch, eager and fused (norms, SwiGLU,
    // rotary, loss), each against the same model in fp32: bf16 puts both a few per cent from the
    // fp32 gradients, so the test asks that fused is no further from them than eager is (its
    // worst tensor within 1.5x eager's worst, its loss within 2^-8) rather than a fixed bound
    // that bf16 noise alone could break; a wrong term would be O(1) off.
    void modelPathsAgreeUnderBf16_data()
    {
        QTest::addColumn<bool>("lora");
        QTest::addColumn<bool>("recompute");
        QTest::addColumn<QString>("device");
        for (const QString &device : devices()) {
            QTest::addRow("%s full", qPrintable(device)) << false << false << device;
            QTest::addRow("%s full, recompute", qPrintable(device)) << false << true << device;
            QTest::addRow("%s LoRA", qPrintable(device)) << true << false << device;
            QTest::addRow("%s LoRA, recompute", qPrintable(device)) << true << true << device;
        }
    }
    void modelPathsAgreeUnderBf16()
    {
        QFETCH(bool, lora);
        QFETCH(bool, recompute);
        QFETCH(QString, device);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.precision = Precision::Bf16Mixed;
        if (lora)
            c.train.mode = TrainMode::Lora;
        const torch::Device dev(device.toStdString());
        auto tokens = (torch::manual_seed(5), torch::randint(0, c.model.vocabSize, {4, 65}, torch::kLong)).to(dev);
        const auto x = tokens.slice(1, 0, 64), y = tokens.slice(1, 1, 65);
        // Runs: 0 fp32 eager (the reference, holding run 1's weights), 1 bf16 eager, 2 bf16 fused.
        std::map<std::string, torch::Tensor> grads[3], weights;
        double losses[3];
        for (int run : {1, 2, 0}) {
            c.train.kernels = run == 2 ? KernelPath::Fused : KernelPath::Eager;
            c.train.precision = run == 0 ? Precision::Fp32 : Precision::Bf16Mixed;
            DecoderModel model(c, ModelRuntime {dev.is_cuda(), recompute}, dev);
            model->initialise(1);
            torch::manual_seed(11);
            for (auto &item : model->named_parameters()) {
                torch::NoGradGuard noGrad;
                if (run == 0) // LoRA stores frozen weights in bf16: the reference takes those very values
                    item.value().copy_(weights.at(item.key()));
                else if (item.key().find("lora_B") != std::string::npos) // PEFT's zero B would leave A's gradient zero
                    item.value().normal_(0, 0.02);
                if (run == 1)
                    weights[item.key()] = item.value().clone();
            }
            compat::setAutocast(dev.type(), run > 0, torch::kBFloat16);
            auto loss = model->loss(x, y);
            compat::setAutocast(dev.type(), false, torch::kBFloat16);
            loss.backward();
            losses[run] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                if (item.value().grad().defined())
                    grads[run][item.key()] = item.value().grad();
        }
        QCOMPARE(grads[2].size(), grads[0].size());
        double worst[3] = {0, 0, 0};
        std::string worstName;
        for (const auto &[name, g] : grads[0])
            for (int run = 1; run < 3; ++run) {
                const double e = relativeNormError(grads[run][name], g);
                if (e > worst[run] && run == 2)
                    worstName = name;
                worst[run] = std::max(worst[run], e);
            }
        qInfo("loss fp32 %.9g, bf16 eager %.9g, bf16 fused %.9g; worst gradient error against fp32: eager %.4g, fused %.4g (%s)", losses[0],
              losses[1], losses[2], worst[1], worst[2], worstName.c_str());
        QVERIFY(std::abs(losses[2] - losses[0]) <= std::ldexp(std::abs(losses[0]), -8));
        QVERIFY2(worst[2] <= 1.5 * worst[1], worstName.c_str());
    }
};

QTEST_GUILESS_MAIN(TestFusedOps)
#include "tst_fused_ops.moc"
