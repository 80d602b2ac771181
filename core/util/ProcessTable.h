#pragma once
// Processes as /proc lists them: a tree by parent PID, its resident memory, a process's start time
// (with the PID it names one process) and whether its environment holds an entry.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pb {

// Every process's parent as /proc lists it at construction, read in one pass.
class ProcessSnapshot {
public:
    ProcessSnapshot();
    // The PIDs whose parent is `parent`.
    std::vector<int64_t> childrenOf(int64_t parent) const;
    // `root` and all its descendants, `root` first.
    std::vector<int64_t> tree(int64_t root) const;

private:
    std::unordered_multimap<int64_t, int64_t> m_children; // parent -> child
};

// `root` and all its descendants, from /proc (children by parent PID); `root` first; empty when
// `root` is gone.
std::vector<int64_t> processTree(int64_t root);
// Sum of VmRSS over `pids` (processes that vanished count 0); -1 when none could be read.
int64_t treeRssBytes(const std::vector<int64_t> &pids);
// Clock ticks since boot when `pid` started (field 22 of /proc/PID/stat); 0 when it is gone.
uint64_t processStartTime(int64_t pid);
// Whether `pid` is still the process that started at `startTime` and has not exited (a zombie
// waiting for its parent has).
bool processRunning(int64_t pid, uint64_t startTime);
// Whether /proc/PID/environ holds exactly `entry` ("NAME=VALUE"); false when it cannot be read.
bool environmentHas(int64_t pid, const std::string &entry);

} // namespace pb
