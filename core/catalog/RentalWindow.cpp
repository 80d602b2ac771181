#include "catalog/RentalWindow.h"
#include "util/FixedText.h"

#include "util/Errors.h"

#include <cmath>
#include <sstream>

namespace pb {
namespace {

constexpr double kMsPerHour = 3600.0 * 1000.0;

void requireNonNegative(const char *where, double value)
{
    if (!std::isfinite(value) || value < 0)
        throw InvalidInputError(where, "must be zero or more");
}


} // namespace

WindowEstimate rentalWindow(const PilotPhaseTimes &pilot, const JobSchedule &job)
{
    requireNonNegative("pilot.setup_ms", pilot.setupMs);
    requireNonNegative("pilot.validation_pass_ms", pilot.validationPassMs);
    requireNonNegative("pilot.checkpoint_write_ms", pilot.checkpointWriteMs);
    requireNonNegative("pilot.checkpoint_bytes", static_cast<double>(pilot.checkpointBytes));
    requireNonNegative("job.steps", job.jobSteps);
    requireNonNegative("validation.every_steps", static_cast<double>(job.validationEverySteps));
    requireNonNegative("checkpoint.every_steps", static_cast<double>(job.checkpointEverySteps));
    if (!std::isfinite(job.validationTimeScale) || job.validationTimeScale <= 0)
        throw InvalidInputError("validation_time_scale", "must be positive");
    if (!std::isfinite(job.uploadGBps) || job.uploadGBps <= 0)
        throw InvalidInputError("upload_gbps", "must be positive");

    WindowEstimate w;
    w.window.startupHours = pilot.setupMs / kMsPerHour;
    // A pass every N steps, counted as training reaches step N, 2N, ...: floor(steps / N).
    if (job.validationEverySteps > 0)
        w.validationPasses = static_cast<int64_t>(std::floor(job.jobSteps / static_cast<double>(job.validationEverySteps)));
    w.window.validationHours = static_cast<double>(w.validationPasses) * pilot.validationPassMs * job.validationTimeScale / kMsPerHour;
    if (job.checkpointEverySteps > 0)
        w.checkpointWrites = static_cast<int64_t>(std::floor(job.jobSteps / static_cast<double>(job.checkpointEverySteps)));
    const double uploadMs = static_cast<double>(pilot.checkpointBytes) / (job.uploadGBps * 1e9) * 1000.0;
    const double oneCheckpointMs = pilot.checkpointWriteMs + uploadMs;
    w.window.checkpointHours = static_cast<double>(w.checkpointWrites) * oneCheckpointMs / kMsPerHour;
    w.window.exportHours = oneCheckpointMs / kMsPerHour;

    w.assumptions.push_back("start-up and loading as measured in the pilot (" + fixed(pilot.setupMs / 1000.0, 1) + " s), once per rental");
    if (job.validationEverySteps > 0)
        w.assumptions.push_back(std::to_string(w.validationPasses) + " validation passes of " + fixed(pilot.validationPassMs * job.validationTimeScale / 1000.0, 1)
                                + " s (measured pass x " + fixed(job.validationTimeScale, 3) + ", the card's step-time ratio)");
    w.assumptions.push_back("each checkpoint is written as measured (" + fixed(pilot.checkpointWriteMs / 1000.0, 1) + " s) and uploaded off the machine at an assumed "
                            + fixed(job.uploadGBps, 2) + " GB/s (" + fixed(uploadMs / 1000.0, 1) + " s); the final export is one more");
    return w;
}

} // namespace pb
