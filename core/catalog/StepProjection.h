#pragma once
// Step time per card and card count from one measured pilot step. The measured device calibrates
// how close the workload gets to its roofline; every other card is projected with that efficiency
// and labelled modelled, with the assumptions spelled out.
#include "catalog/Catalog.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class FigureBasis { Measured, Modelled };
const char *toString(FigureBasis basis);   // "measured" / "modelled"

enum class NumericFormat { Bf16, Fp8 };
const char *toString(NumericFormat format);

// Peak of a device that is not a catalog card (or a card's peak in a format).
struct DevicePeak {
    std::string label;                 // "NVIDIA H200", "cpu"
    double peakTflops = 0;             // dense, in the format the step ran in
    double bandwidthTbps = 0;          // memory bandwidth; 0 unknown
};

// The card's dense BF16 peak and bandwidth: the roofline every format is projected on (an FP8
// step through its measured gain over BF16, never the datasheets' FP8/BF16 peak ratio).
DevicePeak cardPeak(const CardSpec &card);

struct MeasuredStep {
    double stepTimeMs = 0;             // mean synchronised step time on one GPU
    double flopsPerStep = 0;           // model FLOPs of one optimizer step (all micro-batches)
    double bytesPerStep = 0;           // memory traffic of one step; 0: unknown (compute term only)
    double tokensPerStep = 0;          // tokens of one optimizer step on one GPU
    NumericFormat format = NumericFormat::Bf16;
    // Fp8 only: tokens/s in fp8 over tokens/s in bf16-mixed, measured for this run on the measured
    // device (0: not measured, then assumed 1), and the words saying which runs measured it.
    double fp8Speedup = 0;
    std::string fp8SpeedupSource;
    std::string cardId;                // catalog card it ran on (a clean matchDevice); empty otherwise
    std::optional<DevicePeak> device;  // the measured device's peak when cardId is empty; unset: unknown (CPU)
    // Measured on cardId: gpus -> efficiency (throughput on N / (N x throughput on one)).
    std::map<int, double> scalingEfficiencyByGpus;
};

struct ProjectionAssumptions {
    double defaultScalingEfficiency = 0.9;        // DDP over NVLink / Infinity Fabric, no measurement
    double uncalibratedComputeEfficiency = 0.40;  // measured device peak unknown (CPU pilot)
    double uncalibratedBandwidthEfficiency = 0.70;
};

// How the measured step sits against its device's roofline.
struct Calibration {
    bool calibrated = false;           // false: the measured device's peak is unknown
    std::string deviceLabel;
    double achievedTflops = 0;
    double computeEfficiency = 0;      // achieved FLOP/s / peak FLOP/s (MFU)
    double bandwidthEfficiency = 0;    // achieved bytes/s / peak bandwidth; 0 when bytes are unknown
    double rooflineEfficiency = 0;     // the larger of the two: the binding resource's efficiency
    std::string boundBy;               // "compute" or "memory bandwidth"
};

// Against the device's BF16 roofline; an FP8 step as its BF16 equivalent (its time times the
// measured gain). Throws InvalidInputError for a non-positive time or FLOP count, an unknown card,
// or an efficiency above 1 (the FLOP/byte count or the peak is wrong: never clamped).
Calibration calibrate(const MeasuredStep &step, const Catalog &catalog);

struct StepProjection {
    std::string cardId;
    int gpus = 1;
    double singleGpuStepTimeMs = 0;    // the measured step's work on one card of this kind
    double stepTimeMs = 0;             // the same work (global batch fixed) on `gpus` cards
    double perGpuBatchStepTimeMs = 0;  // one step with each GPU keeping the measured batch (DDP)
    double tokensPerSecond = 0;
    double scalingEfficiency = 1;
    std::string boundBy;               // what limits this card: "compute" or "memory bandwidth"
    FigureBasis basis = FigureBasis::Modelled;          // of stepTimeMs / tokensPerSecond
    FigureBasis singleGpuBasis = FigureBasis::Modelled;
    std::vector<std::string> assumptions;               // empty only for a measured figure
};

StepProjection projectStep(const MeasuredStep &step, const Catalog &catalog, const CardSpec &card, int gpus,
                           const ProjectionAssumptions &assumptions = {});
// Every catalog card at every given card count (the catalog's counts when empty).
std::vector<StepProjection> projectAll(const MeasuredStep &step, const Catalog &catalog, std::vector<int> gpuCounts = {},
                                       const ProjectionAssumptions &assumptions = {});

// Efficiency of a scaling step: tokens/s on N GPUs / (N x tokens/s on one).
double scalingEfficiency(double tokensPerSecondOne, double tokensPerSecondN, int gpus);

} // namespace pb
