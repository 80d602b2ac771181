#pragma once
// Runs a kernel's device code on the host, for CI, which has no GPU: one std::thread per CUDA
// thread of a block, the blocks one after another, __syncthreads a barrier of the block's threads,
// dynamic shared memory one buffer per block filled with NaN (a read of an element no thread wrote
// shows). It checks a kernel's indexing, ownership and synchronisation; not its speed, nor the
// card's rounding (nvcc contracts a * b + c into one fma).
#define PB_CUDA_EMULATION 1

#include <condition_variable>
#include <cstddef>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace pb::emu {

struct Dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local Dim3 threadIndex, blockIndex, blockDimension;
inline thread_local float *sharedMemory = nullptr;

class Barrier {
public:
    explicit Barrier(unsigned count) : m_count(count) {}
    void arriveAndWait()
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        const unsigned generation = m_generation;
        if (++m_arrived == m_count) {
            m_arrived = 0;
            ++m_generation;
            m_wake.notify_all();
            return;
        }
        m_wake.wait(lock, [&] { return m_generation != generation; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_wake;
    unsigned m_count, m_arrived = 0, m_generation = 0;
};
inline thread_local Barrier *blockBarrier = nullptr;

template <typename Kernel, typename... Args>
void launch(Dim3 grid, unsigned threads, size_t sharedBytes, Kernel kernel, Args... args)
{
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            std::vector<float> shared(sharedBytes / sizeof(float) + 1, std::numeric_limits<float>::quiet_NaN());
            Barrier barrier(threads);
            std::vector<std::thread> running;
            running.reserve(threads);
            for (unsigned t = 0; t < threads; ++t)
                running.emplace_back([&, t] {
                    threadIndex = {t, 0, 0};
                    blockIndex = {bx, by, 0};
                    blockDimension = {threads, 1, 1};
                    sharedMemory = shared.data();
                    blockBarrier = &barrier;
                    kernel(args...);
                });
            for (auto &thread : running)
                thread.join();
        }
}

} // namespace pb::emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __syncthreads() ::pb::emu::blockBarrier->arriveAndWait()
#define threadIdx ::pb::emu::threadIndex
#define blockIdx ::pb::emu::blockIndex
#define blockDim ::pb::emu::blockDimension
#define PB_DYNAMIC_SHARED(name) float *name = ::pb::emu::sharedMemory
