// The fused path's projections under autocast (model/MixedLinear.h): one node for the projections
// that read one input gives autocast's linear one by one: the same outputs, the weights' gradients
// in fp32 (bit for bit on CPU, where the product is made in 16 bits and cast as autograd does;
// within bf16 rounding of it on a card, where the GEMM writes fp32), the input's gradient the sum
// of theirs; LoRA adapters inside it as LoraLinearImpl's add after it; and it stays out of the calls
// whose memory it would change.
#include "engine/TorchCompat.h"
#include "model/MixedLinear.h"
#include "ProjectionGroupCase.h"
#include "RelativeNormError.h"

#include <QtTest>

#include <vector>

using namespace pb;

class TestMixedLinear : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void matchesAutocastLinearOneByOne_data()
    {
        QTest::addColumn<bool>("cuda");
        QTest::newRow("cpu") << false;
        QTest::newRow("card") << true;
    }
    void matchesAutocastLinearOneByOne()
    {
        QFETCH(bool, cuda);
        if (cuda && !torch::cuda::is_available())
            QSKIP("no CUDA device");
        torch::manual_seed(7);
        const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
        const auto x0 = torch::randn({2, 32, 64}).to(torch::kBFloat16).to(device);
        const ProjectionGroupCase group(device);
        const auto &outs = group.outs;
        const auto &b0 = group.b0;
        const auto &grads = group.grads;
        std::vector<torch::Tensor> ws, bs, w1, b1;
        group.leaves(ws, bs);
        group.leaves(w1, b1);
        auto xs = x0.clone().requires_grad_(true);
        std::vector<torch::Tensor> ys, y1;
        std::vector<torch::Tensor> x1;
        {
            compat::AutocastGuard autocast(device.type(), true, torch::kBFloat16);
            QVERIFY(mixedLinearApplies(xs));
            ys = mixedLinearShared(xs, ws, bs);
            for (size_t i = 0; i < outs.size(); ++i) {
                x1.push_back(x0.clone().requires_grad_(true));
                // at::linear, as Python's F.linear (the C++ frontend's functional::linear adds a
                // bias apart, a second rounding).
                y1.push_back(torch::linear(x1[i], w1[i], b1[i]));
            }
        }
        QCOMPARE(ys.size(), outs.size());
        QVERIFY(QString::fromStdString(ys[0].grad_fn()->name()).contains(QLatin1String("MixedLinearFunction")));
        torch::autograd::backward(ys, grads);
        torch::Tensor gxSum;
        for (size_t i = 0; i < outs.size(); ++i) {
            const QByteArray what = QByteArray::number(static_cast<int>(i));
            QVERIFY2(!ys[i].is_view() && ys[i].scalar_type() == torch::kBFloat16, what.constData());
            QVERIFY2(torch::equal(ys[i], y1[i]), ("output " + what).constData());
            y1[i].backward(grads[i]);
            gxSum = gxSum.defined() ? gxSum + x1[i].grad() : x1[i].grad();
            QCOMPARE(ws[i].grad().defined(), i != 2);
            if (i != 2) {
                QCOMPARE(ws[i].grad().scalar_type(), torch::kFloat);
                if (cuda) // the GEMM's fp32 sum against autograd's bf16 product cast to fp32
                    QVERIFY2(relativeNormError(ws[i].grad(), w1[i].grad()) < 4e-3, ("weight gradient " + what).constData());
                else
                    QVERIFY2(torch::equal(ws[i].grad(), w1[i].grad()), ("weight gradient " + what).constData());
            }
            if (b0[i].defined()) {
                QCOMPARE(bs[i].grad().scalar_type(), torch::kFloat);
                QVERIFY2(relativeNormError(bs[i].grad(), b1[i].grad()) < 4e-3, ("bias gradient " + what).constData());
            }
        }
        // One rounding of the summed products against autograd's rounding after each add.
        QCOMPARE(xs.grad().scalar_type(), torch::kBFloat16);
        QVERIFY2(relativeNormError(xs.grad(), gxSum) < 4e-3, qPrintable(QString::number(relativeNormError(xs.grad(), gxSum))));
    }

    // LoRA adapters inside the node (the fused path) against the node without them and
    // LoraLinearImpl's own in-GEMM add after it, as the fused LoRA ran before: the same outputs bit
    // for bit, the adapters' gradients in fp32 (lora_A's bit for bit on CPU, lora_B's and the
    // input's within bf16 rounding: one rounding of the scaled sum against two), and the bases
    // frozen in bf16 as LoRA keeps them. The input both needing a gradient and not (the first block
    // of a LoRA model reads a frozen embedding). With dropout the node draws each adapter's mask as
    // torch::dropout does, so from one seed both see the same dropped inputs; on a card the input's
    // gradient then takes the masked product in one kernel (addDroppedLowRank).
    void adaptersInsideMatchTheAddAfter_data()
    {
        QTest::addColumn<bool>("cuda");
        QTest::addColumn<bool>("inputGrad");
        QTest::addColumn<double>("dropout");
        QTest::newRow("cpu") << false << true << 0.0;
        QTest::newRow("cpu, frozen input") << false << false << 0.0;
        QTest::newRow("cpu, dropout") << false << true << 0.25;
        QTest::newRow("card") << true << true << 0.0;
        QTest::newRow("card, dropout") << true << true << 0.25;
        QTest::newRow("card, dropout, frozen input") << true << false << 0.25;
    }
    void adaptersInsideMatchTheAddAfter()
    {
        QFETCH(bool, cuda);
        QFETCH(bool, inputGrad);
        QFETCH(double, dropout);
        if (cuda && !torch::cuda::is_available())
            QSKIP("no CUDA device");
        torch::manual_seed(11);
        const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
        const auto x0 = torch::randn({2, 32, 64}).to(torch::kBFloat16).to(device);
        const ProjectionGroupCase group(device);
        const int64_t rank = 4;
        const std::vector<double> scalings {2.0, 0.75, 0.0}; // the third projection has no adapter
        std::vector<torch::Tensor> a0, b0;
        for (size_t i = 0; i < 2; ++i) {
            a0.push_back((torch::randn({rank, 64}) * 0.1).to(device));
            b0.push_back((torch::randn({group.outs[i], rank}) * 0.1).to(device));
        }
        auto run = [&](bool inside, std::vector<torch::Tensor> &a, std::vector<torch::Tensor> &b, torch::Tensor &x) {
            std::vector<torch::Tensor> ws, bs;
            group.leaves(ws, bs);
            for (auto &w : ws)
                w = w.detach().to(torch::kBFloat16); // LoRA's frozen bf16 base
            for (size_t i = 0; i < 2; ++i) {
                a.push_back(a0[i].clone().requires_grad_(true));
                b.push_back(b0[i].clone().requires_grad_(true));
            }
            x = x0.clone().requires_grad_(inputGrad);
            torch::manual_seed(29); // the same dropout draws for both
            compat::AutocastGuard autocast(device.type(), true, torch::kBFloat16);
            std::vector<MixedAdapter> adapters;
            for (size_t i = 0; i < 2; ++i)
                adapters.push_back({a[i], b[i], scalings[i], dropout});
            adapters.push_back({});
            auto ys = mixedLinearShared(x, ws, bs, inside ? adapters : std::vector<MixedAdapter> {});
            if (!inside)
                for (size_t i = 0; i < 2; ++i) {
                    const auto down = torch::linear(dropout > 0 ? torch::dropout(x, dropout, true) : x, a[i]);
                    ys[i].view({-1, group.outs[i]}).addmm_(down.reshape({-1, rank}), b[i].to(torch::kBFloat16).t(), 1.0, scalings[i]);
                }
            return ys;
        };
        std::vector<torch::Tensor> aIn, bIn, aOut, bOut;
        torch::Tensor xIn, xOut;
        const auto inside = run(true, aIn, bIn, xIn), after = run(false, aOut, bOut, xOut);
        for (size_t i = 0; i < inside.size(); ++i)
            QVERIFY2(torch::equal(inside[i], after[i]), qPrintable(QStringLiteral("output %1").arg(i)));
        torch::autograd::backward(inside, group.grads);
        torch::autograd::backward(after, group.grads);
        for (size_t i = 0; i < 2; ++i) {
            const QByteArray what = QByteArray::number(static_cast<int>(i));
            QCOMPARE(aIn[i].grad().scalar_type(), torch::kFloat);
            QCOMPARE(bIn[i].grad().scalar_type(), torch::kFloat);
            if (cuda)
                QVERIFY2(relativeNormError(aIn[i].grad(), aOut[i].grad()) < 4e-3, ("lora_A gradient " + what).constData());
            else
                QVERIFY2(torch::equal(aIn[i].grad(), aOut[i].grad()), ("lora_A gradient " + what).constData());
            QVERIFY2(relativeNormError(bIn[i].grad(), bOut[i].grad()) < 4e-3, ("lora_B gradient " + what).constData());
            QVERIFY2(aIn[i].grad().abs().sum().item<double>() > 0 && bIn[i].grad().abs().sum().item<double>() > 0, what.constData());
        }
        QCOMPARE(xIn.grad().defined(), inputGrad);
        if (inputGrad) {
            QCOMPARE(xIn.grad().scalar_type(), torch::kBFloat16);
            QVERIFY2(relativeNormError(xIn.grad(), xOut.grad()) < 4e-3, qPrintable(QString::number(relativeNormError(xIn.grad(), xOut.grad()))));
        }
    }

    // The first pass of a recomputed block runs under no_grad, where autocast's cached casts are
    // what the estimator counts; an fp32 input is cast by autocast once per projection; without
    // autocast the model's own dtypes run.
    void staysOutOfCallsItWouldChange()
    {
        const auto bf16 = torch::randn({4, 8}).to(torch::kBFloat16);
        const auto fp32 = torch::randn({4, 8});
        QVERIFY(!mixedLinearApplies(bf16));
        compat::AutocastGuard autocast(torch::kCPU, true, torch::kBFloat16);
        QVERIFY(mixedLinearApplies(bf16));
        QVERIFY(!mixedLinearApplies(fp32));
        torch::NoGradGuard noGrad;
        QVERIFY(!mixedLinearApplies(bf16));
    }

    // The fused LoRA adds its adapter's product into the base output in place: the output must be
    // a tensor of its own, and the gradients must flow through the in-place add.
    void outputTakesAnInPlaceAdd()
    {
        torch::manual_seed(3);
        auto x = torch::randn({3, 5, 16}).to(torch::kBFloat16).requires_grad_(true);
        auto w = (torch::randn({8, 16}) * 0.1).requires_grad_(true);
        const auto a = torch::randn({15, 4}).to(torch::kBFloat16), b = torch::randn({4, 8}).to(torch::kBFloat16);
        torch::Tensor y;
        {
            compat::AutocastGuard autocast(torch::kCPU, true, torch::kBFloat16);
            y = mixedLinearShared(x, {w}, {torch::Tensor()})[0];
            y.view({-1, 8}).addmm_(a, b, 1.0, 0.5);
        }
        y.sum().backward();
        QVERIFY(x.grad().defined() && w.grad().defined());
        // d(sum)/dW = ones^T X whatever was added in place.
        const auto expected = torch::ones({15, 8}).t().matmul(x.detach().reshape({15, 16}).to(torch::kFloat));
        QVERIFY(relativeNormError(w.grad(), expected) < 1e-2);
    }
};

QTEST_GUILESS_MAIN(TestMixedLinear)
#include "tst_mixed_linear.moc"
