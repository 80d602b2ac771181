// The float8 recipe of train.precision = fp8-* (model/Fp8Linear.h) on CPU, where it is emulated:
// rounding to e4m3 and e5m2 against every value of the formats (float64), the scaled matmul and
// both gradients against a float64 reference of the same recipe, and a tiny model that learns
// through it.
#include "config/Presets.h"
#include "engine/Optimizer.h"
#include "engine/TorchCompat.h"
#include "model/Fp8Linear.h"
#include "model/Transformer.h"
#include "ProjectionGroupCase.h"

#include <QtTest>

#include <cmath>
#include <vector>

using namespace pb;

namespace {

// Every non-negative finite value of the format, ascending: subnormals m / 2^M * 2^(1 - bias),
// normals (1 + m / 2^M) * 2^(e - bias). e4m3fn keeps exponent 15 but not its last mantissa (NaN);
// e5m2 gives up exponent 31 (infinities and NaNs).
std::vector<double> grid(bool e5m2)
{
    const int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, exponents = e5m2 ? 31 : 16;
    const int m = 1 << mantissaBits;
    std::vector<double> v;
    for (int e = 0; e < exponents; ++e)
        for (int f = 0; f < m; ++f) {
            if (!e5m2 && e == 15 && f == m - 1)
                continue;
            v.push_back(e == 0 ? std::ldexp(double(f) / m, 1 - bias) : std::ldexp(1.0 + double(f) / m, e - bias));
        }
    return v;
}

// The nearest grid value, ties to the even one (alternate grid values have even mantissas, zero first).
double nearest(const std::vector<double> &g, double x)
{
    const double a = std::min(std::fabs(x), g.back());
    size_t best = 0;
    for (size_t i = 1; i < g.size(); ++i) {
        const double d = std::fabs(g[i] - a), b = std::fabs(g[best] - a);
        if (d < b || (d == b && i % 2 == 0))
            best = i;
    }
    return std::copysign(g[best], x);
}

// The recipe in float64: per-row (or per-tensor) e4m3 scales of a [M, K] and b [N, K], the sum of
// grid products times both scales.
torch::Tensor reference(const torch::Tensor &a, const torch::Tensor &b, bool perRow, bool aE5m2)
{
    auto quant = [&](const torch::Tensor &t, bool e5m2) {
        const double max = e5m2 ? 57344.0 : 448.0;
        auto amax = perRow ? t.abs().amax({1}, true) : t.abs().amax().reshape({1, 1});
        auto scale = amax.to(torch::kFloat).clamp_min(1e-12) / torch::full_like(amax.to(torch::kFloat), max);
        return std::make_pair(roundToFloat8(t.to(torch::kFloat) / scale, e5m2).to(torch::kDouble), scale.to(torch::kDouble));
    };
    const auto [qa, sa] = quant(a, aE5m2);
    const auto [qb, sb] = quant(b, false);
    return torch::matmul(qa, qb.t()) * sa * (perRow ? sb.reshape({1, -1}) : sb);
}

void expectClose(const torch::Tensor &got, const torch::Tensor &want, const char *what)
{
    // The output is bf16: within one of its units of the float64 value (fp32 accumulation adds far less).
    const auto err = (got.to(torch::kDouble) - want).abs();
    const auto bound = want.abs() * std::ldexp(1.0, -8) + 1e-6;
    QVERIFY2(err.le(bound).all().item<bool>(), qPrintable(QStringLiteral("%1: worst error %2").arg(QLatin1String(what)).arg((err - bound).max().item<double>())));
}

} // namespace

class TestFp8 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::manual_seed(3); }

    void roundsToTheNearestValue_data()
    {
        QTest::addColumn<bool>("e5m2");
        QTest::newRow("e4m3") << false;
        QTest::newRow("e5m2") << true;
    }
    void roundsToTheNearestValue()
    {
        QFETCH(bool, e5m2);
        const auto g = grid(e5m2);
        QCOMPARE(g.back(), e5m2 ? 57344.0 : 448.0);
        QCOMPARE(g.size(), size_t(e5m2 ? 124 : 127));
        // Every value and every midpoint (ties), both signs, values past the largest (saturated),
        // and random values over the whole range including subnormals.
        std::vector<float> xs;
        for (size_t i = 0; i < g.size(); ++i) {
            xs.push_back(float(g[i]));
            if (i + 1 < g.size())
                xs.push_back(float((g[i] + g[i + 1]) / 2));
        }
        xs.push_back(float(g.back() * 1.5));
        xs.push_back(1e30F);
        const auto random = torch::exp(torch::rand({4000}) * (e5m2 ? 30.0 : 18.0) - (e5m2 ? 19.0 : 11.0));
        for (int64_t i = 0; i < random.numel(); ++i)
            xs.push_back(random[i].item<float>());
        const size_t n = xs.size();
        for (size_t i = 0; i < n; ++i)
            xs.push_back(-xs[i]);
        const auto got = roundToFloat8(torch::tensor(xs), e5m2);
        int wrong = 0;
        QString first;
        for (size_t i = 0; i < xs.size(); ++i) {
            const double want = nearest(g, xs[i]);
            if (double(got[int64_t(i)].item<float>()) != want) {
                if (wrong++ == 0)
                    first = QStringLiteral("%1 -> %2, expected %3").arg(double(xs[i]), 0, 'g', 10).arg(double(got[int64_t(i)].item<float>()), 0, 'g', 10).arg(want, 0, 'g', 10);
            }
        }
        QVERIFY2(wrong == 0, qPrintable(QStringLiteral("%1 wrong; first: %2").arg(wrong).arg(first)));
    }

    // The forward and both gradients of the emulated linear against the float64 recipe; inputs
    // spread over several decades so that the scales and the rounding both matter.
    void linearMatchesTheRecipe_data()
    {
        QTest::addColumn<bool>("rowwise");
        QTest::newRow("rowwise") << true;
        QTest::newRow("tensorwise") << false;
    }
    void linearMatchesTheRecipe()
    {
        QFETCH(bool, rowwise);
        const auto x0 = (torch::randn({2, 16, 64}) * torch::exp(torch::randn({2, 16, 1}) * 2)).to(torch::kBFloat16);
        const auto w0 = torch::randn({48, 64}) * 0.05;
        auto x = x0.clone().requires_grad_(true);
        auto w = w0.clone().requires_grad_(true);
        const auto y = fp8Linear(x, w, torch::Tensor(), rowwise ? Fp8Scaling::Rowwise : Fp8Scaling::Tensorwise);
        QCOMPARE(y.scalar_type(), torch::kBFloat16);
        QCOMPARE(y.sizes().vec(), (std::vector<int64_t> {2, 16, 48}));
        const auto x2 = x0.reshape({-1, 64});
        expectClose(y.reshape({-1, 48}), reference(x2, w0, rowwise, false), "forward");

        const auto g = (torch::randn({2, 16, 48}) * 1e-3).to(torch::kBFloat16);
        y.backward(g);
        const auto g2 = g.reshape({-1, 48});
        // dX = dY W (W^T's rows scaled over the outputs; dY in e5m2 under tensorwise); dW = dY^T X.
        expectClose(x.grad().reshape({-1, 64}), reference(g2, w0.t().contiguous(), rowwise, !rowwise), "input gradient");
        if (rowwise) {
            expectClose(w.grad(), reference(g2.t().contiguous(), x2.t().contiguous(), true, false), "weight gradient");
        } else {
            // Tensorwise: the forward's e4m3 X and the e5m2 dY, transposed with their scales.
            const auto sx = x2.abs().amax().to(torch::kFloat).reshape({1}) / torch::full({1}, 448.0F), sg = g2.abs().amax().to(torch::kFloat).reshape({1}) / torch::full({1}, 57344.0F);
            const auto qx = roundToFloat8(x2.to(torch::kFloat) / sx, false).to(torch::kDouble);
            const auto qg = roundToFloat8(g2.to(torch::kFloat) / sg, true).to(torch::kDouble);
            expectClose(w.grad(), torch::matmul(qg.t(), qx) * sx.to(torch::kDouble) * sg.to(torch::kDouble), "weight gradient");
        }
        // A frozen weight gets no gradient and the input's is unchanged.
        auto x3 = x0.clone().requires_grad_(true);
        fp8Linear(x3, w0, torch::Tensor(), rowwise ? Fp8Scaling::Rowwise : Fp8Scaling::Tensorwise).backward(g);
        QVERIFY(torch::equal(x3.grad(), x.grad()));
    }

    // Projections reading one input through fp8LinearShared (q, k, v; gate, up): their outputs,
    // weight and bias gradients are fp8Linear's one by one bit for bit, the input's gradient the sum
    // of theirs in the projections' order; a frozen weight among them gets none. On the card too.
    void sharedInputMatchesOneByOne_data()
    {
        QTest::addColumn<bool>("rowwise");
        QTest::addColumn<bool>("cuda");
        QTest::newRow("rowwise") << true << false;
        QTest::newRow("tensorwise") << false << false;
        QTest::newRow("rowwise, card") << true << true;
        QTest::newRow("tensorwise, card") << false << true;
    }
    void sharedInputMatchesOneByOne()
    {
        QFETCH(bool, rowwise);
        QFETCH(bool, cuda);
        if (cuda && (!torch::cuda::is_available() || !fp8Native(torch::kCUDA)))
            QSKIP("no CUDA device with LibTorch float8");
        const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
        const auto scaling = rowwise ? Fp8Scaling::Rowwise : Fp8Scaling::Tensorwise;
        const auto x0 = (torch::randn({2, 32, 64}) * torch::exp(torch::randn({2, 32, 1}) * 2)).to(torch::kBFloat16).to(device);
        const ProjectionGroupCase group(device);
        const auto &outs = group.outs;
        const auto &b0 = group.b0;
        const auto &grads = group.grads;
        std::vector<torch::Tensor> ws, bs, w1, b1;
        group.leaves(ws, bs);
        group.leaves(w1, b1);
        auto xs = x0.clone().requires_grad_(true);
        const auto ys = fp8LinearShared(xs, ws, bs, scaling);
        QCOMPARE(ys.size(), outs.size());
        torch::autograd::backward(ys, grads);
        torch::Tensor gxSum;
        for (size_t i = 0; i < outs.size(); ++i) {
            auto x1 = x0.clone().requires_grad_(true);
            const auto y1 = fp8Linear(x1, w1[i], b1[i], scaling);
            QVERIFY2(torch::equal(ys[i], y1), qPrintable(QStringLiteral("output %1").arg(i)));
            y1.backward(grads[i]);
            gxSum = gxSum.defined() ? gxSum + x1.grad() : x1.grad();
            QCOMPARE(ws[i].grad().defined(), i != 2);
            if (i != 2)
                QVERIFY2(torch::equal(ws[i].grad(), w1[i].grad()), qPrintable(QStringLiteral("weight gradient %1").arg(i)));
            if (b0[i].defined())
                QVERIFY2(torch::equal(bs[i].grad(), b1[i].grad()), qPrintable(QStringLiteral("bias gradient %1").arg(i)));
        }
        QVERIFY(torch::equal(xs.grad(), gxSum));
    }

    // On a GPU: the cast (a kernel in a CUDA build) gives the emulation's values and scales bit
    // for bit, per row and per tensor, from fp32 and bf16, straight and transposed (the backward's
    // cast of X^T, W^T and dY^T); shapes for each of the row kernel's register widths (up to 2048,
    // 4096 and, fp32, 16384 columns), the two passes of a wide bf16 row (bands and tiles cut at
    // their edges), the one-block-a-row kernel (wider fp32 rows; columns not a multiple of 8),
    // transposed tiles cut at both edges and the composite fallback (rows not a multiple of 16).
    // And the native linear stays within bf16 rounding of the emulated one.
    void nativeCastMatchesTheEmulation()
    {
        if (!torch::cuda::is_available() || !fp8Native(torch::kCUDA))
            QSKIP("no CUDA device with LibTorch float8");
        const std::vector<std::pair<int64_t, int64_t>> shapes {{96, 4096}, {80, 1040}, {48, 14336}, {32, 17000}, {40, 100}, {24, 72}};
        for (const auto &[rows, cols] : shapes)
            for (auto type : {torch::kFloat, torch::kBFloat16})
                for (bool perRow : {true, false})
                    for (bool e5m2 : {false, true}) {
                        const auto t = (torch::randn({rows, cols}) * torch::exp(torch::randn({rows, 1}) * 3) * torch::exp(torch::randn({1, cols}))).to(type);
                        const QByteArray what = QStringLiteral("%1 x %2 %3 %4 %5").arg(rows).arg(cols).arg(QLatin1String(type == torch::kFloat ? "fp32" : "bf16"))
                                                    .arg(QLatin1String(perRow ? "rowwise" : "tensorwise"), QLatin1String(e5m2 ? "e5m2" : "e4m3")).toUtf8();
                        const auto [q, scale] = float8Quantize(t.cuda(), perRow, e5m2);
                        const auto [qe, scaleE] = float8Quantize(t, perRow, e5m2);
                        QVERIFY2(torch::equal(scale.cpu(), scaleE), what.constData());
                        QVERIFY2(torch::equal(q.cpu().to(torch::kFloat), qe), what.constData());
                        const auto [qt, scaleT] = float8QuantizeTransposed(t.cuda(), perRow, e5m2);
                        const auto [qte, scaleTE] = float8Quantize(t.t().contiguous(), perRow, e5m2);
                        QVERIFY2(torch::equal(scaleT.cpu(), scaleTE), ("transposed " + what).constData());
                        QVERIFY2(torch::equal(qt.cpu().to(torch::kFloat), qte), ("transposed " + what).constData());
                    }
        // The float8 tensor cores accumulate each block of products in fewer bits than fp32 before
        // adding it to the fp32 sum, so an output where its terms cancel is off by more than its
        // own rounding: each element within a bf16 unit of its size plus 2^-12 of the largest.
        const auto x = torch::randn({64, 256}).to(torch::kBFloat16), w = torch::randn({128, 256}) * 0.05;
        const auto native = fp8Linear(x.cuda(), w.cuda(), torch::Tensor(), Fp8Scaling::Rowwise).cpu().to(torch::kDouble);
        const auto emulated = fp8Linear(x, w, torch::Tensor(), Fp8Scaling::Rowwise).to(torch::kDouble);
        const double largest = emulated.abs().max().item<double>(), worst = (native - emulated).abs().max().item<double>();
        const double relative = ((native - emulated).norm() / emulated.norm()).item<double>();
        QVERIFY2(((native - emulated).abs() <= emulated.abs() * std::ldexp(1.0, -7) + largest * std::ldexp(1.0, -12)).all().item<bool>() &&
                     relative < std::ldexp(1.0, -8),
                 qPrintable(QStringLiteral("largest |y| %1, worst |native - emulated| %2, relative norm %3").arg(largest).arg(worst).arg(relative)));
    }

    // A tiny model under each recipe (emulated on CPU) learns: the loss falls as under bf16-mixed.
    void aModelLearnsThroughIt_data()
    {
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("lora");
        QTest::newRow("fp8-rowwise") << int(Precision::Fp8Rowwise) << false;
        QTest::newRow("fp8-tensorwise") << int(Precision::Fp8Tensorwise) << false;
        // The fused path adds LoRA's product by its GEMM; the float8 base's output is a view made
        // inside its function, which may not be changed in place.
        QTest::newRow("fp8-rowwise LoRA, fused path") << int(Precision::Fp8Rowwise) << true;
    }
    void aModelLearnsThroughIt()
    {
        QFETCH(int, precision);
        QFETCH(bool, lora);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.precision = static_cast<Precision>(precision);
        if (lora) {
            c.train.mode = TrainMode::Lora;
            c.train.kernels = KernelPath::Fused;
        }
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(1);
        auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
        torch::manual_seed(5);
        const auto tokens = torch::randint(0, c.model.vocabSize, {2, 33}, torch::kLong);
        const auto x = tokens.slice(1, 0, 32), y = tokens.slice(1, 1, 33);
        double first = 0, last = 0;
        for (int step = 0; step < 20; ++step) {
            // As the engine runs fp8 (engine/PilotSteps.cpp): its 16-bit parts under bf16 autocast.
            // Without it, a LoRA adapter's fp32 product meets the float8 base's bf16 output.
            compat::setAutocast(torch::kCPU, lora, torch::kBFloat16);
            auto loss = model->loss(x, y);
            compat::setAutocast(torch::kCPU, false, torch::kBFloat16);
            (step == 0 ? first : last) = loss.item<double>();
            loss.backward();
            optimizer->step(3e-3);
            optimizer->zeroGrad();
        }
        // The adapters alone (rank 16 on q, k, v, o) move the loss less in 20 steps.
        QVERIFY2(std::isfinite(last) && last < first - (lora ? 0.1 : 0.5), qPrintable(QStringLiteral("loss %1 -> %2").arg(first).arg(last)));
    }
};

QTEST_GUILESS_MAIN(TestFp8)
#include "tst_fp8.moc"
