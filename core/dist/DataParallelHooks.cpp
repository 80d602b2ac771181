#include "dist/DataParallelHooks.h"

#include "util/Errors.h"

#include <QSaveFile>

#include <chrono>
#include <cmath>

namespace pb {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

void synchronizeDevice(const torch::Device &device)
{
#ifdef PB_WITH_CUDA
    if (device.is_cuda())
        torch::cuda::synchronize(device.index());
#else
    (void)device;
#endif
}

int64_t bytesOf(const torch::Tensor &t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

} // namespace

DataParallelHooks::DataParallelHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, DataParallelStrategy strategy,
                                     double gradClip, int64_t bucketBytes, std::string dumpPath)
    : m_group(std::move(group)), m_rendezvous(rendezvous), m_strategy(strategy), m_gradClip(gradClip), m_bucketBytes(bucketBytes),
      m_dumpPath(std::move(dumpPath))
{
}

std::vector<torch::Tensor> DataParallelHooks::optimizerParameters(std::vector<torch::Tensor> trainable)
{
    m_trainable = trainable;
    if (m_strategy == DataParallelStrategy::Ddp) {
        for (const auto &p : trainable)
            m_ownedParameters += p.numel();
        return trainable;
    }
    // Largest first to the least-loaded rank: every rank computes the same assignment.
    std::vector<size_t> order(trainable.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return trainable[a].numel() > trainable[b].numel(); });
    std::vector<int64_t> load(static_cast<size_t>(m_rendezvous.worldSize), 0);
    m_owner.assign(trainable.size(), 0);
    for (size_t i : order) {
        const auto least = std::min_element(load.begin(), load.end()) - load.begin();
        m_owner[i] = static_cast<int>(least);
        load[static_cast<size_t>(least)] += trainable[i].numel();
    }
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < trainable.size(); ++i) {
        if (m_owner[i] == m_rendezvous.rank) {
            owned.push_back(trainable[i]);
            m_ownedParameters += trainable[i].numel();
        }
    }
    return owned;
}

// Groups tensors of one dtype and device into flat buckets of about m_bucketBytes, runs `op` on
// each (all in flight), waits, then copies the results back (times `scale` when not 1).
template<typename Op>
void DataParallelHooks::forEachBucket(std::vector<torch::Tensor> &tensors, Op op, double scale)
{
    std::vector<std::vector<torch::Tensor>> buckets;
    int64_t bytes = 0;
    for (const auto &t : tensors) {
        const bool fresh = buckets.empty() || bytes + bytesOf(t) > m_bucketBytes || buckets.back().front().scalar_type() != t.scalar_type()
                           || buckets.back().front().device() != t.device();
        if (fresh) {
            buckets.emplace_back();
            bytes = 0;
        }
        buckets.back().push_back(t);
        bytes += bytesOf(t);
    }
    std::vector<torch::Tensor> flats;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto &bucket : buckets) {
        std::vector<torch::Tensor> views;
        for (const auto &t : bucket)
            views.push_back(t.reshape({-1}));
        std::vector<torch::Tensor> flat {torch::cat(views)};
        works.push_back(op(flat));
        flats.push_back(flat.front());
    }
    for (auto &work : works)
        work->wait();
    for (size_t b = 0; b < buckets.size(); ++b) {
        auto flat = flats[b];
        if (scale != 1.0)
            flat.mul_(scale);
        int64_t offset = 0;
        for (auto &t : buckets[b]) {
            t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
            offset += t.numel();
        }
    }
}

void DataParallelHooks::broadcastParameters(std::vector<torch::Tensor> &params)
{
    if (!m_group || params.empty())
        return;
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> data;
    for (auto &p : params)
        data.push_back(p.detach());
    forEachBucket(data, [this](std::vector<torch::Tensor> &flat) {
        c10d::BroadcastOptions options;
        options.rootRank = 0;
        return m_group->broadcast(flat, options);
    });
    synchronizeDevice(params.front().device());
    m_broadcastMs = msSince(start);
}

void DataParallelHooks::afterBackward(std::vector<torch::Tensor> & /*ownParams: the engine's view*/)
{
    if (!m_group || m_trainable.empty()) {
        m_stepCommMs.push_back(0);
        return;
    }
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    m_gradientBytes = 0;
    for (auto &p : m_trainable) {
        if (!p.grad().defined()) // a parameter this rank's batch did not reach still takes part
            p.mutable_grad() = torch::zeros_like(p);
        m_gradientBytes += bytesOf(p.grad());
    }
    if (m_strategy == DataParallelStrategy::Ddp) {
        std::vector<torch::Tensor> grads;
        for (auto &p : m_trainable)
            grads.push_back(p.grad());
        forEachBucket(grads, [this](std::vector<torch::Tensor> &flat) { return m_group->allreduce(flat); }, 1.0 / m_rendezvous.worldSize);
    } else {
        reduceToOwners();
    }
    synchronizeDevice(m_trainable.front().device());
    m_stepCommMs.push_back(msSince(start));
}

void DataParallelHooks::reduceToOwners()
{
    for (int owner = 0; owner < m_rendezvous.worldSize; ++owner) {
        std::vector<torch::Tensor> grads;
        for (size_t i = 0; i < m_trainable.size(); ++i)
            if (m_owner[i] == owner)
                grads.push_back(m_trainable[i].grad());
        if (grads.empty())
            continue;
        forEachBucket(grads, [this, owner](std::vector<torch::Tensor> &flat) {
            c10d::ReduceOptions options;
            options.rootRank = owner;
            return m_group->reduce(flat, options);
        }, 1.0 / m_rendezvous.worldSize);
    }
    // Only the owner keeps a gradient (the others' copies hold partial sums and are freed).
    double squares = 0;
    for (size_t i = 0; i < m_trainable.size(); ++i) {
        auto &p = m_trainable[i];
        if (m_owner[i] != m_rendezvous.rank) {
            p.mutable_grad() = torch::Tensor();
            continue;
        }
        const double norm = p.grad().norm().item<double>();
        squares += norm * norm;
    }
    // Clipping needs the norm over every rank's share; the engine's own clip then sees at most
    // the threshold on this rank's part and leaves it alone.
    if (m_gradClip > 0) {
        std::vector<torch::Tensor> total {torch::full({1}, squares, torch::TensorOptions().dtype(torch::kDouble).device(m_trainable.front().device()))};
        m_group->allreduce(total)->wait();
        const double norm = std::sqrt(total.front().item<double>());
        const double coefficient = m_gradClip / (norm + 1e-6);
        if (coefficient < 1) {
            for (size_t i = 0; i < m_trainable.size(); ++i)
                if (m_owner[i] == m_rendezvous.rank)
                    m_trainable[i].grad().mul_(coefficient);
        }
    }
}

void DataParallelHooks::afterOptimizerStep()
{
    if (!m_group || m_strategy != DataParallelStrategy::Zero2)
        return;
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    for (int owner = 0; owner < m_rendezvous.worldSize; ++owner) {
        std::vector<torch::Tensor> data;
        for (size_t i = 0; i < m_trainable.size(); ++i)
            if (m_owner[i] == owner)
                data.push_back(m_trainable[i].detach());
        if (data.empty())
            continue;
        forEachBucket(data, [this, owner](std::vector<torch::Tensor> &flat) {
            c10d::BroadcastOptions options;
            options.rootRank = owner;
            return m_group->broadcast(flat, options);
        });
    }
    synchronizeDevice(m_trainable.front().device());
    if (!m_stepCommMs.empty())
        m_stepCommMs.back() += msSince(start);
}

void DataParallelHooks::trainingFinished(const std::vector<torch::Tensor> &params)
{
    torch::NoGradGuard noGrad;
    QSaveFile file(QString::fromStdString(m_dumpPath));
    const bool dump = !m_dumpPath.empty();
    if (dump && !file.open(QIODevice::WriteOnly))
        throw PilotBenchError(ExitCode::Failure, m_dumpPath + ": cannot write the parameter dump: " + file.errorString().toStdString());
    for (const auto &p : params) {
        const auto values = p.detach().to(torch::kCPU, torch::kFloat).contiguous();
        m_parameterSum += values.sum(torch::kDouble).item<double>();
        m_parameterAbsSum += values.abs().sum(torch::kDouble).item<double>();
        m_parameterCount += values.numel();
        if (dump)
            file.write(reinterpret_cast<const char *>(values.data_ptr<float>()), values.numel() * static_cast<int64_t>(sizeof(float)));
    }
    if (dump && !file.commit())
        throw PilotBenchError(ExitCode::Failure, m_dumpPath + ": cannot write the parameter dump: " + file.errorString().toStdString());
}

} // namespace pb
