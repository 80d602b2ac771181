#pragma once
// Memory as the pilot sees it. CUDA: the caching allocator's allocated/reserved/peak and
// cudaMemGetInfo (total device use, which includes what cuBLAS, NCCL and other libraries took).
// CPU: a tracking allocator registered through c10::SetCPUAllocator (peak tensor bytes) and the
// process RSS. A budget on the CPU allocator makes the out-of-memory path testable without a GPU.
#include <cstdint>
#include <string>

namespace pb {

struct MemoryReading {
    int64_t allocatedBytes = 0;
    int64_t reservedBytes = 0;
    int64_t peakAllocatedBytes = 0;   // since the last resetPeak()
    int64_t peakReservedBytes = 0;
    int64_t deviceUsedBytes = 0;      // CUDA: total - free on the device; CPU: process RSS
    int64_t deviceTotalBytes = 0;
};

class MemoryProbe {
public:
    explicit MemoryProbe(std::string device); // "cpu" or "cuda:N"
    MemoryReading read() const;
    void resetPeak();
    // Releases cached blocks (CUDA) so the next pilot in the process starts clean.
    void releaseCache();
    bool isCuda() const { return m_cudaIndex >= 0; }

private:
    std::string m_device;
    int m_cudaIndex = -1;
};

// CPU tensor allocator budget in bytes; 0 removes the limit. Allocations beyond it throw
// c10::OutOfMemoryError, exactly like the CUDA caching allocator does.
void setCpuMemoryLimit(int64_t bytes);
int64_t cpuMemoryLimit();
// A CPU pilot without a limit of its own keeps to this share of the memory the host had available
// when it started (workflow/PilotMemoryCheck.h says why); its messages name the share.
constexpr int kCpuPilotHostMemoryPercent = 75;
// Installs the tracking allocator (idempotent); called by MemoryProbe for "cpu".
void installCpuTrackingAllocator();
int64_t processRssBytes();

} // namespace pb
