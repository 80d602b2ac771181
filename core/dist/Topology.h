#pragma once
// What the ranks run on, recorded before a scaling step: each CUDA device's GPU with its PCI
// address and local CPUs (what the ranks bind to), the GPU interconnect matrix for people to read
// (`nvidia-smi topo -m` when the tool exists; nothing parses it), the host's NUMA nodes and their
// CPUs, the launcher's CPU binding, and the collective library. No torch in this header.
#include "dist/GpuLocality.h"

#include <QJsonObject>

#include <string>

namespace pb {

struct Topology {
    GpuLocalityReport gpus;          // CUDA devices only; empty for a CPU run
    std::string gpuMatrix;           // nvidia-smi topo -m, "" without the tool
    std::string gpuMatrixSource;     // "nvidia-smi topo -m", or why there is none
    QJsonObject numaNodes;           // node name -> its CPU list, from /sys
    std::string launcherCpuAffinity;
    int hostCpus = 0;
    std::string collective;          // "gloo" or "nccl"
    std::string collectiveVersion;
};

Topology captureTopology(const std::string &device);
QJsonObject toJson(const Topology &topology);

// The collective this build uses for `device` ("cpu" or "cuda..."): nccl where LibTorch was built
// with it and the device is CUDA, gloo otherwise. Defined beside the c10d code.
std::string collectiveFor(const std::string &device);

} // namespace pb
