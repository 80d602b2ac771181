// The state recurrence's CUDA kernel (kernels/GatedDeltaScan.cuh), its device code run on the host
// under CudaEmulation.h, against model/GatedDeltaScan.h's LibTorch loop in fp32: the forward's form
// (contiguous operands) and the backward's (transposed views, the extra product, chunks in reverse),
// with and without an initial state, one chunk and several, value columns split over blocks with a
// partial last tile, 64 and 256 threads a block; and how the launcher picks the tile.
#include "model/GatedDeltaScan.h"

#include <QtTest>

#include <cmath>
#include <stdexcept>
#include <string>

// After every other header, so its macros (__global__, threadIdx, ...) reach only the kernel's code.
#include "CudaEmulation.h"

// In a namespace of its own: on a CUDA build pb_kernels defines the same names for the card.
namespace emulated {
#include "kernels/GatedDeltaScan.cuh"
}

using namespace pb;
namespace kernels = emulated::pb::kernels;
using kernels::ScanMatrix;

namespace {

const auto kFloat = torch::TensorOptions().dtype(torch::kFloat);

ScanMatrix matrixOf(const torch::Tensor &t)
{
    if (!t.defined())
        return {};
    // The kernel's one index over B, H and N.
    Q_ASSERT(t.stride(1) == t.stride(2) * t.size(2) && t.stride(0) == t.stride(1) * t.size(1));
    return {t.data_ptr<float>(), t.stride(2), t.stride(3), t.stride(4)};
}

double relativeError(const torch::Tensor &actual, const torch::Tensor &expected)
{
    const double scale = std::max(1.0, expected.abs().max().item<double>());
    return (actual - expected).abs().max().item<double>() / scale;   // NaN (an unwritten element) fails any bound
}

} // namespace

class TestGatedDeltaScanKernel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void kernelMatchesTheLoop_data()
    {
        QTest::addColumn<qint64>("chunks");
        QTest::addColumn<qint64>("dk");
        QTest::addColumn<qint64>("dv");
        QTest::addColumn<qint64>("tile");
        QTest::addColumn<bool>("backward");
        QTest::addColumn<bool>("initial");
        QTest::addColumn<uint>("threads");
        for (bool backward : {false, true})
            for (bool initial : {false, true}) {
                const char *form = backward ? "backward" : "forward";
                const char *start = initial ? "initial state" : "zero state";
                QTest::addRow("%s, %s, 5 chunks, one tile", form, start) << qint64(5) << qint64(8) << qint64(6) << qint64(6) << backward << initial << 64u;
                QTest::addRow("%s, %s, 5 chunks, tiles of 4 over 10 columns", form, start)
                    << qint64(5) << qint64(12) << qint64(10) << qint64(4) << backward << initial << 64u;
                QTest::addRow("%s, %s, 1 chunk", form, start) << qint64(1) << qint64(8) << qint64(6) << qint64(3) << backward << initial << 64u;
            }
        QTest::addRow("backward, 256 threads, more elements than threads") << qint64(3) << qint64(32) << qint64(24) << qint64(16) << true << true << 256u;
    }

    void kernelMatchesTheLoop()
    {
        QFETCH(qint64, chunks);
        QFETCH(qint64, dk);
        QFETCH(qint64, dv);
        QFETCH(qint64, tile);
        QFETCH(bool, backward);
        QFETCH(bool, initial);
        QFETCH(uint, threads);
        const int64_t b = 2, h = 3, c = 16;
        torch::manual_seed(static_cast<uint64_t>(chunks * 100 + dk + (backward ? 7 : 0)));
        const auto decay = torch::rand({b, h, chunks}, kFloat) * 0.5 + 0.5;
        torch::Tensor x, y, z, xr, yr;
        double xScale = 1.0, zScale = -1.0;
        if (!backward) {
            x = torch::randn({b, h, chunks, dk, c}, kFloat) * 0.2;
            y = torch::randn({b, h, chunks, c, dv}, kFloat);
            z = torch::randn({b, h, chunks, c, dk}, kFloat) * 0.2;
        } else {
            // As the backward passes them: transposed views of [.., C, Dk] and [.., Dk, C] tensors.
            x = (torch::randn({b, h, chunks, c, dk}, kFloat) * 0.2).transpose(-1, -2);
            y = torch::randn({b, h, chunks, c, dv}, kFloat);
            z = (torch::randn({b, h, chunks, dk, c}, kFloat) * 0.2).transpose(-1, -2);
            xr = (torch::randn({b, h, chunks, c, dk}, kFloat) * 0.2).transpose(-1, -2);
            yr = torch::randn({b, h, chunks, c, dv}, kFloat);
            xScale = -1.0;
            zScale = 1.0;
        }
        const auto start = initial ? torch::randn({b, h, dk, dv}, kFloat) : torch::Tensor();
        const auto expected = deltaStateScan(decay, x, xScale, y, z, zScale, xr, yr, start, backward, /*allowKernel=*/false);

        const auto nan = std::numeric_limits<float>::quiet_NaN();
        const auto entering = torch::full({b, h, chunks, dk, dv}, nan, kFloat), final = torch::full({b, h, dk, dv}, nan, kFloat),
                   innovation = torch::full({b, h, chunks, c, dv}, nan, kFloat);
        kernels::DeltaScanArgs a;
        a.heads = b * h;
        a.chunks = chunks;
        a.chunk = c;
        a.dk = dk;
        a.dv = dv;
        a.decay = decay.data_ptr<float>();
        a.x = matrixOf(x);
        a.y = matrixOf(y);
        a.z = matrixOf(z);
        a.xr = matrixOf(xr);
        a.yr = matrixOf(yr);
        a.xScale = static_cast<float>(xScale);
        a.zScale = static_cast<float>(zScale);
        a.initial = initial ? start.data_ptr<float>() : nullptr;
        a.entering = entering.data_ptr<float>();
        a.final = final.data_ptr<float>();
        a.innovation = innovation.data_ptr<float>();
        a.reverse = backward;
        a.tile = tile;
        const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>((dv + tile - 1) / tile));
        emu::launch(grid, dim3(threads), static_cast<size_t>(kernels::deltaScanSharedFloats(a, tile)) * sizeof(float), kernels::gatedDeltaScanKernel, a);

        QVERIFY(expected.final.abs().max().item<double>() > 1e-2);   // not trivially zero
        for (const auto &[name, actual, wanted] : {std::tuple {"entering", entering, expected.entering}, std::tuple {"final", final, expected.final},
                                                    std::tuple {"innovation", innovation, expected.innovation}}) {
            const double error = relativeError(actual, wanted);
            QVERIFY2(error <= 1e-5, qPrintable(QStringLiteral("%1: relative error %2").arg(QLatin1String(name)).arg(error)));
        }
    }

    // The comparison above sees one wrong element: a kernel that skipped the decay of one chunk.
    void comparisonSeesOneChunkWrong()
    {
        torch::manual_seed(3);
        const int64_t b = 1, h = 2, n = 4, c = 8, dk = 4, dv = 4;
        auto decay = torch::rand({b, h, n}, kFloat) * 0.5 + 0.4;
        const auto x = torch::randn({b, h, n, dk, c}, kFloat) * 0.2, y = torch::randn({b, h, n, c, dv}, kFloat),
                   z = torch::randn({b, h, n, c, dk}, kFloat) * 0.2;
        const auto right = deltaStateScan(decay, x, 1.0, y, z, -1.0, {}, {}, {}, false, false);
        auto wrongDecay = decay.clone();
        wrongDecay[0][1][2] = 1.0;
        const auto wrong = deltaStateScan(wrongDecay, x, 1.0, y, z, -1.0, {}, {}, {}, false, false);
        QVERIFY(relativeError(wrong.final, right.final) > 1e-3);
        QCOMPARE(relativeError(wrong.entering.narrow(2, 0, 3), right.entering.narrow(2, 0, 3)), 0.0);   // chunks before it agree
    }

    void tileFitsTheBlock()
    {
        kernels::DeltaScanArgs a;
        a.heads = 32;   // Qwen3-Next's 32 value heads, batch 1
        a.chunk = 64;
        a.dk = 128;
        a.dv = 128;
        float dummy = 0.f;
        a.xr.p = &dummy;   // the backward's extra term: the larger block
        const int64_t optin = 227 * 1024, multiprocessors = 132;   // the H200's
        const int64_t tile = kernels::deltaScanTile(a, optin, multiprocessors);
        QVERIFY(tile >= 8 && tile <= 32);
        QVERIFY(kernels::deltaScanSharedFloats(a, tile) * 4 <= optin);
        // Few heads: narrower tiles fill the card, down to 8 columns.
        a.heads = 2;
        QCOMPARE(kernels::deltaScanTile(a, optin, multiprocessors), int64_t(8));
        // Many heads: the widest tile.
        a.heads = 512;
        QCOMPARE(kernels::deltaScanTile(a, optin, multiprocessors), int64_t(32));
        // Too little shared memory for even one column: 0, and the caller takes the loop.
        QCOMPARE(kernels::deltaScanTile(a, 1024, multiprocessors), int64_t(0));
    }
};

QTEST_GUILESS_MAIN(TestGatedDeltaScanKernel)
#include "tst_gated_delta_scan_kernel.moc"
