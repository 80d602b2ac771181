// AMD devices through the ROCm SMI library, loaded at run time like NVML.
#include "watch/BackendLibrary.h"
#include "watch/DeviceSampler.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

namespace pb::watch {
namespace {

// The few ROCm SMI declarations used, with the ABI of rocm_smi/rocm_smi.h (Debian's librocm-smi-dev
// 5.2.3 and ROCm/rocm_smi_lib up to 7.x). Enumerations are passed as the int they are.
using rsmi_status_t = int;
constexpr rsmi_status_t RSMI_STATUS_SUCCESS = 0;
constexpr rsmi_status_t RSMI_STATUS_INSUFFICIENT_SIZE = 11;
constexpr int RSMI_MEM_TYPE_VRAM = 0;                  // rsmi_memory_type_t
constexpr int RSMI_CLK_TYPE_SYS = 0;                   // rsmi_clk_type_t
constexpr uint32_t RSMI_TEMP_TYPE_EDGE = 0;            // rsmi_temperature_type_t
constexpr uint32_t RSMI_TEMP_TYPE_JUNCTION = 1;
constexpr int RSMI_TEMP_CURRENT = 0;                   // rsmi_temperature_metric_t

struct rsmi_version_t {
    uint32_t major, minor, patch;
    const char *build;
};
struct rsmi_process_info_t {
    uint32_t process_id, pasid;
    uint64_t vram_usage, sdma_usage;
    uint32_t cu_occupancy;
};
static_assert(sizeof(rsmi_process_info_t) == 32, "ROCm SMI ABI");

// rsmi_frequencies_t changed in ROCm 6.0 (rocm_smi_lib 3d40c4b): a leading `bool has_deep_sleep`
// and 33 entries instead of 32. Both layouts, read out of a buffer big enough for either.
struct FrequenciesBefore6 {
    uint32_t num_supported, current;
    uint64_t frequency[32];
};
struct FrequenciesFrom6 {
    bool has_deep_sleep;
    uint32_t num_supported, current;
    uint64_t frequency[33];
};

using InitFn = rsmi_status_t (*)(uint64_t);
using ShutDownFn = rsmi_status_t (*)();
using VersionFn = rsmi_status_t (*)(rsmi_version_t *);
using CountFn = rsmi_status_t (*)(uint32_t *);
using NameFn = rsmi_status_t (*)(uint32_t, char *, size_t);
using MemoryFn = rsmi_status_t (*)(uint32_t, int, uint64_t *);
using BusyFn = rsmi_status_t (*)(uint32_t, uint32_t *);
using PowerAverageFn = rsmi_status_t (*)(uint32_t, uint32_t, uint64_t *);
using PowerFn = rsmi_status_t (*)(uint32_t, uint64_t *, int *);
using ClockFn = rsmi_status_t (*)(uint32_t, int, void *);
using TemperatureFn = rsmi_status_t (*)(uint32_t, uint32_t, int, int64_t *);
using ProcessListFn = rsmi_status_t (*)(rsmi_process_info_t *, uint32_t *);
using ProcessByPidFn = rsmi_status_t (*)(uint32_t, rsmi_process_info_t *);
using ProcessGpusFn = rsmi_status_t (*)(uint32_t, uint32_t *, uint32_t *);
using ProcessByDeviceFn = rsmi_status_t (*)(uint32_t, uint32_t, rsmi_process_info_t *);

// The current clock in MHz from either layout; the one whose index fits its own count is the
// library's (the other reads a frequency in Hz or a zero count there), tried in the order the
// version suggests. -1 when neither fits.
double currentClockMHz(const unsigned char *bytes, bool preferFrom6)
{
    FrequenciesBefore6 before;
    FrequenciesFrom6 from6;
    std::memcpy(&before, bytes, sizeof before);
    std::memcpy(&from6, bytes, sizeof from6);
    const bool beforeFits = before.num_supported > 0 && before.num_supported <= 32 && before.current < before.num_supported;
    const bool from6Fits = from6.num_supported > 0 && from6.num_supported <= 33 && from6.current < from6.num_supported;
    if (from6Fits && (preferFrom6 || !beforeFits))
        return static_cast<double>(from6.frequency[from6.current]) / 1e6;
    if (beforeFits)
        return static_cast<double>(before.frequency[before.current]) / 1e6;
    return -1;
}

class RocmSmiBackend final : public DeviceBackend {
public:
    ~RocmSmiBackend() override
    {
        if (m_initialised && m_shutDown)
            m_shutDown();
    }

    bool open(const QString &library, std::string *why)
    {
        if (!m_library.open(library, why))
            return false;
        const auto init = m_library.symbol<InitFn>("rsmi_init");
        m_shutDown = m_library.symbol<ShutDownFn>("rsmi_shut_down");
        const auto count = m_library.symbol<CountFn>("rsmi_num_monitor_devices");
        if (!init || !m_shutDown || !count) {
            if (why)
                *why = library.toStdString() + ": not a ROCm SMI library (rsmi_init, rsmi_shut_down or rsmi_num_monitor_devices missing)";
            return false;
        }
        if (const rsmi_status_t status = init(0); status != RSMI_STATUS_SUCCESS) {
            if (why)
                *why = library.toStdString() + ": rsmi_init failed (status " + std::to_string(status) + ")";
            return false;
        }
        m_initialised = true;
        uint32_t devices = 0;
        if (count(&devices) != RSMI_STATUS_SUCCESS || devices == 0) {
            if (why)
                *why = library.toStdString() + ": ROCm SMI sees no device";
            return false;
        }
        if (const auto version = m_library.symbol<VersionFn>("rsmi_version_get")) {
            rsmi_version_t v {};
            // rocm_smi_lib numbers itself 6.x and 7.x from ROCm 6.0 on (Debian's 5.2 build says 1.0).
            m_preferFrequenciesFrom6 = version(&v) == RSMI_STATUS_SUCCESS && v.major >= 6;
        }
        const auto name = m_library.symbol<NameFn>("rsmi_dev_name_get");
        for (uint32_t i = 0; i < devices; ++i) {
            char text[256] = {};
            m_names.push_back(name && name(i, text, sizeof text) == RSMI_STATUS_SUCCESS && text[0] ? std::string(text) : "AMD device " + std::to_string(i));
        }
        m_memoryUsed = m_library.symbol<MemoryFn>("rsmi_dev_memory_usage_get");
        m_memoryTotal = m_library.symbol<MemoryFn>("rsmi_dev_memory_total_get");
        m_busy = m_library.symbol<BusyFn>("rsmi_dev_busy_percent_get");
        m_power = m_library.symbol<PowerFn>("rsmi_dev_power_get");
        m_powerAverage = m_library.symbol<PowerAverageFn>("rsmi_dev_power_ave_get");
        m_clock = m_library.symbol<ClockFn>("rsmi_dev_gpu_clk_freq_get");
        m_temperature = m_library.symbol<TemperatureFn>("rsmi_dev_temp_metric_get");
        m_processList = m_library.symbol<ProcessListFn>("rsmi_compute_process_info_get");
        m_processByPid = m_library.symbol<ProcessByPidFn>("rsmi_compute_process_info_by_pid_get");
        m_processGpus = m_library.symbol<ProcessGpusFn>("rsmi_compute_process_gpus_get");
        m_processByDevice = m_library.symbol<ProcessByDeviceFn>("rsmi_compute_process_info_by_device_get");
        return true;
    }

    std::string source() const override { return "rocm-smi"; }
    int deviceCount() const override { return static_cast<int>(m_names.size()); }

    std::vector<DeviceReading> read(const std::vector<int64_t> &pids) override
    {
        const std::vector<int64_t> perDevice = treeBytesPerDevice(pids);
        std::vector<DeviceReading> out;
        out.reserve(m_names.size());
        for (uint32_t i = 0; i < m_names.size(); ++i) {
            DeviceReading r;
            r.index = static_cast<int>(i);
            r.name = m_names[i];
            r.source = "rocm-smi";
            if (uint64_t bytes = 0; m_memoryUsed && m_memoryUsed(i, RSMI_MEM_TYPE_VRAM, &bytes) == RSMI_STATUS_SUCCESS)
                r.memoryUsedBytes = static_cast<int64_t>(bytes);
            if (uint64_t bytes = 0; m_memoryTotal && m_memoryTotal(i, RSMI_MEM_TYPE_VRAM, &bytes) == RSMI_STATUS_SUCCESS)
                r.memoryTotalBytes = static_cast<int64_t>(bytes);
            if (uint32_t percent = 0; m_busy && m_busy(i, &percent) == RSMI_STATUS_SUCCESS)
                r.utilisationPercent = percent;
            r.powerW = powerW(i);
            if (m_clock) {
                alignas(8) unsigned char buffer[512] = {};
                if (m_clock(i, RSMI_CLK_TYPE_SYS, buffer) == RSMI_STATUS_SUCCESS)
                    r.smClockMHz = currentClockMHz(buffer, m_preferFrequenciesFrom6);
            }
            if (m_temperature) {
                // MI300 parts have no edge sensor; their junction one is what rocm-smi shows.
                int64_t millidegrees = 0;
                if (m_temperature(i, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &millidegrees) == RSMI_STATUS_SUCCESS
                    || m_temperature(i, RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_CURRENT, &millidegrees) == RSMI_STATUS_SUCCESS)
                    r.temperatureC = static_cast<double>(millidegrees) / 1000.0;
            }
            r.processTreeBytes = perDevice[i];
            out.push_back(std::move(r));
        }
        return out;
    }

private:
    // rsmi_dev_power_get where the library has it (it answers on parts with only a current-power
    // sensor, where the average one fails), else the average; both in microwatts.
    double powerW(uint32_t device) const
    {
        uint64_t microwatts = 0;
        int type = 0;
        if (m_power && m_power(device, &microwatts, &type) == RSMI_STATUS_SUCCESS)
            return static_cast<double>(microwatts) / 1e6;
        if (m_powerAverage && m_powerAverage(device, 0, &microwatts) == RSMI_STATUS_SUCCESS)
            return static_cast<double>(microwatts) / 1e6;
        return -1;
    }

    // VRAM of the tree's processes per device: the library's process list says which of them use
    // a GPU, then per device where the library can say so (ROCm 6), else each process's total
    // split evenly over the devices it uses (exact for one device, and the sum over devices stays
    // right). -1 where it cannot tell, 0 where none of them is.
    std::vector<int64_t> treeBytesPerDevice(const std::vector<int64_t> &pids)
    {
        const size_t devices = m_names.size();
        std::vector<int64_t> bytes(devices, -1);
        if (!m_processList || (!m_processByDevice && !m_processByPid))
            return bytes;
        uint32_t count = 0;
        if (m_processList(nullptr, &count) != RSMI_STATUS_SUCCESS)
            return bytes;
        rsmi_status_t status = RSMI_STATUS_INSUFFICIENT_SIZE;
        for (int attempt = 0; attempt < 4 && status == RSMI_STATUS_INSUFFICIENT_SIZE; ++attempt) {
            m_processes.resize(std::max<size_t>(count + 8, m_processes.size()));
            count = static_cast<uint32_t>(m_processes.size());
            status = m_processList(m_processes.data(), &count);
            if (status == RSMI_STATUS_INSUFFICIENT_SIZE)
                count = static_cast<uint32_t>(m_processes.size() * 2);
        }
        if (status != RSMI_STATUS_SUCCESS)
            return bytes;
        std::fill(bytes.begin(), bytes.end(), 0);
        std::vector<int64_t> sorted = pids;
        std::sort(sorted.begin(), sorted.end());
        std::vector<bool> unknown(devices, false);
        for (uint32_t k = 0; k < count && k < m_processes.size(); ++k) {
            const uint32_t pid = m_processes[k].process_id;
            if (!std::binary_search(sorted.begin(), sorted.end(), static_cast<int64_t>(pid)))
                continue;
            std::vector<uint32_t> gpus(devices + 1);
            uint32_t gpuCount = static_cast<uint32_t>(gpus.size());
            const bool gpusKnown = m_processGpus && m_processGpus(pid, gpus.data(), &gpuCount) == RSMI_STATUS_SUCCESS;
            if (gpusKnown)
                gpus.resize(std::min<size_t>(gpuCount, gpus.size()));
            else if (devices == 1)
                gpus.assign(1, 0);
            else
                gpus.clear();
            if (m_processByDevice && gpusKnown) {
                for (uint32_t d : gpus) {
                    rsmi_process_info_t info {};
                    if (d >= devices)
                        continue;
                    if (m_processByDevice(pid, d, &info) == RSMI_STATUS_SUCCESS)
                        bytes[d] += static_cast<int64_t>(info.vram_usage);
                    else
                        unknown[d] = true;
                }
                continue;
            }
            rsmi_process_info_t info {};
            if (!m_processByPid || m_processByPid(pid, &info) != RSMI_STATUS_SUCCESS || gpus.empty()) {
                std::fill(unknown.begin(), unknown.end(), true);
                continue;
            }
            for (uint32_t d : gpus)
                if (d < devices)
                    bytes[d] += static_cast<int64_t>(info.vram_usage / gpus.size());
        }
        for (size_t d = 0; d < devices; ++d)
            if (unknown[d] && bytes[d] == 0)
                bytes[d] = -1;
        return bytes;
    }

    BackendLibrary m_library;          // first: closed after the destructor's rsmi_shut_down
    bool m_initialised = false;
    bool m_preferFrequenciesFrom6 = false;
    ShutDownFn m_shutDown = nullptr;
    MemoryFn m_memoryUsed = nullptr, m_memoryTotal = nullptr;
    BusyFn m_busy = nullptr;
    PowerFn m_power = nullptr;
    PowerAverageFn m_powerAverage = nullptr;
    ClockFn m_clock = nullptr;
    TemperatureFn m_temperature = nullptr;
    ProcessListFn m_processList = nullptr;
    ProcessByPidFn m_processByPid = nullptr;
    ProcessGpusFn m_processGpus = nullptr;
    ProcessByDeviceFn m_processByDevice = nullptr;
    std::vector<rsmi_process_info_t> m_processes;
    std::vector<std::string> m_names;
};

// Where a ROCm install puts the library: the development link, the runtime names of ROCm 5 to 7
// (and Debian's .so.1), and /opt/rocm, which not every install adds to the loader's path.
const char *const kRocmSmiFallbacks[] = {
    "librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5", "librocm_smi64.so.1",
    "/opt/rocm/lib/librocm_smi64.so",
};

} // namespace

std::unique_ptr<DeviceBackend> openRocmSmi(const QString &library, std::string *why)
{
    auto backend = std::make_unique<RocmSmiBackend>();
    std::string reason;
    if (backend->open(library, &reason))
        return backend;
    // Only the default name widens the search, and only while nothing loads: a library that
    // loaded and then failed (no device, no driver) has answered for this host.
    if (library == QLatin1String("librocm_smi64.so") && reason.find("cannot open shared object") != std::string::npos) {
        for (const char *name : kRocmSmiFallbacks) {
            backend = std::make_unique<RocmSmiBackend>();
            std::string another;
            if (backend->open(QString::fromLatin1(name), &another))
                return backend;
            if (another.find("cannot open shared object") == std::string::npos) {
                reason = another;
                break;
            }
        }
    }
    if (why)
        *why = reason;
    return nullptr;
}

} // namespace pb::watch
