#include "engine/MemoryProbe.h"

#include "engine/TorchCompat.h"

#include <QFile>

#ifdef PB_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace pb {

int64_t trackedCpuCurrentBytes();
int64_t trackedCpuPeakBytes();
void resetTrackedCpuPeak();

int64_t processRssBytes()
{
    QFile f(QStringLiteral("/proc/self/statm"));
    if (!f.open(QIODevice::ReadOnly))
        return 0;
    const QList<QByteArray> fields = f.readAll().split(' ');
    return fields.size() > 1 ? fields[1].toLongLong() * 4096 : 0;
}

MemoryProbe::MemoryProbe(std::string device) : m_device(std::move(device))
{
    if (m_device.rfind("cuda", 0) == 0) {
        m_cudaIndex = m_device.size() > 5 ? std::stoi(m_device.substr(5)) : 0;
        // The caching allocator sets up its per-device state on first use; its statistics calls
        // refuse a device it has not seen yet.
        if (m_cudaIndex < static_cast<int>(torch::cuda::device_count()))
            (void)torch::empty({1}, torch::TensorOptions().device(torch::kCUDA, static_cast<c10::DeviceIndex>(m_cudaIndex)));
    } else
        installCpuTrackingAllocator();
}

MemoryReading MemoryProbe::read() const
{
    MemoryReading r;
#ifdef PB_WITH_CUDA
    if (m_cudaIndex >= 0) {
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(m_cudaIndex));
        const size_t aggregate = 0; // StatType::AGGREGATE, whose namespace moved between versions
        r.allocatedBytes = stats.allocated_bytes[aggregate].current;
        r.peakAllocatedBytes = stats.allocated_bytes[aggregate].peak;
        r.reservedBytes = stats.reserved_bytes[aggregate].current;
        r.peakReservedBytes = stats.reserved_bytes[aggregate].peak;
        size_t freeBytes = 0, totalBytes = 0;
        int previous = 0;
        cudaGetDevice(&previous);
        cudaSetDevice(m_cudaIndex);
        if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess) {
            r.deviceUsedBytes = static_cast<int64_t>(totalBytes - freeBytes);
            r.deviceTotalBytes = static_cast<int64_t>(totalBytes);
        }
        cudaSetDevice(previous);
        return r;
    }
#endif
    r.allocatedBytes = trackedCpuCurrentBytes();
    r.peakAllocatedBytes = trackedCpuPeakBytes();
    r.reservedBytes = r.allocatedBytes;
    r.peakReservedBytes = r.peakAllocatedBytes;
    r.deviceUsedBytes = processRssBytes();
    return r;
}

void MemoryProbe::resetPeak()
{
#ifdef PB_WITH_CUDA
    if (m_cudaIndex >= 0) {
        c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(m_cudaIndex));
        return;
    }
#endif
    resetTrackedCpuPeak();
}

void MemoryProbe::releaseCache()
{
#ifdef PB_WITH_CUDA
    if (m_cudaIndex >= 0)
        c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

} // namespace pb
