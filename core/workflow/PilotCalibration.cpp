#include "workflow/PilotCalibration.h"

#include "config/RunConfigJson.h"
#include "estimate/MemoryEstimator.h"
#include "util/Errors.h"

#include <cstdlib>

namespace pb {
namespace {

bool isCuda(const std::string &device) { return device.rfind("cuda", 0) == 0; }

} // namespace

void setLocalDevice(EstimateOptions &options, const std::string &device, const Environment &env)
{
    options.device = isCuda(device) ? DeviceKind::Cuda : DeviceKind::Cpu;
    options.fusedAttentionAvailable = !env.torchVersion.empty() && std::atoi(env.torchVersion.c_str()) >= 2;
    options.localCapacityBytes = isCuda(device) ? env.deviceMemoryBytes : 0;
    options.deviceName = env.deviceName;
    options.torchVersion = env.torchVersion;
}

MemoryEstimate localTensorEstimate(const RunConfig &config, const std::string &device, const Environment &env)
{
    EstimateOptions options;
    setLocalDevice(options, device, env);
    // Only the tensor peak is compared: the capacity search would be wasted work here.
    options.localCapacityBytes = 0;
    return estimateMemory(config, options);
}

std::optional<int64_t> measuredFrameworkBytes(const std::string &device, const PilotSummary &summary)
{
    if (!isCuda(device))
        return 0;
    if (summary.peakDeviceUsedBytes <= 0 || summary.peakDeviceUsedBytes < summary.peakReservedBytes)
        return std::nullopt;
    return summary.peakDeviceUsedBytes - summary.peakReservedBytes;
}

CalibrationRecord calibrationRecord(const RunConfig &config, const std::string &device, const Environment &env,
                                    const PilotSummary &summary, int64_t runId)
{
    if (summary.peakAllocatedBytes <= 0)
        throw InvalidInputError("calibration", "the pilot measured no peak allocated bytes");
    const MemoryEstimate estimate = localTensorEstimate(config, device, env);
    if (estimate.peakAllocatedBytes <= 0)
        throw InvalidInputError("calibration", "the estimator predicted no peak allocated bytes");
    CalibrationRecord r;
    r.runId = runId;
    r.backend = isCuda(device) ? QStringLiteral("cuda") : QStringLiteral("cpu");
    r.torchVersion = QString::fromStdString(env.torchVersion);
    r.device = QString::fromStdString(env.deviceName);
    r.configHash = configHash(config);
    r.predictedPeakBytes = estimate.peakAllocatedBytes;
    r.measuredPeakBytes = summary.peakAllocatedBytes;
    r.frameworkBytes = measuredFrameworkBytes(device, summary);
    return r;
}

} // namespace pb
