// Step-time projection across cards: roofline with the measured device's efficiency, scaling by
// card count, and the measured/modelled labels. Every expected number is worked out by hand.
#include "catalog/StepProjection.h"
#include "util/Errors.h"

#include <QtTest>

namespace {

// Measured on one H100 SXM in BF16: 1000 ms per step, 4.945e14 FLOPs -> 494.5 TFLOP/s = 50 % of
// 989; 1.005e12 bytes -> 1.005 TB/s = 30 % of 3.35. Compute-bound, roofline efficiency 0.5.
pb::MeasuredStep h100ComputeBound()
{
    pb::MeasuredStep s;
    s.stepTimeMs = 1000;
    s.flopsPerStep = 4.945e14;
    s.bytesPerStep = 1.005e12;
    s.tokensPerStep = 8192;
    s.cardId = "h100-sxm-80gb";
    s.scalingEfficiencyByGpus = {{2, 0.95}};
    return s;
}

// Measured on one A100 SXM: 100 ms, 3.12e12 FLOPs -> 31.2 TFLOP/s = 10 % of 312; 1.4273e11
// bytes -> 1.4273 TB/s = 70 % of 2.039. Bandwidth-bound, roofline efficiency 0.7.
pb::MeasuredStep a100BandwidthBound()
{
    pb::MeasuredStep s;
    s.stepTimeMs = 100;
    s.flopsPerStep = 3.12e12;
    s.bytesPerStep = 1.4273e11;
    s.tokensPerStep = 4096;
    s.cardId = "a100-sxm-80gb";
    return s;
}

bool anyContains(const std::vector<std::string> &lines, const char *text)
{
    for (const auto &line : lines) {
        if (line.find(text) != std::string::npos)
            return true;
    }
    return false;
}

} // namespace

class TestProjection : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void calibration()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto c = pb::calibrate(h100ComputeBound(), catalog);
        QVERIFY(c.calibrated);
        QCOMPARE(c.achievedTflops, 494.5);
        QCOMPARE(c.computeEfficiency, 0.5);
        QVERIFY(qFuzzyCompare(c.bandwidthEfficiency, 0.3));
        QCOMPARE(c.rooflineEfficiency, 0.5);
        QCOMPARE(c.boundBy, std::string("compute"));
        const auto b = pb::calibrate(a100BandwidthBound(), catalog);
        QVERIFY(qFuzzyCompare(b.computeEfficiency, 0.1));
        QVERIFY(qFuzzyCompare(b.bandwidthEfficiency, 0.7));
        QCOMPARE(b.boundBy, std::string("memory bandwidth"));
    }

    void singleCard_data()
    {
        QTest::addColumn<int>("scenario");        // 0: H100 compute-bound, 1: A100 bandwidth-bound
        QTest::addColumn<QString>("card");
        QTest::addColumn<double>("stepTimeMs");
        QTest::addColumn<QString>("basis");
        QTest::addColumn<QString>("boundBy");
        // The measured card reproduces the measurement exactly.
        QTest::newRow("H100 measured") << 0 << "h100-sxm-80gb" << 1000.0 << "measured" << "compute";
        // A100: max(4.945e14 / (312e12 x 0.5), 1.005e12 / (2.039e12 x 0.5)) = max(3.169872, 0.985777) s
        QTest::newRow("A100 from H100") << 0 << "a100-sxm-80gb" << 3169.871795 << "modelled" << "compute";
        // H200: same 989 TFLOP/s, so a compute-bound step gains nothing from 4.8 TB/s:
        // max(4.945e14 / (989e12 x 0.5), 1.005e12 / (4.8e12 x 0.5)) = max(1.0, 0.41875) s
        QTest::newRow("H200 from H100") << 0 << "h200-sxm-141gb" << 1000.0 << "modelled" << "compute";
        // MI300X: 4.945e14 / (1307.4e12 x 0.5) = 0.756463 s
        QTest::newRow("MI300X from H100") << 0 << "mi300x-192gb" << 756.463209 << "modelled" << "compute";
        QTest::newRow("A100 measured") << 1 << "a100-sxm-80gb" << 100.0 << "measured" << "memory bandwidth";
        // H100: max(3.12e12 / (989e12 x 0.7), 1.4273e11 / (3.35e12 x 0.7)) = max(0.0045067, 0.0608657) s
        QTest::newRow("H100 from A100") << 1 << "h100-sxm-80gb" << 60.865672 << "modelled" << "memory bandwidth";
        // H200: 1.4273e11 / (4.8e12 x 0.7) = 0.0424792 s, i.e. 100 ms x 2.039 / 4.8
        QTest::newRow("H200 from A100") << 1 << "h200-sxm-141gb" << 42.479167 << "modelled" << "memory bandwidth";
    }
    void singleCard()
    {
        QFETCH(int, scenario);
        QFETCH(QString, card);
        QFETCH(double, stepTimeMs);
        QFETCH(QString, basis);
        QFETCH(QString, boundBy);
        const pb::Catalog catalog = pb::builtInCatalog();
        const pb::MeasuredStep step = scenario == 0 ? h100ComputeBound() : a100BandwidthBound();
        const auto p = pb::projectStep(step, catalog, catalog.card(card.toStdString()), 1);
        QVERIFY2(qAbs(p.stepTimeMs - stepTimeMs) < 1e-4, qPrintable(QString::number(p.stepTimeMs, 'f', 6)));
        QCOMPARE(p.singleGpuStepTimeMs, p.stepTimeMs);
        QCOMPARE(QString::fromLatin1(pb::toString(p.basis)), basis);
        QCOMPARE(QString::fromStdString(p.boundBy), boundBy);
        const double expectedTokensPerSecond = step.tokensPerStep / (stepTimeMs / 1000.0);
        QVERIFY(qAbs(p.tokensPerSecond - expectedTokensPerSecond) / expectedTokensPerSecond < 1e-6);
        if (basis == QLatin1String("measured")) {
            QVERIFY(p.assumptions.empty());
        } else {
            QVERIFY(anyContains(p.assumptions, "roofline"));
            QVERIFY(anyContains(p.assumptions, "calibrated on NVIDIA"));
        }
    }

    void scaling_data()
    {
        QTest::addColumn<QString>("card");
        QTest::addColumn<int>("gpus");
        QTest::addColumn<double>("efficiency");
        QTest::addColumn<double>("stepTimeMs");
        QTest::addColumn<double>("tokensPerSecond");
        QTest::addColumn<QString>("basis");
        QTest::addColumn<QString>("assumption");
        // Measured 0.95 at 2 on the H100: 1000 / (2 x 0.95) = 526.3158 ms; 8192 / 0.5263158 s = 15564.8 tokens/s
        QTest::newRow("H100 x2 measured") << "h100-sxm-80gb" << 2 << 0.95 << 526.315789 << 15564.8 << "measured" << "";
        // No 4-GPU step: assumed 0.9, 1000 / 3.6 = 277.7778 ms; 8192 / 0.2777778 = 29491.2 tokens/s
        QTest::newRow("H100 x4 assumed") << "h100-sxm-80gb" << 4 << 0.9 << 277.777778 << 29491.2 << "modelled" << "assumed (data parallel over NVLink";
        // The H100's 0.95 carried to the A100: 3169.871795 / 1.9 = 1668.353576 ms; 8192 / 1.668353576 = 4910.2 tokens/s
        QTest::newRow("A100 x2 carried") << "a100-sxm-80gb" << 2 << 0.95 << 1668.353576 << 4910.2 << "modelled" << "measured on h100-sxm-80gb";
        // MI300X x8: 756.463209 / (8 x 0.9) = 105.064335 ms; 8192 / 0.105064335 = 77971.3 tokens/s
        QTest::newRow("MI300X x8 assumed") << "mi300x-192gb" << 8 << 0.9 << 105.064335 << 77971.3 << "modelled" << "over Infinity Fabric";
    }
    void scaling()
    {
        QFETCH(QString, card);
        QFETCH(int, gpus);
        QFETCH(double, efficiency);
        QFETCH(double, stepTimeMs);
        QFETCH(double, tokensPerSecond);
        QFETCH(QString, basis);
        QFETCH(QString, assumption);
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto p = pb::projectStep(h100ComputeBound(), catalog, catalog.card(card.toStdString()), gpus);
        QCOMPARE(p.scalingEfficiency, efficiency);
        QVERIFY2(qAbs(p.stepTimeMs - stepTimeMs) < 1e-4, qPrintable(QString::number(p.stepTimeMs, 'f', 6)));
        QVERIFY2(qAbs(p.tokensPerSecond - tokensPerSecond) < 0.1, qPrintable(QString::number(p.tokensPerSecond, 'f', 3)));
        QVERIFY(qAbs(p.perGpuBatchStepTimeMs - p.singleGpuStepTimeMs / efficiency) < 1e-9);
        QCOMPARE(QString::fromLatin1(pb::toString(p.basis)), basis);
        if (!assumption.isEmpty())
            QVERIFY(anyContains(p.assumptions, assumption.toUtf8().constData()));
    }

    void projectAllCoversEveryCardAndCount()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto all = pb::projectAll(h100ComputeBound(), catalog);
        QCOMPARE(all.size(), catalog.cards.size() * catalog.gpuCounts.size());
        int measured = 0;
        for (const auto &p : all)
            measured += p.basis == pb::FigureBasis::Measured;
        QCOMPARE(measured, 2);   // H100 x1 and x2
    }

    void uncalibratedCpuPilot()
    {
        // Peak of the CPU unknown: assumed 40 % of the H100's 989 TFLOP/s; 1e12 / 395.6e12 = 2.527806 ms.
        pb::MeasuredStep s;
        s.stepTimeMs = 5000;
        s.flopsPerStep = 1e12;
        s.tokensPerStep = 512;
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto p = pb::projectStep(s, catalog, catalog.card("h100-sxm-80gb"), 1);
        QVERIFY(qAbs(p.stepTimeMs - 2.527806) < 1e-5);
        QCOMPARE(p.basis, pb::FigureBasis::Modelled);
        QVERIFY(anyContains(p.assumptions, "nothing is calibrated"));
        QVERIFY(anyContains(p.assumptions, "memory traffic per step unknown"));
    }

    void nonCatalogDevice()
    {
        // An H100 PCIe (756 TFLOP/s, 2.0 TB/s) at 50 %: 3.78e14 FLOPs in 1 s. On the SXM entry:
        // 3.78e14 / (989e12 x 0.5) = 0.764408 s. Nothing ran on a catalog card: all modelled.
        pb::MeasuredStep s;
        s.stepTimeMs = 1000;
        s.flopsPerStep = 3.78e14;
        s.tokensPerStep = 1024;
        s.device = pb::DevicePeak {"NVIDIA H100 PCIe", 756, 2.0};
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto p = pb::projectStep(s, catalog, catalog.card("h100-sxm-80gb"), 1);
        QVERIFY(qAbs(p.stepTimeMs - 764.408493) < 1e-5);
        QCOMPARE(p.basis, pb::FigureBasis::Modelled);
        QVERIFY(anyContains(p.assumptions, "calibrated on NVIDIA H100 PCIe"));
    }

    void fp8ProjectsThroughItsMeasuredGain()
    {
        // FP8 on the H100: 4.945e14 FLOPs in 0.8 s with a measured 1.25x over bf16-mixed, so the
        // bf16 equivalent is 1 s = 50 % of its BF16 989. The MI300X at 50 % of 1307.4: 0.756616 s
        // as bf16, / 1.25 = 0.605293 s. The A100 has no FP8: the bf16 time, 4.945e14 / 156e12 =
        // 3.169872 s. The datasheets' FP8 peaks (1979, 2614.9) play no part.
        pb::MeasuredStep s = h100ComputeBound();
        s.format = pb::NumericFormat::Fp8;
        s.stepTimeMs = 800;
        s.bytesPerStep = 0;
        s.fp8Speedup = 1.25;
        s.fp8SpeedupSource = "pilots 2 (fp8-rowwise) and 1 (bf16-mixed) on NVIDIA H100";
        const pb::Catalog catalog = pb::builtInCatalog();
        QVERIFY(qAbs(pb::calibrate(s, catalog).computeEfficiency - 0.5) < 1e-12);
        const auto mi = pb::projectStep(s, catalog, catalog.card("mi300x-192gb"), 1);
        QVERIFY(qAbs(mi.stepTimeMs - 1000.0 * 989 / 1307.4 / 1.25) < 1e-9);
        QVERIFY(anyContains(mi.assumptions, "1.25x over bf16-mixed measured by pilots 2"));
        const auto a100 = pb::projectStep(s, catalog, catalog.card("a100-sxm-80gb"), 1);
        QVERIFY(qAbs(a100.stepTimeMs - 4.945e14 / 156e12 * 1000) < 1e-6);
        QVERIFY(anyContains(a100.assumptions, "no FP8 tensor cores"));
        // Unmeasured, no gain is assumed: the fp8 step itself is the bf16 equivalent.
        s.fp8Speedup = 0;
        const auto flat = pb::projectStep(s, catalog, catalog.card("mi300x-192gb"), 1);
        QVERIFY(qAbs(flat.stepTimeMs - 800.0 * 989 / 1307.4) < 1e-9);
        QVERIFY(anyContains(flat.assumptions, "was not measured"));
        QCOMPARE(pb::projectStep(s, catalog, catalog.card("h100-sxm-80gb"), 1).stepTimeMs, 800.0); // measured there
        s.fp8Speedup = -1;
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::calibrate(s, catalog));
    }

    void refusals_data()
    {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("where");
        QTest::newRow("above peak") << 0 << "measured.flops_per_step";       // 1e15 in 1 s > 989 TFLOP/s
        QTest::newRow("above bandwidth") << 1 << "measured.bytes_per_step";  // 4e12 in 1 s > 3.35 TB/s
        QTest::newRow("zero time") << 2 << "measured.step_time_ms";
        QTest::newRow("no tokens") << 3 << "measured.tokens_per_step";
        QTest::newRow("bad scaling") << 4 << "measured.scaling_efficiency.2";
        QTest::newRow("no gpus") << 5 << "gpus";
        QTest::newRow("unknown card") << 6 << "card";
    }
    void refusals()
    {
        QFETCH(int, fault);
        QFETCH(QString, where);
        pb::MeasuredStep s = h100ComputeBound();
        int gpus = 2;
        switch (fault) {
        case 0: s.flopsPerStep = 1e15; break;
        case 1: s.bytesPerStep = 4e12; break;
        case 2: s.stepTimeMs = 0; break;
        case 3: s.tokensPerStep = 0; break;
        case 4: s.scalingEfficiencyByGpus[2] = 1.5; break;
        case 5: gpus = 0; break;
        case 6: s.cardId = "h100"; break;
        }
        const pb::Catalog catalog = pb::builtInCatalog();
        try {
            pb::projectStep(s, catalog, catalog.card("h100-sxm-80gb"), gpus);
            QFAIL("accepted");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), where);
        }
    }

    void scalingEfficiencyFromThroughput()
    {
        // 3600 tokens/s on 4 GPUs against 1000 on one: 3600 / 4000 = 0.9
        QCOMPARE(pb::scalingEfficiency(1000, 3600, 4), 0.9);
    }
};

QTEST_GUILESS_MAIN(TestProjection)
#include "tst_projection.moc"
