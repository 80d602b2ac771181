// NVIDIA devices through NVML, the library nvidia-smi uses, loaded at run time as nvtop does.
#include "watch/BackendLibrary.h"
#include "watch/DeviceSampler.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace pb::watch {
namespace {

// The few NVML declarations used, with the ABI of nvml.h (NVML API 10-13; the layouts match
// nvtop's src/extract_gpuinfo_nvidia.c and the NVML reference, docs.nvidia.com/deploy/nvml-api).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st *;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr int NVML_CLOCK_SM = 1;                       // nvmlClockType_t
constexpr int NVML_TEMPERATURE_GPU = 0;                // nvmlTemperatureSensors_t
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;  // a process's memory it cannot tell

struct nvmlMemory_t {
    unsigned long long total, free, used;
};
struct nvmlUtilization_t {
    unsigned int gpu, memory;
};
// What plain nvmlDeviceGetComputeRunningProcesses fills.
struct nvmlProcessInfo_v1_t {
    unsigned int pid;
    unsigned long long usedGpuMemory;
};
// What _v2 and _v3 fill (nvml.h's nvmlProcessInfo_t).
struct nvmlProcessInfo_v2_t {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
static_assert(sizeof(nvmlMemory_t) == 24 && sizeof(nvmlUtilization_t) == 8, "NVML ABI");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16 && sizeof(nvmlProcessInfo_v2_t) == 24, "NVML ABI");

using InitFn = nvmlReturn_t (*)();
using ErrorStringFn = const char *(*)(nvmlReturn_t);
using CountFn = nvmlReturn_t (*)(unsigned int *);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t *);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned int);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *);
using UtilisationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t *);
using UnsignedFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int *);
using ClockFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int *);
using TemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int *);
using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int *, void *);

class NvmlBackend final : public DeviceBackend {
public:
    ~NvmlBackend() override
    {
        if (m_initialised && m_shutdown)
            m_shutdown();
    }

    bool open(const QString &library, std::string *why)
    {
        if (!m_library.open(library, why))
            return false;
        const auto init = m_library.symbol<InitFn>("nvmlInit_v2");
        m_shutdown = m_library.symbol<InitFn>("nvmlShutdown");
        const auto count = m_library.symbol<CountFn>("nvmlDeviceGetCount_v2");
        const auto handle = m_library.symbol<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
        if (!init || !m_shutdown || !count || !handle) {
            if (why)
                *why = library.toStdString() + ": not an NVML library (nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2 missing)";
            return false;
        }
        const auto errorString = m_library.symbol<ErrorStringFn>("nvmlErrorString");
        auto fail = [&](const char *call, nvmlReturn_t status) {
            if (why)
                *why = library.toStdString() + ": " + call + " failed (" + (errorString ? errorString(status) : "NVML error " + std::to_string(status)) + ")";
            return false;
        };
        if (const nvmlReturn_t status = init(); status != NVML_SUCCESS)
            return fail("nvmlInit_v2", status);
        m_initialised = true;
        unsigned int devices = 0;
        if (const nvmlReturn_t status = count(&devices); status != NVML_SUCCESS)
            return fail("nvmlDeviceGetCount_v2", status);
        if (devices == 0) {
            if (why)
                *why = library.toStdString() + ": NVML sees no device";
            return false;
        }
        const auto name = m_library.symbol<NameFn>("nvmlDeviceGetName");
        for (unsigned int i = 0; i < devices; ++i) {
            Device d;
            if (const nvmlReturn_t status = handle(i, &d.handle); status != NVML_SUCCESS)
                return fail("nvmlDeviceGetHandleByIndex_v2", status);
            char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
            d.name = name && name(d.handle, text, sizeof text) == NVML_SUCCESS ? std::string(text) : "NVIDIA device " + std::to_string(i);
            m_devices.push_back(d);
        }
        m_memory = m_library.symbol<MemoryFn>("nvmlDeviceGetMemoryInfo");
        m_utilisation = m_library.symbol<UtilisationFn>("nvmlDeviceGetUtilizationRates");
        m_power = m_library.symbol<UnsignedFn>("nvmlDeviceGetPowerUsage");
        m_clock = m_library.symbol<ClockFn>("nvmlDeviceGetClockInfo");
        m_temperature = m_library.symbol<TemperatureFn>("nvmlDeviceGetTemperature");
        // The newest process call the driver has; _v3 and _v2 fill the same layout, the plain one
        // the shorter one (nvtop's order).
        m_processes = m_library.symbol<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v3");
        if (!m_processes)
            m_processes = m_library.symbol<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v2");
        if (m_processes) {
            m_processInfoBytes = sizeof(nvmlProcessInfo_v2_t);
        } else {
            m_processes = m_library.symbol<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses");
            m_processInfoBytes = sizeof(nvmlProcessInfo_v1_t);
        }
        return true;
    }

    std::string source() const override { return "nvml"; }
    int deviceCount() const override { return static_cast<int>(m_devices.size()); }

    std::vector<DeviceReading> read(const std::vector<int64_t> &pids) override
    {
        std::vector<int64_t> sorted = pids;
        std::sort(sorted.begin(), sorted.end());
        std::vector<DeviceReading> out;
        out.reserve(m_devices.size());
        for (size_t i = 0; i < m_devices.size(); ++i) {
            const nvmlDevice_t device = m_devices[i].handle;
            DeviceReading r;
            r.index = static_cast<int>(i);
            r.name = m_devices[i].name;
            r.source = "nvml";
            if (nvmlMemory_t memory {}; m_memory && m_memory(device, &memory) == NVML_SUCCESS) {
                r.memoryUsedBytes = static_cast<int64_t>(memory.used);
                r.memoryTotalBytes = static_cast<int64_t>(memory.total);
            }
            if (nvmlUtilization_t rates {}; m_utilisation && m_utilisation(device, &rates) == NVML_SUCCESS)
                r.utilisationPercent = rates.gpu;
            if (unsigned int milliwatts = 0; m_power && m_power(device, &milliwatts) == NVML_SUCCESS)
                r.powerW = milliwatts / 1000.0;
            if (unsigned int mhz = 0; m_clock && m_clock(device, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS)
                r.smClockMHz = mhz;
            if (unsigned int celsius = 0; m_temperature && m_temperature(device, NVML_TEMPERATURE_GPU, &celsius) == NVML_SUCCESS)
                r.temperatureC = celsius;
            r.processTreeBytes = treeBytesOn(device, sorted);
            out.push_back(std::move(r));
        }
        return out;
    }

private:
    struct Device {
        nvmlDevice_t handle = nullptr;
        std::string name;
    };

    // Memory of the processes in `sortedPids` on `device`: 0 when the driver lists none of them,
    // -1 when it cannot list or cannot tell their memory (no permission, some vGPU setups).
    int64_t treeBytesOn(nvmlDevice_t device, const std::vector<int64_t> &sortedPids)
    {
        if (!m_processes)
            return -1;
        unsigned int count = 0;
        nvmlReturn_t status = NVML_ERROR_INSUFFICIENT_SIZE;
        // The list can grow between the size answer and the retry, so a few rounds.
        for (int attempt = 0; attempt < 4 && status == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
            count = static_cast<unsigned int>(m_processBuffer.size() / m_processInfoBytes);
            status = m_processes(device, &count, m_processBuffer.empty() ? nullptr : m_processBuffer.data());
            if (status == NVML_ERROR_INSUFFICIENT_SIZE)
                m_processBuffer.resize((std::max<size_t>(count, 16) + 16) * m_processInfoBytes);
        }
        if (status != NVML_SUCCESS)
            return -1;
        int64_t bytes = 0;
        bool matched = false, known = false;
        for (unsigned int k = 0; k < count; ++k) {
            // Both layouts begin {pid, usedGpuMemory}; copied out because the buffer is bytes.
            nvmlProcessInfo_v1_t info;
            std::memcpy(&info, m_processBuffer.data() + k * m_processInfoBytes, sizeof info);
            if (!std::binary_search(sortedPids.begin(), sortedPids.end(), static_cast<int64_t>(info.pid)))
                continue;
            matched = true;
            if (info.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE)
                continue;
            known = true;
            bytes += static_cast<int64_t>(info.usedGpuMemory);
        }
        return matched && !known ? -1 : bytes;
    }

    BackendLibrary m_library;          // first: closed after the destructor's nvmlShutdown
    bool m_initialised = false;
    InitFn m_shutdown = nullptr;
    MemoryFn m_memory = nullptr;
    UtilisationFn m_utilisation = nullptr;
    UnsignedFn m_power = nullptr;
    ClockFn m_clock = nullptr;
    TemperatureFn m_temperature = nullptr;
    ProcessesFn m_processes = nullptr;
    size_t m_processInfoBytes = sizeof(nvmlProcessInfo_v2_t);
    std::vector<unsigned char> m_processBuffer = std::vector<unsigned char>(64 * sizeof(nvmlProcessInfo_v2_t));
    std::vector<Device> m_devices;
};

} // namespace

std::unique_ptr<DeviceBackend> openNvml(const QString &library, std::string *why)
{
    auto backend = std::make_unique<NvmlBackend>();
    if (!backend->open(library, why))
        return nullptr;
    return backend;
}

} // namespace pb::watch
