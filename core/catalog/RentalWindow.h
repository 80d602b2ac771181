#pragma once
// The rental window's non-training hours from a pilot's measured phases, scaled to the planned
// job: start-up and loading once, every validation pass, every checkpoint write and its upload
// off the machine (local NVMe is not a backup), and the final export. Checkpoints are carried as
// measured throughput, not time, so a planned model larger than the pilot's takes longer to save.
#include "catalog/CostModel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct PilotPhaseTimes {
    double setupMs = 0;                // model build, weights and data loading, as measured
    double validationPassMs = 0;       // one validation pass as measured (0: none measured)
    // Bytes per second the pilot's disk took; 0: not measured. Write from the pilot's own
    // checkpoints; verify and restore from a restore check of the same config, where one ran.
    double checkpointWriteBytesPerSecond = 0;
    double checkpointVerifyBytesPerSecond = 0;
    double checkpointRestoreBytesPerSecond = 0;
};

struct JobSchedule {
    double jobSteps = 0;               // optimizer steps of the planned job on this configuration
    int64_t validationEverySteps = 0;  // 0: no validation
    int64_t checkpointEverySteps = 0;  // 0: only the final export
    // Validation runs the model like training does: its measured time is multiplied by this
    // (projected step time / measured step time; 1 on the measured card).
    double validationTimeScale = 1.0;
    double uploadGBps = 1.0;           // assumed uplink to off-machine storage, GB/s (1e9 bytes)
    // One whole checkpoint of the planned job (checkpointBytesFor): the same on any card count.
    int64_t checkpointBytes = 0;
};

struct WindowEstimate {
    WindowInputs window;
    int64_t validationPasses = 0;
    int64_t checkpointWrites = 0;      // periodic writes, without the final export
    double checkpointWriteMs = 0;      // one checkpoint of the planned job at the measured rate (0: not measured)
    double checkpointUploadMs = 0;     // and its upload
    std::vector<std::string> assumptions;
};

// Throws InvalidInputError for negative times, sizes, rates or steps, or a non-positive upload rate.
WindowEstimate rentalWindow(const PilotPhaseTimes &pilot, const JobSchedule &job);

} // namespace pb
