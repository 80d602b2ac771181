#include "engine/StepGraph.h"

#ifdef PB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <stdexcept>

namespace pb {

struct StepGraph::Impl {
    explicit Impl(const torch::Device &d) : device(d) {}
    torch::Device device;
#ifdef PB_WITH_CUDA
    std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
};

StepGraph::StepGraph(const torch::Device &device) : m(std::make_unique<Impl>(device))
{
    if (!supported(device))
        throw std::invalid_argument("a CUDA graph of the step needs a CUDA build and a CUDA device (not " + device.str() + ")");
}

StepGraph::~StepGraph() = default;

bool StepGraph::supported(const torch::Device &device)
{
#ifdef PB_WITH_CUDA
    return device.is_cuda();
#else
    (void)device;
    return false;
#endif
}

void StepGraph::capture(const std::function<void()> &step, int warmups)
{
#ifdef PB_WITH_CUDA
    m->graph.reset();
    const c10::cuda::CUDAGuard deviceGuard(m->device);
    const auto ambient = c10::cuda::getCurrentCUDAStream(m->device.index());
    // A capture cannot run on the default stream: a side stream, which first waits for what the
    // ambient one has queued, and which that one waits for at the end.
    const auto side = c10::cuda::getStreamFromPool(false, m->device.index());
    at::cuda::CUDAEvent queued;
    queued.record(ambient);
    queued.block(side);
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    {
        const c10::cuda::CUDAStreamGuard onSide(side);
        for (int i = 0; i < warmups; ++i)
            step();
        side.synchronize();
        c10::cuda::CUDACachingAllocator::emptyCache();
        try {
            graph->capture_begin();
            try {
                step();
            } catch (...) {
                // End the broken capture so the stream takes work again, and clear the error it
                // left (our kernels' launch checks read the last error).
                try {
                    graph->capture_end();
                } catch (...) {
                }
                throw;
            }
            graph->capture_end();
        } catch (const c10::Error &e) { // without LibTorch's C++ backtrace: the message is shown to users
            cudaGetLastError();
            throw CaptureFailed(e.what_without_backtrace());
        } catch (const std::exception &e) {
            cudaGetLastError();
            throw CaptureFailed(e.what());
        }
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(ambient);
    m->graph = std::move(graph);
#else
    (void)step;
    (void)warmups;
    throw std::logic_error("StepGraph::capture without CUDA");
#endif
}

void StepGraph::replay()
{
#ifdef PB_WITH_CUDA
    if (!m->graph)
        throw std::logic_error("StepGraph::replay before a capture");
    const c10::cuda::CUDAGuard deviceGuard(m->device);
    m->graph->replay();
#else
    throw std::logic_error("StepGraph::replay without CUDA");
#endif
}

} // namespace pb
