#include "watch/DeviceSampler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pb::watch {
namespace {

// About an hour and a half at 20 Hz: more than any caller leaves undrained unless it stopped
// draining altogether, and then the newest readings are the ones worth keeping.
constexpr size_t kMaxPending = 100000;

// The tree is found by reading every process's /proc/PID/stat (about 7 us each): at 20 Hz on a
// host with a thousand processes that alone would take a seventh of a core. Its membership changes
// when workers start, and a new process needs longer than this to allocate device memory.
constexpr auto kTreeRefresh = std::chrono::milliseconds(200);

} // namespace

std::unique_ptr<DeviceBackend> openAnyDeviceBackend(std::string *why)
{
    std::string nvmlWhy, rocmWhy;
    if (auto nvml = openNvml(QStringLiteral("libnvidia-ml.so.1"), &nvmlWhy))
        return nvml;
    if (auto rocm = openRocmSmi(QStringLiteral("librocm_smi64.so"), &rocmWhy))
        return rocm;
    if (why)
        *why = "NVML: " + nvmlWhy + "; ROCm SMI: " + rocmWhy;
    return nullptr;
}

DeviceSampler::DeviceSampler(std::unique_ptr<DeviceBackend> backend, int64_t rootPid, int intervalMs)
    : m_backend(std::move(backend))
    , m_root(rootPid)
    , m_intervalMs(std::max(1, intervalMs))
    , m_source(m_backend ? m_backend->source() : "proc")
{
}

DeviceSampler::~DeviceSampler() { stop(); }

void DeviceSampler::start()
{
    if (m_thread.joinable())
        return;
    m_stop = false;
    m_started = std::chrono::steady_clock::now();
    m_thread = std::thread([this] { loop(); });
}

void DeviceSampler::stop()
{
    {
        // Under the lock, so the flag cannot be set between the loop's check and its wait.
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
}

std::vector<SamplerReading> DeviceSampler::drain()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    std::vector<SamplerReading> out;
    out.swap(m_pending);
    return out;
}

std::string DeviceSampler::source() const { return m_source; }

int64_t DeviceSampler::peakDeviceUsedBytes() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_peakDevice;
}

int64_t DeviceSampler::peakProcessTreeDeviceBytes() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_peakTreeDevice;
}

int64_t DeviceSampler::peakTreeRssBytes() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_peakRss;
}

int64_t DeviceSampler::samplesTaken() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_samples;
}

void DeviceSampler::loop()
{
    using Clock = std::chrono::steady_clock;
    const auto interval = std::chrono::milliseconds(m_intervalMs);
    auto due = Clock::now();
    Clock::time_point treeFound;
    std::vector<int64_t> tree;
    bool warned = false;
    while (!m_stop) {
        SamplerReading reading;
        int64_t used = -1, treeDevice = -1;
        bool ok = true;
        try {
            if (tree.empty() || Clock::now() - treeFound >= kTreeRefresh) {
                tree = processTree(m_root);
                treeFound = Clock::now();
            }
            if (m_backend)
                reading.devices = m_backend->read(tree);
            reading.treeRssBytes = tree.empty() ? -1 : treeRssBytes(tree);
            for (const DeviceReading &d : reading.devices) {
                used = std::max(used, d.memoryUsedBytes);
                if (d.processTreeBytes >= 0)
                    treeDevice = std::max<int64_t>(treeDevice, 0) + d.processTreeBytes;
            }
        } catch (const std::exception &e) {
            // A reading lost is a gap in the plot; an exception out of this thread ends the program.
            if (!warned)
                spdlog::warn("device sampler: a reading failed: {}", e.what());
            warned = true;
            ok = false;
        }
        const auto now = Clock::now();
        reading.tMs = std::chrono::duration<double, std::milli>(now - m_started).count();
        std::unique_lock<std::mutex> lock(m_mutex);
        if (ok) {
            m_peakDevice = std::max(m_peakDevice, used);
            m_peakTreeDevice = std::max(m_peakTreeDevice, treeDevice);
            m_peakRss = std::max(m_peakRss, reading.treeRssBytes);
            ++m_samples;
            if (m_pending.size() >= kMaxPending)
                m_pending.erase(m_pending.begin(), m_pending.begin() + static_cast<std::ptrdiff_t>(kMaxPending / 10));
            m_pending.push_back(std::move(reading));
        }
        // On a fixed grid, so a slow reading does not stretch every later interval; after a stall
        // longer than one interval the grid restarts rather than firing a burst to catch up.
        due += interval;
        if (due < now)
            due = now + interval;
        m_wake.wait_until(lock, due, [this] { return m_stop.load(); });
    }
}

} // namespace pb::watch
