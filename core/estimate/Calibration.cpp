#include "estimate/Calibration.h"

#include "util/Errors.h"

#include <algorithm>

namespace pb {

CalibrationResidual makeResidual(const std::string &backend, const std::string &torchVersion, const std::string &device,
                                 int64_t predictedBytes, int64_t measuredBytes, const std::string &configHash,
                                 std::optional<int64_t> frameworkBytes)
{
    if (predictedBytes <= 0 || measuredBytes <= 0)
        throw InvalidInputError("calibration", "a residual needs positive predicted and measured bytes");
    if (frameworkBytes && *frameworkBytes < 0)
        throw InvalidInputError("calibration", "measured framework bytes cannot be negative");
    return {backend, torchVersion, device, predictedBytes, measuredBytes, configHash, frameworkBytes};
}

std::vector<CalibrationResidual> matchingResiduals(const std::vector<CalibrationResidual> &all, const std::string &backend,
                                                   const std::string &device, const std::string &torchVersion)
{
    std::vector<CalibrationResidual> out;
    for (const auto &r : all) {
        if (r.backend != backend || r.predictedBytes <= 0 || r.measuredBytes <= 0)
            continue;
        if (!device.empty() && r.device != device)
            continue;
        if (!torchVersion.empty() && !r.torchVersion.empty() && r.torchVersion != torchVersion)
            continue;
        out.push_back(r);
    }
    return out;
}

std::optional<double> medianRatio(const std::vector<CalibrationResidual> &residuals)
{
    if (residuals.empty())
        return std::nullopt;
    std::vector<double> ratios;
    for (const auto &r : residuals)
        ratios.push_back(static_cast<double>(r.measuredBytes) / static_cast<double>(r.predictedBytes));
    std::sort(ratios.begin(), ratios.end());
    const size_t mid = ratios.size() / 2;
    return ratios.size() % 2 ? ratios[mid] : 0.5 * (ratios[mid - 1] + ratios[mid]);
}

std::optional<MeasuredFramework> medianFrameworkBytes(const std::vector<CalibrationResidual> &residuals)
{
    std::vector<int64_t> bytes;
    for (const auto &r : residuals)
        if (r.frameworkBytes && *r.frameworkBytes >= 0)
            bytes.push_back(*r.frameworkBytes);
    if (bytes.empty())
        return std::nullopt;
    std::sort(bytes.begin(), bytes.end());
    const size_t mid = bytes.size() / 2;
    // Halves round down: an even count's median stays a whole byte count.
    const int64_t median = bytes.size() % 2 ? bytes[mid] : bytes[mid - 1] + (bytes[mid] - bytes[mid - 1]) / 2;
    return MeasuredFramework {median, static_cast<int>(bytes.size())};
}

} // namespace pb
