// A CPU allocator that counts live tensor bytes. The size lives in a 64-byte header in front of
// the data, not in a context object, because Allocator::raw_allocate requires data == context.
#include "engine/MemoryProbe.h"
#include "engine/TorchCompat.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pb {
namespace {

constexpr size_t kHeader = 64;

std::atomic<int64_t> g_current {0};
std::atomic<int64_t> g_peak {0};
std::atomic<int64_t> g_limit {0};

void trackedFree(void *data)
{
    if (!data)
        return;
    char *base = static_cast<char *>(data) - kHeader;
    size_t size = 0;
    std::memcpy(&size, base, sizeof size);
    const int64_t now = g_current.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed) - static_cast<int64_t>(size);
    // As the CUDA caching allocator does: a peak recorder (engine/PeakRecorder) listens here.
    c10::reportMemoryUsageToProfiler(data, -static_cast<int64_t>(size), now, now, c10::Device(c10::DeviceType::CPU));
    std::free(base);
}

c10::DataPtr trackedAllocate(size_t n)
{
    const int64_t limit = g_limit.load(std::memory_order_relaxed);
    const int64_t now = g_current.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n);
    if (limit > 0 && now > limit) {
        g_current.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n, " bytes with ",
                         now - static_cast<int64_t>(n), " bytes in use under a limit of ", limit,
                         " bytes (the pilot's CPU memory limit; unless one is set, ", kCpuPilotHostMemoryPercent,
                         "% of the memory the host had available when the pilot started)");
    }
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    void *base = nullptr;
    if (posix_memalign(&base, kHeader, n + kHeader) != 0 || !base) {
        g_current.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: the system refused ", n, " bytes");
    }
    std::memcpy(base, &n, sizeof n);
    void *data = static_cast<char *>(base) + kHeader;
    c10::reportMemoryUsageToProfiler(data, static_cast<int64_t>(n), now, now, c10::Device(c10::DeviceType::CPU));
    return {data, data, &trackedFree, c10::Device(c10::DeviceType::CPU)};
}

struct TrackingCpuAllocator final : c10::Allocator {
    // LibTorch 2.3 made allocate() non-const; defining both overloads (without `override`) lets
    // whichever one the installed c10::Allocator declares be the override.
    c10::DataPtr allocate(size_t n) const { return trackedAllocate(n); }
    c10::DataPtr allocate(size_t n) { return trackedAllocate(n); }
    c10::DeleterFnPtr raw_deleter() const override { return &trackedFree; }
    // LibTorch 2.3+ made copy_data pure virtual; on 1.13 this is a plain member.
    void copy_data(void *dest, const void *src, std::size_t count) const { std::memcpy(dest, src, count); }
};

} // namespace

void installCpuTrackingAllocator()
{
    static std::once_flag once;
    std::call_once(once, [] {
        static TrackingCpuAllocator allocator;
        c10::SetCPUAllocator(&allocator, /*priority=*/100);
    });
}

void setCpuMemoryLimit(int64_t bytes) { g_limit.store(bytes > 0 ? bytes : 0); }
int64_t cpuMemoryLimit() { return g_limit.load(); }

int64_t trackedCpuCurrentBytes() { return g_current.load(); }
int64_t trackedCpuPeakBytes() { return g_peak.load(); }
void resetTrackedCpuPeak() { g_peak.store(g_current.load()); }

} // namespace pb
