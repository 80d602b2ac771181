#pragma once
// What a result ran on: recorded with every pilot so a figure can be traced to its stack.
#include "config/RunConfig.h"

#include <QJsonObject>
#include <string>

namespace pb {

struct Environment {
    std::string pilotbenchVersion;
    std::string gitRevision;
    std::string torchVersion;
    std::string cudaRuntime;     // "" when the build has no CUDA
    std::string hipRuntime;
    std::string cudnnVersion;
    std::string ncclVersion;
    std::string driverVersion;
    std::string device;          // "cpu", "cuda:0"
    std::string deviceName;
    int64_t deviceMemoryBytes = 0;
    std::string computeCapability;
    int deviceCount = 0;
    std::string cpu;
    int cpuThreads = 0;
    std::string os;
};

Environment captureEnvironment(const std::string &device);
QJsonObject toJson(const Environment &env);
// Multi-line text for --version: version, git revision, LibTorch version, CUDA availability.
std::string buildInfoText();
bool cudaAvailable();
int cudaDeviceCount();
// What a pilot on `device` can use: a CUDA device's total memory, or for "cpu" the host memory the
// kernel reports available (MemAvailable, other programs' share left out). 0 where unknown.
int64_t deviceMemoryForPilot(const std::string &device);
// Throws InvalidInputError naming the field where `config` cannot run in `env`: train.precision
// (fp8 needs a CUDA device of compute capability 8.9 or later and LibTorch 2.5 or later),
// train.cuda_graph (a CUDA device, and fused AdamW taking its rate as a device tensor). Asked
// before a run is recorded.
void requireRunsHere(const RunConfig &config, const Environment &env);

} // namespace pb
