#pragma once
// Calibration from measured pilots: each pilot's residual (measured / predicted peak allocated)
// is stored by the history with its backend, LibTorch version and device; the estimator applies
// the median ratio of the residuals that match the device it predicts for.
#include "estimate/MemoryEstimate.h"

#include <optional>
#include <vector>

namespace pb {

// The residual of one pilot. Throws InvalidInputError when either figure is not positive or the
// framework figure is negative.
CalibrationResidual makeResidual(const std::string &backend, const std::string &torchVersion, const std::string &device,
                                 int64_t predictedBytes, int64_t measuredBytes, const std::string &configHash,
                                 std::optional<int64_t> frameworkBytes = std::nullopt);
// Residuals matching backend and device (and torchVersion when both sides name one).
std::vector<CalibrationResidual> matchingResiduals(const std::vector<CalibrationResidual> &all, const std::string &backend,
                                                   const std::string &device, const std::string &torchVersion);
// Median of measured/predicted; nullopt when `residuals` is empty.
std::optional<double> medianRatio(const std::vector<CalibrationResidual> &residuals);
// Median measured framework bytes of the residuals that carry one, with how many did; nullopt
// when none did (the backend's table figure stands).
struct MeasuredFramework {
    int64_t bytes = 0;
    int samples = 0;
};
std::optional<MeasuredFramework> medianFrameworkBytes(const std::vector<CalibrationResidual> &residuals);

} // namespace pb
