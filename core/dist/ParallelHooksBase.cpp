#include "dist/ParallelHooksBase.h"

#include "checkpoint/Checkpoint.h"
#include "util/Errors.h"

#include <cmath>

namespace pb {

ParallelHooksBase::ParallelHooksBase(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, std::string dumpPath)
    : m_group(std::move(group)), m_rendezvous(rendezvous), m_dumpPath(std::move(dumpPath)),
      m_bf16AsFloat(m_group && m_group->getBackendName() == "gloo")
{
}

void ParallelHooksBase::synchronizeDevice(const torch::Device &device)
{
#ifdef PB_WITH_CUDA
    if (device.is_cuda())
        torch::cuda::synchronize(device.index());
#else
    (void)device;
#endif
}

void ParallelHooksBase::clipShardedGradients(const std::vector<torch::Tensor> &grads, double maxNorm, const torch::Device &device)
{
    if (maxNorm <= 0)
        return;
    double squares = 0;
    for (const auto &g : grads) {
        const double norm = g.norm().item<double>();
        squares += norm * norm;
    }
    std::vector<torch::Tensor> total {torch::full({1}, squares, torch::TensorOptions().dtype(torch::kDouble).device(device))};
    if (m_group)
        m_group->allreduce(total)->wait();
    const double coefficient = maxNorm / (std::sqrt(total.front().item<double>()) + 1e-6);
    if (coefficient < 1)
        for (const auto &g : grads)
            g.mul_(coefficient);
}

void ParallelHooksBase::trainingFinished(const std::vector<torch::Tensor> &params)
{
    writeParameterDump(params, m_dumpPath, [this](const torch::Tensor &values) {
        m_parameterSum += values.sum(torch::kDouble).item<double>();
        m_parameterAbsSum += values.abs().sum(torch::kDouble).item<double>();
        m_parameterCount += values.numel();
    });
}

void ParallelHooksBase::barrier()
{
    if (!m_group || m_rendezvous.worldSize < 2)
        return;
    const bool nccl = m_group->getBackendName() == "nccl";
    std::vector<torch::Tensor> one {torch::zeros({1}, torch::TensorOptions().device(nccl ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(m_rendezvous.localRank))
                                                                                         : torch::Device(torch::kCPU)))};
    m_group->allreduce(one)->wait();
    if (nccl)
        synchronizeDevice(one.front().device());
}

} // namespace pb
