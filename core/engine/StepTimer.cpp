#include "engine/StepTimer.h"

#ifdef PB_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <stdexcept>
#include <string>

namespace pb {

StepTimer::StepTimer(const torch::Device &device) : m_cuda(device.is_cuda()), m_deviceIndex(device.has_index() ? device.index() : 0) {}

StepTimer::~StepTimer()
{
#ifdef PB_WITH_CUDA
    for (void *e : m_events)
        cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

void StepTimer::reset()
{
    m_marks = 0;
    m_times.clear();
}

size_t StepTimer::mark()
{
    const size_t index = m_marks++;
#ifdef PB_WITH_CUDA
    if (m_cuda) {
        if (index == m_events.size()) {
            cudaEvent_t e = nullptr;
            if (cudaEventCreate(&e) != cudaSuccess)
                throw std::runtime_error("step timer: cudaEventCreate failed");
            m_events.push_back(e);
        }
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(m_deviceIndex)).stream();
        if (cudaEventRecord(static_cast<cudaEvent_t>(m_events[index]), stream) != cudaSuccess)
            throw std::runtime_error("step timer: cudaEventRecord failed");
        return index;
    }
#endif
    m_times.push_back(std::chrono::steady_clock::now());
    return index;
}

double StepTimer::elapsedMs(size_t from, size_t to) const
{
    if (from >= m_marks || to >= m_marks)
        throw std::out_of_range("step timer: no mark " + std::to_string(std::max(from, to)));
#ifdef PB_WITH_CUDA
    if (m_cuda) {
        float ms = 0.f;
        if (cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(m_events[from]), static_cast<cudaEvent_t>(m_events[to])) != cudaSuccess)
            throw std::runtime_error("step timer: cudaEventElapsedTime failed (is the device synchronised?)");
        return static_cast<double>(ms);
    }
#endif
    return std::chrono::duration<double, std::milli>(m_times[to] - m_times[from]).count();
}

} // namespace pb
