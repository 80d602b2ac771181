// QLoRA's NF4 storage (model/Nf4.h): the 16 values against the published construction, a block
// quantised by hand, the double-quantised maxima, every weight of a random matrix against a
// brute-force nearest value, the linear's gradients, the CUDA kernel against the composite path
// (where there is a GPU), and a tiny model trained under train.mode = qlora.
#include "config/Nf4Format.h"
#include "config/Presets.h"
#include "engine/Optimizer.h"
#include "model/Nf4.h"
#include "model/Transformer.h"

#include <QtTest>

#include <cmath>
#include <map>

using namespace pb;

namespace {

// The standard normal's quantile by bisection on its CDF (no statistics library here).
double normalQuantile(double p)
{
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; ++i) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
}

Nf4Storage quantised(const torch::Tensor &w)
{
    auto s = nf4Allocate(w.sizes().vec(), w.device());
    nf4Quantize(w, s);
    return s;
}

std::vector<int> codesOf(const Nf4Storage &s, int64_t numel)
{
    const auto bytes = s.packed.to(torch::kCPU);
    std::vector<int> codes;
    for (int64_t i = 0; i < numel; ++i) {
        const int b = bytes[i / 2].item<uint8_t>();
        codes.push_back(i % 2 == 0 ? b >> 4 : b & 15);
    }
    return codes;
}

} // namespace

class TestNf4 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::manual_seed(11); }

    // bitsandbytes' create_normal_map(offset=0.9677083): 8 positive quantiles at
    // linspace(offset, 0.5, 9)[:-1], 7 negative at linspace(offset, 0.5, 8)[:-1], a zero; sorted and
    // divided by the largest (the points are float32, as torch.linspace makes them).
    void valuesFollowThePublishedConstruction()
    {
        const float offset = 0.9677083F;
        std::vector<double> v {0.0};
        for (int i = 0; i < 8; ++i)
            v.push_back(normalQuantile(static_cast<float>(offset + (0.5F - offset) * static_cast<float>(i) / 8.0F)));
        for (int i = 0; i < 7; ++i)
            v.push_back(-normalQuantile(static_cast<float>(offset + (0.5F - offset) * static_cast<float>(i) / 7.0F)));
        std::sort(v.begin(), v.end());
        for (size_t i = 0; i < 16; ++i)
            QVERIFY2(std::fabs(v[i] / v.back() - kNf4Values[i]) < 1e-6, qPrintable(QStringLiteral("value %1: %2 against %3").arg(i).arg(v[i] / v.back()).arg(kNf4Values[i])));
    }

    // One block by hand: 0.3 -> 0.3379 (11), -0.7 -> -0.6962 (1), 0 -> 7, 1 -> 15, -0.2 -> -0.1848 (5),
    // 0.12 -> 0.0796 (8, 0.0404 away against 0.0409 for 0.1609), zeros, then -1 -> 0; the first
    // code of each byte in its high nibble.
    void aBlockByHand()
    {
        std::vector<float> w(64, 0.0F);
        w[0] = 0.3F, w[1] = -0.7F, w[2] = 0.0F, w[3] = 1.0F, w[4] = -0.2F, w[5] = 0.12F, w[63] = -1.0F;
        const auto s = quantised(torch::tensor(w).view({4, 16}));
        QCOMPARE(s.packed.numel(), int64_t(32));
        QCOMPARE(s.packed[0].item<uint8_t>(), uint8_t(0xB1));
        QCOMPARE(s.packed[1].item<uint8_t>(), uint8_t(0x7F));
        QCOMPARE(s.packed[2].item<uint8_t>(), uint8_t(0x58));
        for (int i = 3; i < 31; ++i)
            QCOMPARE(s.packed[i].item<uint8_t>(), uint8_t(0x77));
        QCOMPARE(s.packed[31].item<uint8_t>(), uint8_t(0x70));
        // One block: its maximum is the mean, stored exactly; the group's scale is 1.
        QCOMPARE(s.absmax[0].item<int8_t>(), int8_t(0));
        QCOMPARE(s.scales[0].item<float>(), 1.0F);
        QCOMPARE(s.offset[0].item<float>(), 1.0F);
        const auto back = nf4Dequantize(s, torch::kFloat).view({-1});
        QCOMPARE(back[0].item<float>(), kNf4Values[11]);
        QCOMPARE(back[1].item<float>(), kNf4Values[1]);
        QCOMPARE(back[5].item<float>(), kNf4Values[8]);
        QCOMPARE(back[63].item<float>(), -1.0F);
    }

    // Two blocks with maxima 1 and 0.5: mean 0.75, centred +-0.25, scale 0.25 / 127, codes +-127.
    void maximaAreDoubleQuantised()
    {
        auto w = torch::zeros({128});
        w[0] = 1.0;
        w[64] = -0.5;
        const auto s = quantised(w);
        QCOMPARE(s.absmax.numel(), int64_t(2));
        QCOMPARE(s.scales.numel(), int64_t(1));
        QCOMPARE(s.absmax[0].item<int8_t>(), int8_t(127));
        QCOMPARE(s.absmax[1].item<int8_t>(), int8_t(-127));
        QCOMPARE(s.offset[0].item<float>(), 0.75F);
        QCOMPARE(s.scales[0].item<float>(), 0.25F / 127.0F);
        const auto maxima = nf4BlockMaxima(s);
        QVERIFY(std::fabs(maxima[0].item<float>() - 1.0F) < 1e-6F);
        QVERIFY(std::fabs(maxima[1].item<float>() - 0.5F) < 1e-6F);
        // Storage: 4 bits a weight, one byte a block, one fp32 scale a group, one fp32 mean.
        QCOMPARE(nf4StorageBytes(128), int64_t(64 + 2 + 4 + 4));
        QCOMPARE(nf4StorageBytes(4096LL * 4096), int64_t(4096LL * 4096 / 2 + 4096LL * 4096 / 64 + 4 * 1024 + 4));
    }

    // Every weight of random matrices (one of an odd size, one spanning several groups and slices)
    // is the nearest value to it over its block's true maximum, times the stored maximum.
    void everyWeightIsItsNearestValue_data()
    {
        QTest::addColumn<int64_t>("rows");
        QTest::addColumn<int64_t>("cols");
        QTest::newRow("3 x 7 (a partial block, an odd count)") << int64_t(3) << int64_t(7);
        QTest::newRow("96 x 128") << int64_t(96) << int64_t(128);
        QTest::newRow("1100 x 1024 (several slices and groups)") << int64_t(1100) << int64_t(1024);
    }
    void everyWeightIsItsNearestValue()
    {
        QFETCH(int64_t, rows);
        QFETCH(int64_t, cols);
        const auto w = torch::randn({rows, cols}) * 0.02;
        const auto s = quantised(w);
        const int64_t n = rows * cols;
        const auto flat = w.view({-1});
        const auto codes = codesOf(s, n);
        const auto maxima = nf4BlockMaxima(s);
        const auto back = nf4Dequantize(s, torch::kFloat).view({-1});
        const auto *wp = flat.data_ptr<float>();
        const auto *bp = back.data_ptr<float>();
        int wrong = 0;
        for (int64_t b = 0; b * 64 < n; ++b) {
            double trueMax = 0;
            for (int64_t i = b * 64; i < std::min(n, b * 64 + 64); ++i)
                trueMax = std::max(trueMax, std::fabs(double(wp[i])));
            for (int64_t i = b * 64; i < std::min(n, b * 64 + 64); ++i) {
                int best = 0;
                for (int c = 1; c < 16; ++c)
                    if (std::fabs(wp[i] / trueMax - kNf4Values[c]) < std::fabs(wp[i] / trueMax - kNf4Values[best]))
                        best = c;
                wrong += codes[static_cast<size_t>(i)] == best ? 0 : 1;
                wrong += bp[i] == kNf4Values[static_cast<size_t>(codes[static_cast<size_t>(i)])] * maxima[b].item<float>() ? 0 : 1;
            }
            QVERIFY(std::fabs(maxima[b].item<float>() - trueMax) <= trueMax * 0.01 + 1e-9);
        }
        QCOMPARE(wrong, 0);
        // The bf16 matrix is the fp32 one rounded once.
        QVERIFY(torch::equal(nf4Dequantize(s, torch::kBFloat16).view({-1}), back.to(torch::kBFloat16)));
    }

    // The linear's output and input gradient are those of a plain linear with the dequantised
    // matrix; the storage is untouched and has no gradient.
    void linearMatchesTheDequantisedMatrix()
    {
        const auto s = quantised(torch::randn({48, 64}) * 0.02);
        const auto packed = s.packed.clone();
        const auto w = nf4Dequantize(s, torch::kBFloat16);
        const auto x0 = torch::randn({2, 5, 64}).to(torch::kBFloat16);
        const auto r = torch::randn({2, 5, 48}).to(torch::kBFloat16);
        auto x1 = x0.clone().requires_grad_(true), x2 = x0.clone().requires_grad_(true);
        const auto y1 = nf4Linear(x1, s, torch::kBFloat16);
        const auto y2 = torch::nn::functional::linear(x2, w);
        QVERIFY(torch::equal(y1, y2));
        (y1 * r).sum().backward();
        (y2 * r).sum().backward();
        QVERIFY(torch::equal(x1.grad(), x2.grad()));
        QVERIFY(torch::equal(s.packed, packed));
        QVERIFY(!s.packed.grad().defined());
    }

    // The kernel's arithmetic is the composite path's: bit for bit, in every output dtype.
    void kernelMatchesTheCompositePath()
    {
        if (!torch::cuda::is_available())
            QSKIP("no CUDA device");
        // Runs of 16 weights, and a tail after them (1001 x 37: 37037 weights, 13 left over).
        for (const auto &shape : {std::vector<int64_t> {4096, 1000}, std::vector<int64_t> {1001, 37}}) {
            const auto s = quantised(torch::randn(shape, torch::kCUDA) * 0.02);
            const Nf4Storage cpu {s.packed.cpu(), s.absmax.cpu(), s.scales.cpu(), s.offset.cpu(), s.shape};
            for (auto type : {torch::kFloat, torch::kBFloat16, torch::kHalf})
                QVERIFY(torch::equal(nf4Dequantize(s, type).cpu(), nf4Dequantize(cpu, type)));
        }
    }

    // train.mode = qlora on a tiny model: no base is a parameter, only the adapters train, the loss
    // falls, and the NF4 buffers end as they began.
    void qloraTrainsAdaptersOverAnUnchangedBase()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.mode = TrainMode::Qlora;
        c.train.precision = Precision::Bf16;
        c.train.lora.rank = 4;
        c.train.lora.targets = {"all-linear"};
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(1);
        std::map<std::string, torch::Tensor> buffers;
        for (const auto &item : model->named_buffers())
            buffers[item.key()] = item.value().clone();
        // 7 projections x 2 layers, 4 buffers each.
        QCOMPARE(buffers.size(), size_t(56));
        QVERIFY(buffers.count("model.layers.0.mlp.down_proj.weight_nf4"));
        for (const auto &item : model->named_parameters())
            QVERIFY2(item.key().find("_proj.weight") == std::string::npos, item.key().c_str());
        auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
        QCOMPARE(optimizer->parameters().size(), size_t(28));
        torch::manual_seed(5);
        const auto tokens = torch::randint(0, c.model.vocabSize, {2, 33}, torch::kLong);
        const auto x = tokens.slice(1, 0, 32), y = tokens.slice(1, 1, 33);
        double first = 0, last = 0;
        for (int step = 0; step < 30; ++step) {
            auto loss = model->loss(x, y);
            (step == 0 ? first : last) = loss.item<double>();
            loss.backward();
            optimizer->step(3e-3);
            optimizer->zeroGrad();
        }
        QVERIFY2(last < first - 0.1, qPrintable(QStringLiteral("loss %1 -> %2").arg(first).arg(last)));
        for (const auto &item : model->named_buffers())
            QVERIFY2(torch::equal(buffers[item.key()], item.value()), item.key().c_str());
        int trained = 0;
        for (const auto &item : model->named_parameters())
            trained += item.key().find("lora_B") != std::string::npos && item.value().abs().max().item<float>() > 0 ? 1 : 0;
        QCOMPARE(trained, 14);
    }
};

QTEST_GUILESS_MAIN(TestNf4)
#include "tst_nf4.moc"
