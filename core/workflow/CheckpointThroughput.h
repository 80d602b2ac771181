#pragma once
// Checkpoint throughput as the history measured it: a pilot's own checkpoint writes, and a restore
// check's write, verify and restore of the same config. Carried as rates, not times, so the rental
// window and the report can scale them to the planned job's checkpoint. Bytes per second (1e9 is
// 1 GB/s); 0 wherever nothing was measured.
#include "history/HistoryTypes.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;

// 0 unless both are positive (a missing figure is not an infinitely fast disk).
double bytesPerSecond(double bytes, double ms);

// All writes together, total bytes over total time, so a slow small write does not count as much
// as a large one.
double checkpointWriteBytesPerSecond(const std::vector<CheckpointWrite> &writes);

struct RestoreCheckThroughput {
    int64_t runId = 0;
    int64_t checkpointBytes = 0;
    double writeBytesPerSecond = 0;
    double verifyBytesPerSecond = 0;
    double restoreBytesPerSecond = 0;
};

// From a restore-check run's summary: checkpoint_bytes over checkpoint_write_ms, verify_ms and restore_ms.
RestoreCheckThroughput restoreCheckThroughput(const RunRecord &run);
// The newest finished restore check of this config that measured a verify or a restore; nullopt
// when there is none. Its verdict does not matter: a proof that found a difference still timed the disk.
std::optional<RestoreCheckThroughput> newestRestoreCheckThroughput(const HistoryStore &store, const std::string &configHash);

} // namespace pb
