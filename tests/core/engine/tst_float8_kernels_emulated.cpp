// The float8 cast kernels of train.precision = fp8-* (kernels/Float8Kernels.cu), their device and
// launch code run on the host under CudaEmulation.h (its float8 encoder written from the formats'
// definitions), against model/Fp8Linear.cpp's composite arithmetic: the scales max(amax, 1e-12) /
// fmax and the values roundToFloat8(x / scale), bit for bit, in e4m3 and e5m2, from fp32 and bf16,
// on each of the row cast's paths (a row held in registers, with and without column maxima; a wide
// bf16 row held as bf16, or in two passes beyond 16384 columns; the scalar kernel), the transposed
// cast (per column and per tensor) and the per-tensor cast.
#include "model/Fp8Linear.h"

#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

// After every other header, so its macros (__global__, threadIdx, ...) reach only the kernels' code.
#include "CudaEmulation.h"

// In a namespace of its own: on a CUDA build pb_kernels defines the same names for the card.
namespace emulated {
#include "kernels/Float8Kernels.cu"
}

namespace kernels = emulated::pb::kernels;

namespace {

// The float8 bits as their values.
torch::Tensor decode(const torch::Tensor &bits, bool e5m2)
{
    const int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    auto out = torch::empty(bits.sizes(), torch::kFloat);
    const auto *b = bits.data_ptr<uint8_t>();
    auto *o = out.data_ptr<float>();
    for (int64_t i = 0; i < bits.numel(); ++i) {
        const int e = (b[i] & 0x7f) >> mantissaBits, m = b[i] & ((1 << mantissaBits) - 1);
        const float magnitude = e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias - mantissaBits)
                                       : std::ldexp(1.f + static_cast<float>(m) / static_cast<float>(1 << mantissaBits), e - bias);
        o[i] = (b[i] & 0x80) ? -magnitude : magnitude;
    }
    return out;
}

float largest(bool e5m2) { return e5m2 ? 57344.f : 448.f; }

} // namespace

class TestFloat8KernelsEmulated : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void rows_data()
    {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<bool>("columns");
        for (bool bf16 : {false, true})
            for (bool columns : {false, true}) {
                const char *type = bf16 ? "bf16" : "fp32";
                const char *with = columns ? ", column maxima" : "";
                QTest::addRow("%s 64 columns, a row in registers%s", type, with) << 6 << 64 << bf16 << columns;
                QTest::addRow("%s 4104 columns, four chunks in registers%s", type, with) << 5 << 4104 << bf16 << columns;
                QTest::addRow("%s 70 columns, the scalar kernel%s", type, with) << 4 << 70 << bf16 << columns;
            }
        // 16-bit rows held as 16-bit values; columns of the last chunk cut, and the column maxima's
        // blocks of several rows cut at the last.
        QTest::addRow("bf16 8200 columns, held as bf16") << 3 << 8200 << true << false;
        QTest::addRow("bf16 8200 columns, held as bf16, column maxima") << 5 << 8200 << true << true;
        QTest::addRow("bf16 16392 columns, two passes") << 3 << 16392 << true << false;
        QTest::addRow("bf16 16392 columns, two passes, column maxima") << 3 << 16392 << true << true;
    }

    void rows()
    {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(bool, bf16);
        QFETCH(bool, columns);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        for (bool e5m2 : {false, true}) {
            torch::manual_seed(cols + rows);
            auto x = (torch::randn({rows, cols}) * torch::rand({rows, 1}) * 50).to(type);
            x[0][1] = 0;   // a zero and a tiny value cast as well
            x[1][2] = 1e-6;
            auto out = torch::empty({rows, cols}, torch::kUInt8);
            auto scales = torch::full({rows}, std::numeric_limits<float>::quiet_NaN());
            auto colAmax = torch::zeros({cols});
            kernels::float8QuantizeRows(x.data_ptr(), bf16 ? kernels::Dtype::BFloat16 : kernels::Dtype::Float32, rows, cols, e5m2, out.data_ptr<uint8_t>(),
                                        scales.data_ptr<float>(), nullptr, columns ? colAmax.data_ptr<float>() : nullptr);
            const auto xf = x.to(torch::kFloat);
            const auto expectedScales = xf.abs().amax(1).clamp_min(1e-12f) / largest(e5m2);
            QVERIFY2(torch::equal(scales, expectedScales), e5m2 ? "e5m2 scales" : "e4m3 scales");
            const auto expected = ::pb::roundToFloat8(xf / expectedScales.unsqueeze(1), e5m2);
            const auto got = decode(out, e5m2);
            QVERIFY2(torch::equal(got, expected), qPrintable(QStringLiteral("%1 values: %2 differ").arg(e5m2 ? "e5m2" : "e4m3").arg(got.ne(expected).sum().item<int64_t>())));
            if (columns)
                QVERIFY2(torch::equal(colAmax, xf.abs().amax(0)), "column maxima");
        }
    }

    void transposed_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<bool>("perColumn");
        for (bool bf16 : {false, true})
            for (bool perColumn : {false, true})
                QTest::addRow("%s %s", bf16 ? "bf16" : "fp32", perColumn ? "per column" : "per tensor") << bf16 << perColumn;
    }

    void transposed()
    {
        QFETCH(bool, bf16);
        QFETCH(bool, perColumn);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const int64_t rows = 80, cols = 72;   // two tiles of 64 each way, the second partial
        torch::manual_seed(3);
        const auto x = (torch::randn({rows, cols}) * torch::rand({1, cols}) * 20).to(type);
        const auto xf = x.to(torch::kFloat);
        const auto amax = perColumn ? xf.abs().amax(0) : xf.abs().max().reshape({1});
        QVERIFY(kernels::float8TransposedCastFits(x.data_ptr(), rows, cols));
        for (bool e5m2 : {false, true}) {
            auto out = torch::empty({cols, rows}, torch::kUInt8);
            auto scales = torch::full({cols}, std::numeric_limits<float>::quiet_NaN());
            kernels::float8QuantizeColumnsTransposed(x.data_ptr(), bf16 ? kernels::Dtype::BFloat16 : kernels::Dtype::Float32, rows, cols, amax.data_ptr<float>(),
                                                     perColumn, e5m2, out.data_ptr<uint8_t>(), perColumn ? scales.data_ptr<float>() : nullptr, nullptr);
            const auto scale = amax.clamp_min(1e-12f) / largest(e5m2);
            const auto expected = ::pb::roundToFloat8(xf.t() / scale.unsqueeze(1).expand({cols, 1}), e5m2);
            QVERIFY2(torch::equal(decode(out, e5m2), expected), e5m2 ? "e5m2 values" : "e4m3 values");
            if (perColumn)
                QVERIFY(torch::equal(scales, scale));
        }
    }

    void withScale()
    {
        for (bool bf16 : {false, true})
            for (bool e5m2 : {false, true}) {
                const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
                torch::manual_seed(9);
                const int64_t n = 1001;
                const auto x = (torch::randn({n}) * 30).to(type);
                const auto scale = torch::full({1}, 0.0371f);
                auto out = torch::empty({n}, torch::kUInt8);
                kernels::float8QuantizeWithScale(x.data_ptr(), bf16 ? kernels::Dtype::BFloat16 : kernels::Dtype::Float32, n, e5m2, scale.data_ptr<float>(),
                                                 out.data_ptr<uint8_t>(), nullptr);
                const auto expected = ::pb::roundToFloat8(x.to(torch::kFloat) / scale, e5m2);   // saturates where |x / s| exceeds the range
                QVERIFY2(torch::equal(decode(out, e5m2), expected), qPrintable(QStringLiteral("%1 %2").arg(bf16 ? "bf16" : "fp32", e5m2 ? "e5m2" : "e4m3")));
            }
    }
};

QTEST_GUILESS_MAIN(TestFloat8KernelsEmulated)
#include "tst_float8_kernels_emulated.moc"
