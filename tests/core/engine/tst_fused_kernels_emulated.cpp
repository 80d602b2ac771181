// The fused path's CUDA kernels (kernels/FusedKernels.cu: RMSNorm forward and backward, the gated
// activations, rotary, cross-entropy with its cap, LoRA dropout's two gradient kernels) and QLoRA's NF4 dequantisation
// (kernels/Nf4Kernels.cu), their device and launch code run on the host under CudaEmulation.h:
// the first against the same maths written here in float64 LibTorch, each in fp32 and bf16, on the
// 16-byte row kernels and on the scalar ones they fall back to (odd widths, unaligned pointers); NF4
// bit for bit against model/Nf4.cpp's composite, as its header promises. Until now only the card
// checked them (tests/bench/h200_fused_kernels_check.py, engine_tst_nf4 on a CUDA build).
#include "config/Nf4Format.h"
#include "model/Nf4.h"

#include <torch/torch.h>

#include <QtTest>

#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

// After every other header, so its macros (__global__, threadIdx, ...) reach only the kernels' code.
#include "CudaEmulation.h"

// In a namespace of its own: on a CUDA build pb_kernels defines the same names for the card. The
// NF4 kernel reads the format's constants from ::pb.
namespace emulated {
namespace pb {
using namespace ::pb;
}
#include "kernels/FusedKernels.cu"
#include "kernels/Nf4Kernels.cu"
}

namespace kernels = emulated::pb::kernels;

namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kDouble);

kernels::Dtype dtypeOf(torch::ScalarType t) { return t == torch::kFloat ? kernels::Dtype::Float32 : kernels::Dtype::BFloat16; }

// |a - b| over the largest |b|: fp32 kernels within `fp32`, bf16 within a few bf16 units.
double relativeError(const torch::Tensor &actual, const torch::Tensor &expected)
{
    const auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
    return ((a - e).abs().max() / e.abs().max().clamp_min(1e-30)).item<double>();
}

double tolerance(torch::ScalarType t, double fp32) { return t == torch::kFloat ? fp32 : 2e-2; }

#define CHECK_CLOSE(actual, expected, bound, what)                                                                                                   \
    do {                                                                                                                                              \
        const double e_ = relativeError((actual), (expected));                                                                                        \
        QVERIFY2(e_ <= (bound), qPrintable(QStringLiteral("%1: relative error %2 (bound %3)").arg(QLatin1String(what)).arg(e_).arg(bound)));         \
    } while (0)

} // namespace

class TestFusedKernelsEmulated : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void rmsNorm_data()
    {
        QTest::addColumn<int>("cols");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("partials"); // the backward's blocks; 0: rmsNormPartials(rows)
        for (bool bf16 : {false, true}) {
            const char *type = bf16 ? "bf16" : "fp32";
            QTest::addRow("%s, 64 columns (16-byte rows, 8 threads a row)", type) << 64 << bf16 << 6 << 0;
            QTest::addRow("%s, 1032 columns (16-byte rows, a block a row)", type) << 1032 << bf16 << 6 << 0;
            QTest::addRow("%s, 100 columns (a warp a row)", type) << 100 << bf16 << 6 << 0;
            QTest::addRow("%s, 1030 columns (a block a row)", type) << 1030 << bf16 << 6 << 0;
            // Each other row shape of dispatchRowShape: 16 lanes a row; a warp with 2 and 4 packs
            // a lane; a block with 2 and 4 (hidden sizes such as 4,096 and 5,120 take these).
            for (int cols : {72, 264, 520, 2056, 4104})
                QTest::addRow("%s, %d columns (16-byte rows)", type, cols) << cols << bf16 << 6 << 0;
            // With 13 rows over 1 or 2 blocks the backward's blocks stride over rows (the next rows'
            // loads taken one or two rows ahead of the sums), and a group of several rows a block ends
            // on rows past the last.
            for (int cols : {1032, 1536, 2048})
                QTest::addRow("%s, %d columns, 13 rows over 2 blocks", type, cols) << cols << bf16 << 13 << 2;
            QTest::addRow("%s, 264 columns, 13 rows over 1 block", type) << 264 << bf16 << 13 << 1;
            QTest::addRow("%s, 4104 columns, 13 rows over 2 blocks", type) << 4104 << bf16 << 13 << 2;
        }
    }

    void rmsNorm()
    {
        QFETCH(int, cols);
        QFETCH(bool, bf16);
        QFETCH(int, rows);
        QFETCH(int, partials);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const float eps = 1e-6f;
        torch::manual_seed(cols);
        const auto x = torch::randn({rows, cols}).to(type), w = (1 + 0.3 * torch::randn({cols})).to(type), dy = torch::randn({rows, cols}).to(type);
        auto y = torch::empty({rows, cols}, type), dx = torch::empty({rows, cols}, type);
        auto rstd = torch::empty({rows}, torch::kFloat);
        const kernels::RmsNormForm form {false, false};
        kernels::rmsNormForward(x.data_ptr(), dtypeOf(type), w.data_ptr(), dtypeOf(type), y.data_ptr(), dtypeOf(type), rstd.data_ptr<float>(), rows, cols,
                                eps, form, nullptr);
        if (partials == 0)
            partials = static_cast<int>(kernels::rmsNormPartials(rows));
        auto dwPartial = torch::zeros({partials, cols}, torch::kFloat);
        kernels::rmsNormBackward(dy.data_ptr(), dtypeOf(type), x.data_ptr(), dtypeOf(type), w.data_ptr(), dtypeOf(type), rstd.data_ptr<float>(),
                                 dx.data_ptr(), dwPartial.data_ptr<float>(), partials, rows, cols, form, nullptr);

        // LlamaRMSNorm in float64, its gradients by autograd.
        const auto x64 = x.to(kF64).requires_grad_(true), w64 = w.to(kF64).requires_grad_(true);
        const auto r64 = torch::rsqrt(x64.pow(2).mean(-1, true) + eps);
        const auto y64 = w64 * (x64 * r64);
        const auto grads = torch::autograd::grad({(y64 * dy.to(kF64)).sum()}, {x64, w64});
        CHECK_CLOSE(rstd, r64.detach().squeeze(-1), 1e-5, "rstd");
        CHECK_CLOSE(y, y64.detach(), tolerance(type, 1e-5), "y");
        CHECK_CLOSE(dx, grads[0], tolerance(type, 1e-4), "dx");
        CHECK_CLOSE(dwPartial.sum(0), grads[1], tolerance(type, 1e-4), "dw");
    }

    // The residual add folded into the norm (addRmsNormForward / addRmsNormBackward): the sum it
    // writes, the norm of that sum, and the gradients with the stream's own gradient added and the
    // branch's cast and scaled, against float64 with the sum rounded as eager rounds it. The stream
    // fp32 or bf16, the branch (and the norm's output) bf16 or the stream's dtype; 16-byte rows only.
    void addRmsNorm_data()
    {
        QTest::addColumn<int>("cols");
        QTest::addColumn<bool>("bf16Stream");
        QTest::addColumn<bool>("bf16Branch");
        QTest::addColumn<double>("scale");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("partials"); // the backward's blocks; 0: rmsNormPartials(rows)
        for (int cols : {64, 1032, 4104}) {
            QTest::addRow("fp32, %d columns", cols) << cols << false << false << 1.0 << 5 << 0;
            QTest::addRow("fp32 stream, bf16 branch, %d columns", cols) << cols << false << true << 1.0 << 5 << 0;
            QTest::addRow("bf16, %d columns", cols) << cols << true << true << 1.0 << 5 << 0;
        }
        QTest::addRow("bf16, scale 0.22") << 64 << true << true << 0.22 << 5 << 0;
        QTest::addRow("fp32 stream, bf16 branch, scale 0.22") << 1032 << false << true << 0.22 << 5 << 0;
        // Blocks striding over rows: the stream's gradient loaded two rows ahead with x and dy (one
        // pack a thread: 64, 2,048 columns), one row ahead (two packs: 264), or at the row (four: 4,104).
        for (int cols : {64, 264, 2048, 4104})
            QTest::addRow("fp32 stream, bf16 branch, %d columns, 13 rows over 2 blocks", cols) << cols << false << true << 1.0 << 13 << 2;
    }

    void addRmsNorm()
    {
        QFETCH(int, cols);
        QFETCH(bool, bf16Stream);
        QFETCH(bool, bf16Branch);
        QFETCH(double, scale);
        QFETCH(int, rows);
        QFETCH(int, partials);
        const auto st = bf16Stream ? torch::kBFloat16 : torch::kFloat, bt = bf16Branch ? torch::kBFloat16 : torch::kFloat;
        const float eps = 1e-6f;
        torch::manual_seed(cols + 7);
        const auto x = (2 * torch::randn({rows, cols})).to(st), b = torch::randn({rows, cols}).to(bt), w = (1 + 0.3 * torch::randn({cols})).to(st);
        const auto dy = torch::randn({rows, cols}).to(bt), dSum = torch::randn({rows, cols}).to(st);
        auto h = torch::empty({rows, cols}, st), y = torch::empty({rows, cols}, bt), dx = torch::empty({rows, cols}, st);
        auto dBranch = torch::empty({rows, cols}, bt);
        auto rstd = torch::empty({rows}, torch::kFloat);
        const kernels::RmsNormForm form {false, false};
        const void *pointers[] = {x.data_ptr(), b.data_ptr(), w.data_ptr(), y.data_ptr(), h.data_ptr()};
        QVERIFY(kernels::addRmsNormFits(cols, pointers, 5));
        QVERIFY(!kernels::addRmsNormFits(100, pointers, 5)); // not a multiple of 8: the caller runs the two ops
        kernels::addRmsNormForward(x.data_ptr(), dtypeOf(st), w.data_ptr(), dtypeOf(st), y.data_ptr(), dtypeOf(bt), rstd.data_ptr<float>(), rows, cols,
                                   eps, form, kernels::ResidualIn {b.data_ptr(), static_cast<float>(scale), h.data_ptr()}, nullptr);
        if (partials == 0)
            partials = static_cast<int>(kernels::rmsNormPartials(rows));
        auto dwPartial = torch::zeros({partials, cols}, torch::kFloat);
        kernels::addRmsNormBackward(dy.data_ptr(), dtypeOf(bt), h.data_ptr(), dtypeOf(st), w.data_ptr(), dtypeOf(st), rstd.data_ptr<float>(), dx.data_ptr(),
                                    dwPartial.data_ptr<float>(), partials, rows, cols, form,
                                    kernels::ResidualGrad {dSum.data_ptr(), dBranch.data_ptr(), static_cast<float>(scale)}, nullptr);

        // The sum as CUDA's eager ops round it: branch * scale (the scale in fp32, as CUDA's mul takes
        // a scalar; the CPU's 1.13 rounds it to bf16 first) to the branch's dtype, the sum to the stream's.
        const auto sum = (x.to(torch::kFloat) + (b.to(torch::kFloat) * scale).to(bt).to(torch::kFloat)).to(st);
        QVERIFY(torch::equal(h, sum));
        const auto h64 = sum.to(kF64).requires_grad_(true), w64 = w.to(kF64).requires_grad_(true);
        const auto r64 = torch::rsqrt(h64.pow(2).mean(-1, true) + eps);
        const auto y64 = w64 * (h64 * r64);
        const auto grads = torch::autograd::grad({(y64 * dy.to(kF64)).sum()}, {h64, w64});
        const auto dx64 = grads[0] + dSum.to(kF64);
        CHECK_CLOSE(y, y64.detach(), tolerance(bt, 1e-5), "y");
        CHECK_CLOSE(dx, dx64, tolerance(st, 1e-4), "dx");
        CHECK_CLOSE(dBranch, dx64 * scale, tolerance(bt, 1e-4), "dbranch");
        CHECK_CLOSE(dwPartial.sum(0), grads[1], tolerance(bt, 1e-4), "dw");
    }

    void gatedActivation_data()
    {
        QTest::addColumn<int>("activation");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("offset");   // elements: 1 leaves the pointers unaligned (the scalar kernel)
        for (bool bf16 : {false, true})
            for (int offset : {0, 1}) {
                QTest::addRow("silu %s offset %d", bf16 ? "bf16" : "fp32", offset) << int(kernels::GateActivation::Silu) << bf16 << offset;
                QTest::addRow("gelu tanh %s offset %d", bf16 ? "bf16" : "fp32", offset) << int(kernels::GateActivation::GeluTanh) << bf16 << offset;
            }
        QTest::addRow("gelu erf fp32") << int(kernels::GateActivation::GeluErf) << false << 0;
    }

    void gatedActivation()
    {
        QFETCH(int, activation);
        QFETCH(bool, bf16);
        QFETCH(int, offset);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t n = 1003;
        torch::manual_seed(activation + 10 * offset);
        const auto gAll = torch::randn({n + 1}).to(type), uAll = torch::randn({n + 1}).to(type), dAll = torch::randn({n + 1}).to(type);
        const auto g = gAll.narrow(0, offset, n), u = uAll.narrow(0, offset, n), dOut = dAll.narrow(0, offset, n);
        auto outAll = torch::empty({n + 1}, type), dgAll = torch::empty({n + 1}, type), duAll = torch::empty({n + 1}, type);
        auto out = outAll.narrow(0, offset, n), dg = dgAll.narrow(0, offset, n), du = duAll.narrow(0, offset, n);
        const auto act = static_cast<kernels::GateActivation>(activation);
        kernels::swigluForward(g.data_ptr(), u.data_ptr(), out.data_ptr(), dtypeOf(type), n, act, nullptr);
        kernels::swigluBackward(dOut.data_ptr(), g.data_ptr(), u.data_ptr(), dg.data_ptr(), du.data_ptr(), dtypeOf(type), n, act, nullptr);

        const auto g64 = g.to(kF64).requires_grad_(true), u64 = u.to(kF64).requires_grad_(true);
        torch::Tensor a64;
        if (act == kernels::GateActivation::Silu)
            a64 = torch::silu(g64);
        else if (act == kernels::GateActivation::GeluTanh)
            a64 = 0.5 * g64 * (1 + torch::tanh(0.7978845608028654 * (g64 + 0.044715 * g64.pow(3))));
        else
            a64 = 0.5 * g64 * (1 + torch::erf(g64 / std::sqrt(2.0)));
        const auto out64 = a64 * u64;
        const auto grads = torch::autograd::grad({(out64 * dOut.to(kF64)).sum()}, {g64, u64});
        CHECK_CLOSE(out, out64.detach(), tolerance(type, 1e-5), "out");
        CHECK_CLOSE(dg, grads[0], tolerance(type, 1e-5), "dg");
        CHECK_CLOSE(du, grads[1], tolerance(type, 1e-5), "du");
    }

    void gatedActivationPacked_data()
    {
        QTest::addColumn<int>("activation");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("width");
        for (bool bf16 : {false, true})
            for (int width : {24, 13}) { // 16-byte packs within each half-row; 13: one at a time
                QTest::addRow("silu %s width %d", bf16 ? "bf16" : "fp32", width) << int(kernels::GateActivation::Silu) << bf16 << width;
                QTest::addRow("gelu tanh %s width %d", bf16 ? "bf16" : "fp32", width) << int(kernels::GateActivation::GeluTanh) << bf16 << width;
            }
    }

    // A fused gate_up output's halves, read in place and written back as one gradient: bit for bit
    // the contiguous kernels' results on copies of the two halves.
    void gatedActivationPacked()
    {
        QFETCH(int, activation);
        QFETCH(bool, bf16);
        QFETCH(int, width);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t rows = 5, n = rows * width;
        torch::manual_seed(activation + width);
        const auto gateUp = torch::randn({rows, 2 * width}).to(type), dOut = torch::randn({rows, width}).to(type);
        const auto g = gateUp.narrow(1, 0, width).contiguous(), u = gateUp.narrow(1, width, width).contiguous();
        const auto act = static_cast<kernels::GateActivation>(activation);
        auto out = torch::full({rows, width}, 7.0, type), dGateUp = torch::full({rows, 2 * width}, 7.0, type);
        kernels::gatedForwardPacked(gateUp.data_ptr(), out.data_ptr(), dtypeOf(type), rows, width, act, nullptr);
        kernels::gatedBackwardPacked(dOut.data_ptr(), gateUp.data_ptr(), dGateUp.data_ptr(), dtypeOf(type), rows, width, act, nullptr);
        auto outRef = torch::empty_like(g), dg = torch::empty_like(g), du = torch::empty_like(u);
        kernels::swigluForward(g.data_ptr(), u.data_ptr(), outRef.data_ptr(), dtypeOf(type), n, act, nullptr);
        kernels::swigluBackward(dOut.data_ptr(), g.data_ptr(), u.data_ptr(), dg.data_ptr(), du.data_ptr(), dtypeOf(type), n, act, nullptr);
        QVERIFY(torch::equal(out, outRef));
        QVERIFY(torch::equal(dGateUp, torch::cat({dg, du}, 1)));
    }

    void rotary_data()
    {
        QTest::addColumn<int>("headDim");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<bool>("inverse");
        for (bool bf16 : {false, true})
            for (int headDim : {32, 64, 12})
                for (bool inverse : {false, true})
                    QTest::addRow("%s head %d%s", bf16 ? "bf16" : "fp32", headDim, inverse ? " inverse" : "") << headDim << bf16 << inverse;
    }

    void rotary()
    {
        QFETCH(int, headDim);
        QFETCH(bool, bf16);
        QFETCH(bool, inverse);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t batch = 2, seq = 5, heads = 3, half = headDim / 2;
        torch::manual_seed(headDim);
        const auto x = torch::randn({batch * seq, heads, headDim}).to(type);
        const auto angles = torch::randn({seq, half}) * 3;
        const auto cos = torch::cat({angles.cos(), angles.cos()}, -1), sin = torch::cat({angles.sin(), angles.sin()}, -1);
        auto y = torch::empty_like(x);
        kernels::rotary(x.data_ptr(), y.data_ptr(), dtypeOf(type), cos.data_ptr<float>(), sin.data_ptr<float>(), batch * seq, heads, headDim, seq, inverse,
                        nullptr);
        // x * cos + rotate_half(x) * sin, position r % seq; the inverse turns by minus the angle.
        const auto x64 = x.to(kF64).view({batch, seq, heads, headDim});
        const auto rotated = torch::cat({-x64.narrow(-1, half, half), x64.narrow(-1, 0, half)}, -1);
        const auto c = cos.to(kF64).view({1, seq, 1, headDim}), s = sin.to(kF64).view({1, seq, 1, headDim});
        const auto expected = (x64 * c + (inverse ? -1.0 : 1.0) * rotated * s).view({batch * seq, heads, headDim});
        CHECK_CLOSE(y, expected, tolerance(type, 1e-6), "y");
    }

    // LoRA dropout's share of the input's gradient (model/MixedLinear.cpp): dx += keep * scale *
    // (dDown A) on the 16-byte packs and on the scalar form (odd widths, a single row of one, dx or A
    // off 16 bytes); dropped elements of dx untouched, bit for bit.
    void droppedLowRankAdd_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("rank");
        QTest::addColumn<int>("offset"); // elements dx and A start past a 16-byte boundary
        for (bool bf16 : {false, true}) {
            const char *type = bf16 ? "bf16" : "fp32";
            QTest::addRow("%s, 7 rows of 64, rank 4", type) << bf16 << 7 << 64 << 4 << 0;
            QTest::addRow("%s, 3 rows of 2048, rank 16", type) << bf16 << 3 << 2048 << 16 << 0;
            QTest::addRow("%s, 5 rows of 30, rank 3 (scalar)", type) << bf16 << 5 << 30 << 3 << 0;
            QTest::addRow("%s, 1 row of 30, rank 3 (scalar)", type) << bf16 << 1 << 30 << 3 << 0;
            QTest::addRow("%s, 4 rows of 64 off 16 bytes (scalar)", type) << bf16 << 4 << 64 << 4 << 1;
        }
    }

    void droppedLowRankAdd()
    {
        QFETCH(bool, bf16);
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, rank);
        QFETCH(int, offset);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        torch::manual_seed(rows * cols + rank);
        const int64_t n = int64_t {rows} * cols;
        auto dxBuffer = torch::randn({n + offset}).to(type), aBuffer = (torch::randn({int64_t {rank} * cols + offset}) * 0.3).to(type);
        auto dx = dxBuffer.narrow(0, offset, n).view({rows, cols});
        const auto a = aBuffer.narrow(0, offset, int64_t {rank} * cols).view({rank, cols});
        const auto dDown = torch::randn({rows, rank}).to(type);
        const auto keep = torch::rand({rows, cols}) > 0.3;
        const double scale = 1.0 / 0.7;
        const auto before = dx.clone();
        kernels::addDroppedLowRank(dx.data_ptr(), dDown.data_ptr(), a.data_ptr(), static_cast<const uint8_t *>(keep.data_ptr()), static_cast<float>(scale),
                                   dtypeOf(type), rows, cols, rank, nullptr);
        const auto expected = before.to(kF64) + keep.to(kF64) * scale * dDown.to(kF64).matmul(a.to(kF64));
        CHECK_CLOSE(dx, expected, tolerance(type, 1e-6), "dx");
        QVERIFY(torch::equal(dx.masked_select(keep.logical_not()), before.masked_select(keep.logical_not())));
        QVERIFY(!torch::equal(dx.masked_select(keep), before.masked_select(keep)));
    }

    // lora_A's gradient under dropout without the dropped copy: partial sums over row chunks of
    // dDown^T (x * scale rounded where kept), summed here; four columns a thread and one, dDown's
    // rows in 16-byte loads and one by one; a rank over the kernel's refused.
    void droppedInputProduct_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("rank");
        for (bool bf16 : {false, true}) {
            const char *type = bf16 ? "bf16" : "fp32";
            QTest::addRow("%s, 37 rows of 64, rank 16", type) << bf16 << 37 << 64 << 16;
            QTest::addRow("%s, 37 rows of 64, rank 8", type) << bf16 << 37 << 64 << 8;
            QTest::addRow("%s, 300 rows of 2056, rank 16 (3 column blocks, 88 chunks)", type) << bf16 << 300 << 2056 << 16;
            QTest::addRow("%s, 20 rows of 30, rank 3 (one column a thread)", type) << bf16 << 20 << 30 << 3;
        }
    }

    void droppedInputProduct()
    {
        QFETCH(bool, bf16);
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, rank);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        torch::manual_seed(rows + cols + rank);
        const auto x = torch::randn({rows, cols}).to(type), dDown = torch::randn({rows, rank}).to(type);
        const auto keep = torch::rand({rows, cols}) > 0.3;
        const double scale = 1.0 / 0.7;
        const int64_t chunks = kernels::droppedInputChunks(rows, cols);
        auto partials = torch::full({chunks, rank, cols}, std::numeric_limits<float>::quiet_NaN());
        kernels::droppedInputProduct(x.data_ptr(), static_cast<const uint8_t *>(keep.data_ptr()), static_cast<float>(scale), dDown.data_ptr(), dtypeOf(type),
                                     partials.data_ptr<float>(), rows, cols, rank, nullptr);
        // The dropped copy as native_dropout_backward rounds it, then the product in float64.
        const auto dropped = (x.to(torch::kFloat) * scale).to(type).to(kF64) * keep.to(kF64);
        CHECK_CLOSE(partials.sum(0), dDown.to(kF64).t().matmul(dropped), 1e-6, "dA");
        bool refused = false;
        try {
            kernels::droppedInputProduct(x.data_ptr(), static_cast<const uint8_t *>(keep.data_ptr()), 1.f, dDown.data_ptr(), dtypeOf(type),
                                         partials.data_ptr<float>(), rows, cols, kernels::kDroppedRankMax + 1, nullptr);
        } catch (const std::invalid_argument &) {
            refused = true;
        }
        QVERIFY(refused);
    }

    void crossEntropy_data()
    {
        QTest::addColumn<int>("vocab");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<double>("divisor");
        QTest::addColumn<double>("softcap");
        QTest::addColumn<int>("ld");
        for (bool bf16 : {false, true})
            for (int vocab : {64, 61}) {
                QTest::addRow("%s vocab %d", bf16 ? "bf16" : "fp32", vocab) << vocab << bf16 << 1.0 << 0.0 << vocab;
                QTest::addRow("%s vocab %d, divisor 4 and cap 5", bf16 ? "bf16" : "fp32", vocab) << vocab << bf16 << 4.0 << 5.0 << vocab;
            }
        // A vocabulary that is not a multiple of 8 in rows padded to one (the fused loss's logits,
        // so cuBLAS keeps its aligned kernels): the 16-byte kernel with a tail, the padding untouched.
        for (bool bf16 : {false, true}) {
            QTest::addRow("%s vocab 61 in rows of 64", bf16 ? "bf16" : "fp32") << 61 << bf16 << 1.0 << 0.0 << 64;
            QTest::addRow("%s vocab 61 in rows of 64, divisor 4 and cap 5", bf16 ? "bf16" : "fp32") << 61 << bf16 << 4.0 << 5.0 << 64;
            QTest::addRow("%s vocab 1031 in rows of 1032", bf16 ? "bf16" : "fp32") << 1031 << bf16 << 1.0 << 0.0 << 1032;
        }
    }

    void crossEntropy()
    {
        QFETCH(int, vocab);
        QFETCH(bool, bf16);
        QFETCH(double, divisor);
        QFETCH(double, softcap);
        QFETCH(int, ld);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t rows = 5;
        torch::manual_seed(vocab);
        const auto logits0 = (torch::randn({rows, vocab}) * 4).to(type);
        auto padded = torch::full({rows, ld}, 123.0, type);
        auto logits = padded.narrow(1, 0, vocab);
        logits.copy_(logits0);
        auto targets = torch::randint(0, vocab, {rows}, torch::kLong);
        targets[2] = -100;   // an ignored row: loss 0, gradient 0
        auto rowLoss = torch::full({rows}, std::numeric_limits<float>::quiet_NaN());
        const float scale = 0.37f;
        kernels::crossEntropyGradInPlace(logits.data_ptr(), ld, dtypeOf(type), targets.data_ptr<int64_t>(), rows, vocab, -100, &scale,
                                         {static_cast<float>(divisor), static_cast<float>(softcap)}, rowLoss.data_ptr<float>(), nullptr);

        const auto z64 = logits0.to(kF64).requires_grad_(true);
        auto capped = z64 / divisor;
        if (softcap > 0)
            capped = softcap * torch::tanh(capped / softcap);
        const auto valid = targets.ne(-100);
        const auto safe = targets.clamp_min(0);
        const auto loss64 = (torch::logsumexp(capped, -1) - capped.gather(1, safe.unsqueeze(1)).squeeze(1)) * valid.to(kF64);
        const auto grad64 = torch::autograd::grad({loss64.sum() * scale}, {z64})[0];
        CHECK_CLOSE(rowLoss, loss64.detach(), 1e-5, "row loss");
        CHECK_CLOSE(logits, grad64, tolerance(type, 1e-5), "gradient");
        QCOMPARE(rowLoss[2].item<float>(), 0.f);
        if (ld > vocab)
            QVERIFY(torch::equal(padded.narrow(1, vocab, ld - vocab), torch::full({rows, ld - vocab}, 123.0, type)));
    }

    void cappedSoftmax_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("window");
        QTest::addColumn<int>("keys");
        // 20 keys: the scalar kernels; 40 to 2,048 (Gemma 2's rows at seq 2048): the 16-byte ones,
        // a pack a thread, a block a row (264 and 520: a block's threads partly idle); 2,056: two
        // packs a thread, the second beyond the block's first 2,048 keys (one head each; about
        // 11 s here). Four packs a thread (over 4,096 keys) are left to the card check,
        // h200_new_kernels_check.py.
        for (bool bf16 : {false, true})
            for (int keys : {20, 40}) {
                QTest::addRow("%s, %d keys, causal", bf16 ? "bf16" : "fp32", keys) << bf16 << 0 << keys;
                QTest::addRow("%s, %d keys, sliding window of 5", bf16 ? "bf16" : "fp32", keys) << bf16 << 5 << keys;
            }
        QTest::addRow("fp32, 264 keys, causal") << false << 0 << 264;
        QTest::addRow("bf16, 520 keys, sliding window of 100") << true << 100 << 520;
        QTest::addRow("bf16, 2048 keys, causal") << true << 0 << 2048;
        QTest::addRow("bf16, 2056 keys, sliding window of 1500") << true << 1500 << 2056;
    }

    // The capped softmax's tanh for 16-bit scores: within 3e-7 of tanh relative over the whole
    // range (tiny arguments, both sides of the branch at 0.55, saturation), so rounded to bf16 it
    // gives tanhf's value except where tanh lies within that of a rounding boundary.
    void tanhNearlyExactIsTanh()
    {
        const auto x = torch::cat({torch::linspace(-12, 12, 400001, kF64), torch::logspace(-30, 0, 20001, 10, kF64), torch::linspace(0.549, 0.551, 2001, kF64)});
        auto approx = torch::empty_like(x);
        const auto *xs = x.data_ptr<double>();
        auto *out = approx.data_ptr<double>();
        for (int64_t i = 0; i < x.numel(); ++i)
            out[i] = kernels::tanhNearlyExact(static_cast<float>(xs[i]));
        const auto xf = x.to(torch::kFloat).to(kF64); // the argument as the kernel holds it
        const auto reference = torch::tanh(xf);
        const double worst = ((approx - reference).abs() / reference.abs().clamp_min(1e-37)).max().item<double>();
        QVERIFY2(worst <= 3e-7, qPrintable(QStringLiteral("worst relative error %1").arg(worst)));
        QVERIFY(torch::equal(approx.sign(), reference.sign()));
        const auto flips = approx.to(torch::kBFloat16).ne(reference.to(torch::kBFloat16)).sum().item<int64_t>();
        QVERIFY2(flips * 1000 < x.numel(), qPrintable(QStringLiteral("%1 of %2 round to another bf16 value").arg(flips).arg(x.numel())));
    }

    // Gemma 2's soft-capped attention probabilities and their backward, against the float64 maths
    // and, in bf16, against eager's own chain of rounded LibTorch ops (which the kernel reproduces
    // step by step: without those roundings it would be several bf16 units off).
    void cappedSoftmax()
    {
        QFETCH(bool, bf16);
        QFETCH(int, window);
        QFETCH(int, keys);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t heads = keys > 200 ? 1 : 2, rows = heads * keys;
        const double scale = 0.25, softcap = 5.0;
        torch::manual_seed(window + 7);
        const auto scores = (torch::randn({heads, keys, keys}) * 30).to(type);
        const auto dProbs = torch::randn({heads, keys, keys}).to(type);
        auto probs = torch::full({heads, keys, keys}, std::numeric_limits<float>::quiet_NaN()).to(type);
        auto dScores = probs.clone();
        auto rowMax = torch::empty({rows}), rowSum = torch::empty({rows});
        const kernels::ScoreCap cap {static_cast<float>(scale), static_cast<float>(softcap), window};
        kernels::cappedSoftmaxForward(scores.data_ptr(), probs.data_ptr(), dtypeOf(type), rowMax.data_ptr<float>(), rowSum.data_ptr<float>(), rows, keys, cap,
                                      nullptr);
        kernels::cappedSoftmaxBackward(scores.data_ptr(), rowMax.data_ptr<float>(), rowSum.data_ptr<float>(), dProbs.data_ptr(), dScores.data_ptr(),
                                       dtypeOf(type), rows, keys, cap, nullptr);

        const auto pos = torch::arange(keys);
        const auto distance = pos.unsqueeze(1) - pos.unsqueeze(0);
        auto seen = distance.ge(0);
        if (window > 0)
            seen = seen.logical_and(distance.lt(window));
        const auto s64 = scores.to(kF64).requires_grad_(true);
        const auto capped = softcap * torch::tanh(s64 * scale / softcap);
        const auto p64 = torch::softmax(capped.masked_fill(seen.logical_not(), -std::numeric_limits<double>::infinity()), -1);
        const auto ds64 = torch::autograd::grad({(p64 * dProbs.to(kF64)).sum()}, {s64})[0];
        CHECK_CLOSE(probs, p64.detach(), tolerance(type, 1e-5), "probabilities");
        CHECK_CLOSE(dScores, ds64, tolerance(type, 1e-4), "scores' gradient");
        QVERIFY(torch::equal(probs.masked_select(seen.logical_not().expand_as(probs)), torch::zeros({heads * (seen.numel() - seen.sum().item<int64_t>())}, type)));
        if (bf16) {
            // Eager's ops on the host: each rounds its fp32 result to bf16 as the card's do.
            auto eager = (scores * scale) * static_cast<double>(1.f / static_cast<float>(softcap));
            eager = torch::tanh(eager) * softcap;
            eager = torch::softmax(eager.masked_fill(seen.logical_not(), -std::numeric_limits<float>::infinity()), -1, torch::kFloat).to(type);
            CHECK_CLOSE(probs, eager, 8e-3, "probabilities against eager's rounded chain");
        }
    }

    // 40,007 weights: 2,500 runs of 16 and a tail of 7, three groups of 256 blocks' scales.
    void nf4DequantizeMatchesTheComposite_data()
    {
        QTest::addColumn<int>("type");
        QTest::newRow("fp32") << int(torch::kFloat);
        QTest::newRow("bf16") << int(torch::kBFloat16);
        QTest::newRow("fp16") << int(torch::kHalf);
    }
    void nf4DequantizeMatchesTheComposite()
    {
        QFETCH(int, type);
        const auto t = static_cast<torch::ScalarType>(type);
        torch::manual_seed(11);
        const std::vector<int64_t> shape {40007};
        ::pb::Nf4Storage storage = ::pb::nf4Allocate(shape, torch::Device(torch::kCPU));
        ::pb::nf4Quantize(torch::randn(shape) * 0.02, storage);
        const auto expected = ::pb::nf4Dequantize(storage, t);
        auto out = torch::full(shape, std::numeric_limits<float>::quiet_NaN()).to(t);
        const auto kernelType = t == torch::kFloat ? kernels::Dtype::Float32 : t == torch::kBFloat16 ? kernels::Dtype::BFloat16 : kernels::Dtype::Float16;
        kernels::nf4Dequantize(storage.packed.data_ptr<uint8_t>(), storage.absmax.data_ptr<int8_t>(), storage.scales.data_ptr<float>(),
                               storage.offset.data_ptr<float>(), out.data_ptr(), kernelType, 40007, nullptr);
        QVERIFY(expected.abs().max().item<double>() > 0);
        QVERIFY2(torch::equal(out, expected), qPrintable(QStringLiteral("largest difference %1").arg((out.to(torch::kDouble) - expected.to(torch::kDouble)).abs().max().item<double>())));
    }
};

QTEST_GUILESS_MAIN(TestFusedKernelsEmulated)
#include "tst_fused_kernels_emulated.moc"
