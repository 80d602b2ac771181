// Stored pilot residuals calibrate the estimate: the median ratio scales the tensor peak, the
// median measured framework bytes replace the table's figure, and residuals from another device,
// backend or LibTorch version are left out. Figures are worked out in the comments.
#include "estimate/Calibration.h"
#include "estimate/MemoryEstimator.h"
#include "util/Errors.h"

#include <QtTest>

#include <algorithm>
#include <cmath>

using namespace pb;

namespace {

constexpr int64_t kMiB = 1024LL * 1024;

RunConfig small()
{
    RunConfig c;
    c.model.layers = 2;
    c.model.hiddenSize = 64;
    c.model.attentionHeads = 4;
    c.model.kvHeads = 4;
    c.model.intermediateSize = 128;
    c.model.vocabSize = 256;
    c.model.maxPositions = 128;
    c.train.seqLen = 32;
    c.train.microBatch = 2;
    return c;
}

EstimateOptions h200()
{
    EstimateOptions o;
    o.device = DeviceKind::Cuda;
    o.deviceName = "NVIDIA H200";
    o.torchVersion = "2.11.0";
    return o;
}

CalibrationResidual residual(const std::string &backend, const std::string &device, int64_t predicted, int64_t measured,
                             std::optional<int64_t> framework, const std::string &torch = "2.11.0")
{
    return makeResidual(backend, torch, device, predicted, measured, "hash", framework);
}

bool anyContains(const std::vector<std::string> &lines, const std::string &needle)
{
    return std::any_of(lines.begin(), lines.end(), [&](const std::string &l) { return l.find(needle) != std::string::npos; });
}

} // namespace

class TestCalibration final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void medians()
    {
        // Ratios 1.1, 1.2, 1.05 -> sorted 1.05, 1.1, 1.2 -> 1.1. Framework: 700 and 760 MiB carried,
        // one unknown -> (700 + 760) / 2 = 730 MiB from 2 samples.
        const std::vector<CalibrationResidual> r {residual("cuda", "d", 1000, 1100, 700 * kMiB), residual("cuda", "d", 1000, 1200, 760 * kMiB),
                                                  residual("cuda", "d", 2000, 2100, std::nullopt)};
        QCOMPARE(*medianRatio(r), 1.1);
        QCOMPARE(medianFrameworkBytes(r)->bytes, 730 * kMiB);
        QCOMPARE(medianFrameworkBytes(r)->samples, 2);
        // Odd count of framework figures: the middle one. An even pair 3, 4 rounds down to 3.
        QCOMPARE(medianFrameworkBytes({residual("cuda", "d", 1, 1, 9), residual("cuda", "d", 1, 1, 1), residual("cuda", "d", 1, 1, 5)})->bytes, int64_t(5));
        QCOMPARE(medianFrameworkBytes({residual("cuda", "d", 1, 1, 3), residual("cuda", "d", 1, 1, 4)})->bytes, int64_t(3));
        QVERIFY(!medianFrameworkBytes({residual("cuda", "d", 1, 1, std::nullopt)}));
        QVERIFY(!medianFrameworkBytes({}));
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, residual("cuda", "d", 1, 1, -1));
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, residual("cuda", "d", 0, 1, 1));
    }

    void storedResidualsCalibrateAndSetTheFrameworkFigure()
    {
        const RunConfig config = small();
        const MemoryEstimate raw = estimateMemory(config, h200());
        // Without residuals: the table's measured CUDA figure, 760 MiB, and no calibration.
        QCOMPARE(raw.breakdown.framework, 760 * kMiB);
        QCOMPARE(raw.calibrationSamples, 0);
        QVERIFY(!raw.calibratedTotalBytes);
        QVERIFY(anyContains(raw.assumptions, "NVIDIA H200, LibTorch 2.11.0, CUDA 13.0"));

        EstimateOptions options = h200();
        options.calibration = {
            residual("cuda", "NVIDIA H200", 1000, 1100, 700 * kMiB),
            residual("cuda", "NVIDIA H200", 1000, 1200, 760 * kMiB),
            residual("cuda", "NVIDIA H200", 2000, 2100, std::nullopt),
            residual("cuda", "NVIDIA H100 80GB HBM3", 1000, 5000, 1),  // another device
            residual("cuda", "NVIDIA H200", 1000, 5000, 1, "2.5.1"),   // another LibTorch
            residual("cpu", "NVIDIA H200", 1000, 5000, 0),             // another backend
        };
        const MemoryEstimate e = estimateMemory(config, options);
        // The three matching residuals: ratio 1.1 from 3 samples; framework 730 MiB from 2.
        QCOMPARE(e.calibrationSamples, 3);
        QCOMPARE(e.calibrationRatio, 1.1);
        QCOMPARE(e.breakdown.framework, 730 * kMiB);
        QVERIFY(anyContains(e.assumptions, "the median of 2 stored pilot measurement(s)"));
        // The raw tensor peak is the estimator's own; the raw total differs only by the framework
        // figure: 760 - 730 = 30 MiB less.
        QCOMPARE(e.peakAllocatedBytes, raw.peakAllocatedBytes);
        QCOMPARE(e.breakdown.workspace, raw.breakdown.workspace);
        QCOMPARE(e.totalBytes, raw.totalBytes - 30 * kMiB);
        // Calibrated: 1.1 x the tensor peak, plus the same workspace and the measured framework.
        const int64_t calibratedPeak = std::llround(1.1 * static_cast<double>(raw.peakAllocatedBytes));
        QCOMPARE(*e.calibratedPeakAllocatedBytes, calibratedPeak);
        QCOMPARE(*e.calibratedTotalBytes, calibratedPeak + raw.breakdown.workspace + 730 * kMiB);
    }

    void frameworkFigureStaysTheTableWithoutMeasurements()
    {
        EstimateOptions options = h200();
        options.calibration = {residual("cuda", "NVIDIA H200", 1000, 900, std::nullopt), residual("cuda", "NVIDIA H200", 1000, 1000, std::nullopt)};
        const MemoryEstimate e = estimateMemory(small(), options);
        // Ratios 0.9 and 1.0: the even median is their mean, 0.95.
        QCOMPARE(e.calibrationSamples, 2);
        QCOMPARE(e.calibrationRatio, 0.95);
        QCOMPARE(e.breakdown.framework, 760 * kMiB);
        QVERIFY(!anyContains(e.assumptions, "stored pilot measurement"));
    }

    void cpuResidualsCarryNoFramework()
    {
        EstimateOptions options;
        options.device = DeviceKind::Cpu;
        options.deviceName = "Some CPU";
        options.torchVersion = "1.13.0";
        options.calibration = {makeResidual("cpu", "1.13.0", "Some CPU", 4000, 5000, "h", 0)};
        const MemoryEstimate e = estimateMemory(small(), options);
        QCOMPARE(e.calibrationSamples, 1);
        QCOMPARE(e.calibrationRatio, 1.25);
        QCOMPARE(e.breakdown.framework, int64_t(0));
        // CPU has no workspace or context: calibrated total = calibrated tensor peak = 1.25 x raw.
        QCOMPARE(*e.calibratedTotalBytes, std::llround(1.25 * static_cast<double>(e.peakAllocatedBytes)));
    }
};

QTEST_GUILESS_MAIN(TestCalibration)
#include "tst_calibration.moc"
