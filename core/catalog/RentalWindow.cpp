#include "catalog/RentalWindow.h"
#include "util/FixedText.h"

#include "util/Errors.h"
#include "util/Units.h"

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

// A tiny pilot's checkpoint takes milliseconds and a real one minutes: both should read.
std::string durationText(double ms) { return ms > 0 && ms < 1000 ? fixed(ms, 1) + " ms" : fixed(ms / 1000.0, 1) + " s"; }

// Rates as the upload rate is given, GB/s of 1e9 bytes; a small pilot's fsync-bound rate keeps a digit more.
std::string rateText(double bytesPerSecond)
{
    const double gbps = bytesPerSecond / 1e9;
    return fixed(gbps, gbps < 0.1 ? 3 : 2) + " GB/s";
}

double msAt(int64_t bytes, double bytesPerSecond) { return bytesPerSecond > 0 ? static_cast<double>(bytes) / bytesPerSecond * 1000.0 : 0.0; }

} // namespace

WindowEstimate rentalWindow(const PilotPhaseTimes &pilot, const JobSchedule &job)
{
    requireNonNegative("pilot.setup_ms", pilot.setupMs);
    requireNonNegative("pilot.validation_pass_ms", pilot.validationPassMs);
    requireNonNegative("pilot.checkpoint_write_bytes_per_s", pilot.checkpointWriteBytesPerSecond);
    requireNonNegative("pilot.checkpoint_verify_bytes_per_s", pilot.checkpointVerifyBytesPerSecond);
    requireNonNegative("pilot.checkpoint_restore_bytes_per_s", pilot.checkpointRestoreBytesPerSecond);
    requireNonNegative("job.steps", job.jobSteps);
    requireNonNegative("job.checkpoint_bytes", static_cast<double>(job.checkpointBytes));
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

    w.assumptions.push_back("start-up and loading as measured in the pilot (" + fixed(pilot.setupMs / 1000.0, 1) + " s), once per rental");
    if (job.validationEverySteps > 0)
        w.assumptions.push_back(std::to_string(w.validationPasses) + " validation passes of " + fixed(pilot.validationPassMs * job.validationTimeScale / 1000.0, 1)
                                + " s (measured pass x " + fixed(job.validationTimeScale, 3) + ", the card's step-time ratio)");

    // Without a measured write there is no rate to scale: leave checkpoints out rather than guess.
    if (pilot.checkpointWriteBytesPerSecond <= 0) {
        w.assumptions.push_back("no checkpoint write was measured in the pilot: checkpoint writes, their uploads and the final export are not in the rental window");
        return w;
    }
    // All ranks of one host write to the same disk, so a sharded strategy splits the bytes but not
    // the bandwidth: the whole checkpoint takes the same time on 1 card as on 8.
    w.checkpointWriteMs = msAt(job.checkpointBytes, pilot.checkpointWriteBytesPerSecond);
    w.checkpointUploadMs = msAt(job.checkpointBytes, job.uploadGBps * 1e9);
    const double oneCheckpointMs = w.checkpointWriteMs + w.checkpointUploadMs;
    w.window.checkpointHours = static_cast<double>(w.checkpointWrites) * oneCheckpointMs / kMsPerHour;
    w.window.exportHours = oneCheckpointMs / kMsPerHour;

    const std::string size = formatBytes(job.checkpointBytes, 1).toStdString();
    w.assumptions.push_back("each checkpoint of the planned job holds " + size + " (weights as stored and optimizer state), the same on any card count: "
                            + durationText(w.checkpointWriteMs) + " to write at the pilot's measured " + rateText(pilot.checkpointWriteBytesPerSecond)
                            + ", as all ranks on one host share its disk (sharded strategies split the bytes, not the disk)");
    w.assumptions.push_back("each checkpoint is uploaded off the machine at an assumed " + fixed(job.uploadGBps, 2) + " GB/s (" + durationText(w.checkpointUploadMs)
                            + "); the final export is one more write and upload");
    // The window budgets no failed or repeated steps, so no resume either; what one would cost is
    // still worth knowing when choosing how often to checkpoint.
    if (pilot.checkpointRestoreBytesPerSecond > 0 || pilot.checkpointVerifyBytesPerSecond > 0) {
        std::string text = "a resume is not budgeted; restoring a checkpoint would take ";
        if (pilot.checkpointRestoreBytesPerSecond > 0)
            text += durationText(msAt(job.checkpointBytes, pilot.checkpointRestoreBytesPerSecond)) + " at the restore check's measured "
                    + rateText(pilot.checkpointRestoreBytesPerSecond);
        else
            text += "an unmeasured time";
        if (pilot.checkpointVerifyBytesPerSecond > 0)
            text += ", after verifying it in " + durationText(msAt(job.checkpointBytes, pilot.checkpointVerifyBytesPerSecond)) + " at "
                    + rateText(pilot.checkpointVerifyBytesPerSecond);
        w.assumptions.push_back(text);
    }
    return w;
}

} // namespace pb
