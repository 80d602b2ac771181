// LoRA dropout's gradient ops (model/FusedOps.h: addDroppedLowRank, droppedInputProduct, which
// model/MixedLinear.cpp calls under dropout) against float64: the composites on the CPU and, where
// there is a GPU, the CUDA kernels and the composites beyond their rank limits.
#include "model/FusedOps.h"

#include "RelativeNormError.h"
#include "TestDevices.h"

#include <QtTest>

using namespace pb;

namespace {

// Both tests' rows: each device with each (rank, bf16) case, named "<device> <fp32|bf16> rank <n>".
void addRankRows(std::initializer_list<std::pair<int, bool>> cases)
{
    QTest::addColumn<int>("rank");
    QTest::addColumn<bool>("bf16");
    QTest::addColumn<QString>("device");
    for (const QString &device : devices())
        for (const auto &[rank, bf16] : cases)
            QTest::addRow("%s %s rank %d", qPrintable(device), bf16 ? "bf16" : "fp32", rank) << rank << bf16 << device;
}

} // namespace

class TestLoraDropoutGrads : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // LoRA dropout's share of the input's gradient, dx += native_dropout_backward(dDown A, keep,
    // scale): the composite on CPU, the kernel on a card (rank 16), the composite beyond its rank
    // limit, against float64; dropped elements untouched; a mask of another shape refused by name.
    void droppedLowRankAddMatchesReference_data() { addRankRows({{16, false}, {16, true}, {96, true}}); }
    void droppedLowRankAddMatchesReference()
    {
        QFETCH(int, rank);
        QFETCH(bool, bf16);
        QFETCH(QString, device);
        torch::manual_seed(rank);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t rows = 24, cols = 136;
        auto dx = torch::randn({rows, cols}).to(dev, type);
        const auto dDown = torch::randn({rows, rank}).to(dev, type), a = (torch::randn({rank, cols}) * 0.2).to(dev, type);
        const auto keep = torch::rand({rows, cols}).to(dev) > 0.25;
        const auto before = dx.clone();
        addDroppedLowRank(dx, dDown, a, keep, 1.0 / 0.75);
        const auto ref = before.to(torch::kDouble) + keep.to(torch::kDouble) * (dDown.to(torch::kDouble).matmul(a.to(torch::kDouble)) / 0.75);
        // Three roundings to bf16 (2^-8 relative each); fp32 to its summation order.
        QVERIFY2(relativeNormError(dx, ref) < (bf16 ? 8e-3 : 1e-6), qPrintable(QString::number(relativeNormError(dx, ref))));
        QVERIFY(torch::equal(dx.masked_select(keep.logical_not()), before.masked_select(keep.logical_not())));
        bool refused = false;
        try {
            addDroppedLowRank(dx, dDown, a, keep.narrow(1, 0, cols - 8), 1.0);
        } catch (const c10::Error &e) {
            refused = QString::fromUtf8(e.what()).contains(QLatin1String("addDroppedLowRank"));
        }
        QVERIFY(refused);
    }

    // lora_A's gradient under dropout, dDown^T native_dropout_backward(x, keep, scale) in fp32: the
    // composite on CPU, the kernel on a card (ranks 8 and 16), the composite over its rank limit.
    void droppedInputProductMatchesReference_data() { addRankRows({{16, false}, {8, true}, {32, true}}); }
    void droppedInputProductMatchesReference()
    {
        QFETCH(int, rank);
        QFETCH(bool, bf16);
        QFETCH(QString, device);
        torch::manual_seed(rank + 1);
        const torch::Device dev(device.toStdString());
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t rows = 520, cols = 136;
        const auto x = torch::randn({rows, cols}).to(dev, type), dDown = torch::randn({rows, rank}).to(dev, type);
        const auto keep = torch::rand({rows, cols}).to(dev) > 0.25;
        const auto dA = droppedInputProduct(dDown, x, keep, 1.0 / 0.75);
        QCOMPARE(dA.scalar_type(), torch::kFloat);
        QCOMPARE(dA.sizes(), (torch::IntArrayRef {rank, cols}));
        const auto dropped = (x.to(torch::kFloat) / 0.75).to(type).to(torch::kDouble) * keep.to(torch::kDouble);
        const auto ref = dDown.to(torch::kDouble).t().matmul(dropped);
        // fp32 sums of exact products (the kernel, cuBLAS into fp32); LibTorch 1.13's CPU bf16 GEMM
        // rounds its output to bf16 before the fp32 copy.
        const double bound = bf16 && dev.is_cpu() ? 8e-3 : 1e-5;
        QVERIFY2(relativeNormError(dA, ref) < bound, qPrintable(QString::number(relativeNormError(dA, ref))));
    }
};

QTEST_GUILESS_MAIN(TestLoraDropoutGrads)
#include "tst_lora_dropout_grads.moc"
