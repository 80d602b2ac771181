#include "catalog/StepProjection.h"
#include "util/FixedText.h"

#include "util/Errors.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pb {
namespace {


// An FP8 step's measured gain over bf16-mixed; 1 where not measured (and for BF16 steps).
double fp8Gain(const MeasuredStep &step) { return step.format == NumericFormat::Fp8 && step.fp8Speedup > 0 ? step.fp8Speedup : 1.0; }

std::string percent(double fraction) { return fixed(fraction * 100.0, 1) + " %"; }

void requirePositive(const char *where, double value)
{
    if (!std::isfinite(value) || value <= 0)
        throw InvalidInputError(where, "must be a positive number (got " + fixed(value, 3) + ")");
}

} // namespace

const char *toString(FigureBasis basis) { return basis == FigureBasis::Measured ? "measured" : "modelled"; }
const char *toString(NumericFormat format) { return format == NumericFormat::Fp8 ? "fp8" : "bf16"; }

DevicePeak cardPeak(const CardSpec &card) { return DevicePeak {card.name, card.bf16DenseTflops, card.memoryBandwidthTbps}; }

Calibration calibrate(const MeasuredStep &step, const Catalog &catalog)
{
    requirePositive("measured.step_time_ms", step.stepTimeMs);
    requirePositive("measured.flops_per_step", step.flopsPerStep);
    if (!std::isfinite(step.bytesPerStep) || step.bytesPerStep < 0)
        throw InvalidInputError("measured.bytes_per_step", "must be zero (unknown) or positive");
    if (step.format == NumericFormat::Fp8 && (!std::isfinite(step.fp8Speedup) || step.fp8Speedup < 0))
        throw InvalidInputError("measured.fp8_speedup", "must be zero (not measured) or positive");
    Calibration cal;
    const double seconds = step.stepTimeMs * fp8Gain(step) / 1000.0;
    cal.achievedTflops = step.flopsPerStep / seconds / 1e12;
    std::optional<DevicePeak> peak;
    if (!step.cardId.empty())
        peak = cardPeak(catalog.card(step.cardId));
    else if (step.device)
        peak = step.device;
    if (!peak) {
        cal.deviceLabel = "unknown device";
        return cal;
    }
    requirePositive("measured.device.peak_tflops", peak->peakTflops);
    cal.calibrated = true;
    cal.deviceLabel = peak->label;
    cal.computeEfficiency = cal.achievedTflops / peak->peakTflops;
    if (cal.computeEfficiency > 1.0)
        throw InvalidInputError("measured.flops_per_step", "the step would run at " + fixed(cal.achievedTflops, 1) + " TFLOP/s, above the " + fixed(peak->peakTflops, 1)
                                    + " TFLOP/s peak of " + peak->label + ": the FLOP count or the device is wrong");
    if (step.bytesPerStep > 0 && peak->bandwidthTbps > 0) {
        const double achievedTbps = step.bytesPerStep / seconds / 1e12;
        cal.bandwidthEfficiency = achievedTbps / peak->bandwidthTbps;
        if (cal.bandwidthEfficiency > 1.0)
            throw InvalidInputError("measured.bytes_per_step", "the step would move " + fixed(achievedTbps, 2) + " TB/s, above the " + fixed(peak->bandwidthTbps, 2)
                                        + " TB/s of " + peak->label + ": the byte count or the device is wrong");
    }
    cal.rooflineEfficiency = std::max(cal.computeEfficiency, cal.bandwidthEfficiency);
    cal.boundBy = cal.bandwidthEfficiency > cal.computeEfficiency ? "memory bandwidth" : "compute";
    return cal;
}

StepProjection projectStep(const MeasuredStep &step, const Catalog &catalog, const CardSpec &card, int gpus, const ProjectionAssumptions &assumptions)
{
    if (gpus < 1)
        throw InvalidInputError("gpus", "must be at least 1");
    requirePositive("measured.tokens_per_step", step.tokensPerStep);
    const Calibration cal = calibrate(step, catalog);
    StepProjection p;
    p.cardId = card.id;
    p.gpus = gpus;
    const bool measuredCard = !step.cardId.empty() && step.cardId == card.id;

    const DevicePeak target = cardPeak(card);
    // FP8: the BF16-equivalent step projected on the BF16 roofline, then divided by the gain the
    // pilots measured (1 unmeasured) where the card has FP8 tensor cores.
    const bool fp8 = step.format == NumericFormat::Fp8;
    const double gain = fp8 && card.fp8DenseTflops ? fp8Gain(step) : 1.0;
    if (fp8 && !measuredCard) {
        const std::string measured = step.fp8Speedup > 0 ? "the " + fixed(step.fp8Speedup, 2) + "x over bf16-mixed measured by " + step.fp8SpeedupSource
                                                         : "no gain (FP8's speed over bf16-mixed was not measured for this run: pilot both precisions on one card)";
        if (card.fp8DenseTflops)
            p.assumptions.push_back("fp8 projected as bf16-mixed on " + card.name + "'s BF16 roofline, then " + measured + ", assumed the same on " + card.name
                                    + " (the datasheets' FP8/BF16 peak ratio is not used)");
        else
            p.assumptions.push_back(card.name + " has no FP8 tensor cores: the run cannot use fp8 there; shown at the bf16-mixed speed the measurement implies");
    }
    const double computeEff = cal.calibrated ? cal.rooflineEfficiency : assumptions.uncalibratedComputeEfficiency;
    const double bandwidthEff = cal.calibrated ? cal.rooflineEfficiency : assumptions.uncalibratedBandwidthEfficiency;
    const double computeSeconds = step.flopsPerStep / (target.peakTflops * 1e12 * computeEff) / gain;
    const double bandwidthSeconds = step.bytesPerStep > 0 ? step.bytesPerStep / (target.bandwidthTbps * 1e12 * bandwidthEff) / gain : 0.0;
    p.boundBy = bandwidthSeconds > computeSeconds ? "memory bandwidth" : "compute";

    if (measuredCard) {
        p.singleGpuStepTimeMs = step.stepTimeMs;
        p.singleGpuBasis = FigureBasis::Measured;
        p.boundBy = cal.boundBy;
    } else {
        p.singleGpuStepTimeMs = std::max(computeSeconds, bandwidthSeconds) * 1000.0;
        p.singleGpuBasis = FigureBasis::Modelled;
        p.assumptions.push_back("roofline: time = max(FLOPs / (peak x efficiency), bytes / (bandwidth x efficiency)) at " + card.name + "'s datasheet " + fixed(target.peakTflops, 0)
                                + " TFLOP/s (BF16 dense) and " + fixed(target.bandwidthTbps, 2) + " TB/s");
        if (cal.calibrated) {
            p.assumptions.push_back("efficiency " + percent(cal.rooflineEfficiency) + " calibrated on " + cal.deviceLabel + " (the measured step was bound by " + cal.boundBy + ": "
                                    + percent(cal.computeEfficiency) + " of peak FLOP/s" + (cal.bandwidthEfficiency > 0 ? ", " + percent(cal.bandwidthEfficiency) + " of peak bandwidth" : std::string())
                                    + ") and assumed the same on " + card.name + "; kernel, numeric and software-stack differences are not modelled");
        } else {
            p.assumptions.push_back("the measured device's peak is unknown, so nothing is calibrated: assumed " + percent(assumptions.uncalibratedComputeEfficiency) + " of peak FLOP/s and "
                                    + percent(assumptions.uncalibratedBandwidthEfficiency) + " of peak bandwidth");
        }
        if (step.bytesPerStep <= 0)
            p.assumptions.push_back("memory traffic per step unknown: projected from compute alone, so a bandwidth-bound step would be slower");
    }

    p.scalingEfficiency = 1.0;
    bool scalingMeasured = gpus == 1;
    if (gpus > 1) {
        const auto it = step.scalingEfficiencyByGpus.find(gpus);
        if (it != step.scalingEfficiencyByGpus.end()) {
            if (!std::isfinite(it->second) || it->second <= 0 || it->second > 1.1)
                throw InvalidInputError("measured.scaling_efficiency." + std::to_string(gpus), "must be above 0 and at most 1.1 (got " + fixed(it->second, 3) + ")");
            p.scalingEfficiency = it->second;
            scalingMeasured = measuredCard;
            if (!measuredCard)
                p.assumptions.push_back("scaling efficiency " + fixed(it->second, 2) + " at " + std::to_string(gpus) + " GPUs measured on " + step.cardId + ", assumed the same on " + card.name);
        } else {
            requirePositive("assumptions.default_scaling_efficiency", assumptions.defaultScalingEfficiency);
            p.scalingEfficiency = assumptions.defaultScalingEfficiency;
            scalingMeasured = false;
            p.assumptions.push_back("scaling efficiency " + fixed(p.scalingEfficiency, 2) + " at " + std::to_string(gpus) + " GPUs assumed (data parallel over " + card.interconnect
                                    + "; no scaling step measured there)");
        }
    }
    p.stepTimeMs = p.singleGpuStepTimeMs / (gpus * p.scalingEfficiency);
    p.perGpuBatchStepTimeMs = p.singleGpuStepTimeMs / p.scalingEfficiency;
    p.tokensPerSecond = step.tokensPerStep / (p.stepTimeMs / 1000.0);
    p.basis = (p.singleGpuBasis == FigureBasis::Measured && scalingMeasured) ? FigureBasis::Measured : FigureBasis::Modelled;
    return p;
}

std::vector<StepProjection> projectAll(const MeasuredStep &step, const Catalog &catalog, std::vector<int> gpuCounts, const ProjectionAssumptions &assumptions)
{
    if (gpuCounts.empty())
        gpuCounts = catalog.gpuCounts;
    std::vector<StepProjection> out;
    for (const auto &card : catalog.cards) {
        for (int gpus : gpuCounts)
            out.push_back(projectStep(step, catalog, card, gpus, assumptions));
    }
    return out;
}

double scalingEfficiency(double tokensPerSecondOne, double tokensPerSecondN, int gpus)
{
    requirePositive("scaling.tokens_per_second_1", tokensPerSecondOne);
    requirePositive("scaling.tokens_per_second_n", tokensPerSecondN);
    if (gpus < 1)
        throw InvalidInputError("scaling.gpus", "must be at least 1");
    return tokensPerSecondN / (gpus * tokensPerSecondOne);
}

} // namespace pb
