#pragma once
// The rental window's non-training hours from a pilot's measured phases, scaled to the planned
// job: start-up and loading once, every validation pass, every checkpoint write and its upload
// off the machine (local NVMe is not a backup), and the final export.
#include "catalog/CostModel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct PilotPhaseTimes {
    double setupMs = 0;                // model build, weights and data loading, as measured
    double validationPassMs = 0;       // one validation pass as measured (0: none measured)
    double checkpointWriteMs = 0;      // one checkpoint write as measured (0: none measured)
    int64_t checkpointBytes = 0;       // size of one checkpoint
};

struct JobSchedule {
    double jobSteps = 0;               // optimizer steps of the planned job on this configuration
    int64_t validationEverySteps = 0;  // 0: no validation
    int64_t checkpointEverySteps = 0;  // 0: only the final export
    // Validation runs the model like training does: its measured time is multiplied by this
    // (projected step time / measured step time; 1 on the measured card).
    double validationTimeScale = 1.0;
    double uploadGBps = 1.0;           // assumed uplink to off-machine storage, GB/s (1e9 bytes)
};

struct WindowEstimate {
    WindowInputs window;
    int64_t validationPasses = 0;
    int64_t checkpointWrites = 0;      // periodic writes, without the final export
    std::vector<std::string> assumptions;
};

// Throws InvalidInputError for negative times, sizes or steps, or a non-positive upload rate.
WindowEstimate rentalWindow(const PilotPhaseTimes &pilot, const JobSchedule &job);

} // namespace pb
