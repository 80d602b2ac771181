// Rotary inverse frequencies with rope scaling, against values worked out by hand from the formulas
// of Transformers' modeling_rope_utils.py, and the decoder using them.
#include "config/Presets.h"
#include "model/Transformer.h"

#include <QtTest>

#include <cmath>

using namespace pb;

namespace {

// Llama-3.2-1B's rope_scaling (config.json on the Hub).
const RopeScaling kLlama32 = RopeScaling::llama3(32, 1, 4, 8192);

double element(const torch::Tensor &t, int64_t i) { return t[i].item<double>(); }

// Loss of the tiny preset under `scaling`, its attention sharpened so positions matter.
torch::Tensor tinyLoss(const RopeScaling &scaling)
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.model.ropeScaling = scaling;
    DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
    model->initialise(3);
    {
        torch::NoGradGuard noGrad;
        for (auto &block : model->stack->blocks) {
            block->attention->q->weight.mul_(40);
            block->attention->k->weight.mul_(40);
        }
    }
    torch::manual_seed(5);
    const auto tokens = torch::randint(0, c.model.vocabSize, {2, 65}, torch::kLong);
    torch::NoGradGuard noGrad;
    return model->loss(tokens.slice(1, 0, 64), tokens.slice(1, 1, 65));
}

} // namespace

class TestRotary : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void unscaledFrequencies()
    {
        // theta^(-2i/d): 10000^(-2i/8) = 10^-i.
        const auto f = rotaryInverseFrequencies(8, 10000.0, {}, torch::kCPU);
        QCOMPARE(f.size(0), int64_t(4));
        QCOMPARE(f.scalar_type(), torch::kFloat);
        for (int64_t i = 0; i < 4; ++i)
            QVERIFY2(std::fabs(element(f, i) - std::pow(10.0, -double(i))) <= 1e-6 * std::pow(10.0, -double(i)), qPrintable(QString::number(element(f, i))));
    }
    void linearDividesEveryFrequency()
    {
        const auto f = rotaryInverseFrequencies(8, 10000.0, RopeScaling::linear(4), torch::kCPU);
        for (int64_t i = 0; i < 4; ++i)
            QVERIFY(std::fabs(element(f, i) - std::pow(10.0, -double(i)) / 4) <= 1e-6 * std::pow(10.0, -double(i)) / 4);
    }
    void llama3_data()
    {
        QTest::addColumn<qint64>("headDim");
        QTest::addColumn<qint64>("index");
        QTest::addColumn<double>("expected");
        // By hand, theta 500000, factor 32, low 1, high 4, original 8192:
        //   inv = 500000^(-2i/d); wavelen = 2 pi / inv; high_freq_wavelen = 8192 / 4 = 2048,
        //   low_freq_wavelen = 8192 / 1 = 8192.
        //   wavelen < 2048: inv unchanged; wavelen > 8192: inv / 32; between:
        //   s = (8192 / wavelen - 1) / (4 - 1), inv * ((1 - s) / 32 + s).
        // d = 8: i=0 inv 1, wavelen 6.28 (kept); i=1 inv 0.03760603093, wavelen 167.1 (kept);
        //   i=2 inv 0.001414213562, wavelen 4442.88, s = 0.281283 -> 0.0004295567966;
        //   i=3 inv 5.318295897e-05, wavelen 118143 -> 1.661967468e-06.
        QTest::newRow("d8 i0 kept") << qint64(8) << qint64(0) << 1.0;
        QTest::newRow("d8 i1 kept") << qint64(8) << qint64(1) << 0.03760603093;
        QTest::newRow("d8 i2 smoothed") << qint64(8) << qint64(2) << 0.0004295567966;
        QTest::newRow("d8 i3 divided") << qint64(8) << qint64(3) << 1.661967468e-06;
        // d = 64 (Llama-3.2-1B): i=14 wavelen 1956.5, the last kept (0.003211445995); i=15 wavelen
        // 2948.3, s = 0.592849 -> 0.001290547928; i=16 as d8 i2; i=17 wavelen 6695.11, s = 0.074527
        // -> 9.708287803e-05; i=18 wavelen 10089.1, the first divided: 0.0006227724219 / 32.
        QTest::newRow("d64 i14 kept") << qint64(64) << qint64(14) << 0.003211445995;
        QTest::newRow("d64 i15 smoothed") << qint64(64) << qint64(15) << 0.001290547928;
        QTest::newRow("d64 i16 smoothed") << qint64(64) << qint64(16) << 0.0004295567966;
        QTest::newRow("d64 i17 smoothed") << qint64(64) << qint64(17) << 9.708287803e-05;
        QTest::newRow("d64 i18 divided") << qint64(64) << qint64(18) << 1.946163818e-05;
        QTest::newRow("d64 i31 divided") << qint64(64) << qint64(31) << 9.418306725e-08;
    }
    void llama3()
    {
        QFETCH(qint64, headDim);
        QFETCH(qint64, index);
        QFETCH(double, expected);
        const auto f = rotaryInverseFrequencies(headDim, 500000.0, kLlama32, torch::kCPU);
        QCOMPARE(f.size(0), headDim / 2);
        // float32, as Transformers computes them; the smoothed band loses a little more to rounding.
        QVERIFY2(std::fabs(element(f, index) - expected) <= 1e-6 * expected, qPrintable(QString::number(element(f, index), 'g', 10)));
    }
    void decoderUsesTheScaling()
    {
        const auto none = tinyLoss({});
        const auto linear = tinyLoss(RopeScaling::linear(2));
        QVERIFY2(!torch::equal(none, linear), "rope scaling did not reach the rotary tables");
        // Every wavelength of tiny (theta 10000, head dim 16) is at most 2 pi 10000^(7/8) ~ 19869:
        // with an original context of 1 all lie above low_freq_wavelen (divided, as linear); with one
        // of 10^9 all lie below high_freq_wavelen (kept, as none).
        QVERIFY(torch::equal(tinyLoss(RopeScaling::llama3(2, 1, 4, 1)), linear));
        QVERIFY(torch::equal(tinyLoss(RopeScaling::llama3(2, 1, 4, 1000000000)), none));
    }
};

QTEST_GUILESS_MAIN(TestRotary)
#include "tst_rotary.moc"
