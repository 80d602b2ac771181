#pragma once
// CPU lists ("0-3,8", as Linux writes them in sysfs and taskset reads them) and binding a process
// to one: each rank runs on its own cores (on CUDA hosts the cores local to its GPU, found by
// GpuLocality.h), so ranks do not steal each other's cores and a measurement is repeatable. No
// torch in this header.
#include <string>
#include <vector>

namespace pb {

// Throws InvalidInputError(where) for text that is not a list of CPUs or ranges.
std::vector<int> parseCpuList(const std::string &text, const std::string &where);
std::string formatCpuList(std::vector<int> cpus);

// The CPUs sched_getaffinity allows the calling thread (and so its future threads).
std::vector<int> allowedCpus();
// Restricts the calling thread and the threads it starts later. Throws PilotBenchError naming
// the list when the kernel refuses it.
void bindToCpus(const std::vector<int> &cpus);

// `cpus` cut into `parts` consecutive slices of `perPart` CPUs; empty when there are too few.
std::vector<std::vector<int>> splitCpus(const std::vector<int> &cpus, int parts, int perPart);

} // namespace pb
