#pragma once
// Device readings for a watched command, in their own thread at >= 10 Hz: NVIDIA through NVML and
// AMD through ROCm SMI, both loaded at run time with dlopen (no build dependency; the library is
// simply absent on a host without that vendor's driver), else the process tree's RSS from /proc.
// Every figure says which source it came from.
#include "util/ProcessTable.h"

#include <QString>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pb::watch {

// One accelerator at one instant. -1 (bytes, MHz) or a negative value: the source cannot tell.
struct DeviceReading {
    int index = 0;                       // the library's device index
    std::string name;                    // "NVIDIA H200"
    std::string source;                  // "nvml", "rocm-smi" or "proc"
    int64_t memoryUsedBytes = -1;        // whole device
    int64_t memoryTotalBytes = -1;
    int64_t processTreeBytes = -1;       // used by the watched command's processes (by PID); 0: none there
    double utilisationPercent = -1;
    double powerW = -1;
    double smClockMHz = -1;
    double temperatureC = -1;
};

struct SamplerReading {
    double tMs = 0;                      // since the sampler started
    std::vector<DeviceReading> devices;  // empty when no accelerator library answered
    int64_t treeRssBytes = -1;           // resident memory of the process tree (/proc)
};

// A vendor library behind one interface, so the sampler and its tests do not care which.
class DeviceBackend {
public:
    virtual ~DeviceBackend() = default;
    virtual std::string source() const = 0;          // "nvml" / "rocm-smi"
    virtual int deviceCount() const = 0;
    // One reading per device; `pids` are the watched process tree (for per-process memory).
    virtual std::vector<DeviceReading> read(const std::vector<int64_t> &pids) = 0;
};

// nullptr when the library cannot be loaded or initialised (`why` says which and why). The
// library name is a parameter so tests can load a fake with the same symbols.
std::unique_ptr<DeviceBackend> openNvml(const QString &library = QStringLiteral("libnvidia-ml.so.1"), std::string *why = nullptr);
std::unique_ptr<DeviceBackend> openRocmSmi(const QString &library = QStringLiteral("librocm_smi64.so"), std::string *why = nullptr);
// NVML, else ROCm SMI, else nullptr (`why` lists what was tried).
std::unique_ptr<DeviceBackend> openAnyDeviceBackend(std::string *why = nullptr);

using pb::processTree;
using pb::treeRssBytes;

// Samples `backend` (may be null: /proc only) for the tree under `rootPid` every `intervalMs` in
// its own thread, the first at once; readings queue up until drained (the oldest are dropped past
// a bound, so an undrained sampler cannot grow without limit); the tree itself is looked up again
// every 200 ms, not every reading (see DeviceSampler.cpp). Peaks are kept over the whole run.
// A device figure of -1 is left out of the peaks; the per-process sum counts the devices that know.
class DeviceSampler final {
public:
    DeviceSampler(std::unique_ptr<DeviceBackend> backend, int64_t rootPid, int intervalMs = 50);
    ~DeviceSampler();                                // stops
    DeviceSampler(const DeviceSampler &) = delete;
    DeviceSampler &operator=(const DeviceSampler &) = delete;

    void start();
    void stop();                                     // joins; idempotent
    std::vector<SamplerReading> drain();             // readings since the last drain, oldest first
    std::string source() const;                      // "nvml", "rocm-smi" or "proc"
    // Peaks over the run: per device used memory and tree memory; -1 unknown.
    int64_t peakDeviceUsedBytes() const;             // max over devices of memoryUsedBytes
    int64_t peakProcessTreeDeviceBytes() const;      // max over time of the sum over devices of processTreeBytes
    int64_t peakTreeRssBytes() const;
    int64_t samplesTaken() const;

private:
    void loop();
    std::unique_ptr<DeviceBackend> m_backend;
    int64_t m_root;
    int m_intervalMs;
    std::string m_source;
    std::chrono::steady_clock::time_point m_started;
    std::thread m_thread;
    std::atomic<bool> m_stop {false};
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;                  // stop() ends the wait between samples at once
    std::vector<SamplerReading> m_pending;
    int64_t m_peakDevice = -1, m_peakTreeDevice = -1, m_peakRss = -1, m_samples = 0;
};

} // namespace pb::watch
