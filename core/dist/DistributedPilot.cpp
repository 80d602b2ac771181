#include "dist/DistributedPilot.h"

#include "dist/DistCompat.h"
#include "dist/Topology.h"
#include "engine/DistributedHooks.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <QFile>
#include <QSaveFile>

#include <sched.h>
#include <unistd.h>

#include <chrono>

namespace pb {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

void waitAll(std::vector<c10::intrusive_ptr<c10d::Work>> &works)
{
    for (auto &work : works)
        work->wait();
    works.clear();
}

void synchronizeDevice(const torch::Device &device)
{
#ifdef PB_WITH_CUDA
    if (device.is_cuda())
        torch::cuda::synchronize(device.index());
#else
    (void)device;
#endif
}

// DDP without the Python wrapper: same-dtype tensors flattened into buckets, one all-reduce each,
// all buckets in flight at once, then averaged. The all-reduce runs after the backward pass (no
// overlap with it), so its whole time is exposed and counted as communication.
class DataParallelHooks final : public DistributedHooks {
public:
    DataParallelHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, int64_t bucketBytes, std::string dumpPath)
        : m_group(std::move(group)), m_rendezvous(rendezvous), m_bucketBytes(bucketBytes), m_dumpPath(std::move(dumpPath))
    {
    }
    int rank() const override { return m_rendezvous.rank; }
    int worldSize() const override { return m_rendezvous.worldSize; }

    void broadcastParameters(std::vector<torch::Tensor> &params) override
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

    void afterBackward(std::vector<torch::Tensor> &params) override
    {
        if (!m_group) {
            m_stepCommMs.push_back(0);
            return;
        }
        const auto start = Clock::now();
        torch::NoGradGuard noGrad;
        std::vector<torch::Tensor> grads;
        m_gradientBytes = 0;
        for (auto &p : params) {
            if (!p.grad().defined()) // a parameter this rank's batch did not reach: it still takes part
                p.mutable_grad() = torch::zeros_like(p);
            grads.push_back(p.grad());
            m_gradientBytes += p.grad().numel() * static_cast<int64_t>(p.grad().element_size());
        }
        const double inverse = 1.0 / static_cast<double>(m_rendezvous.worldSize);
        forEachBucket(grads, [this](std::vector<torch::Tensor> &flat) { return m_group->allreduce(flat); }, inverse);
        synchronizeDevice(params.front().device());
        m_stepCommMs.push_back(msSince(start));
    }

    void trainingFinished(const std::vector<torch::Tensor> &params) override
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

    const std::vector<double> &stepCommMs() const { return m_stepCommMs; }
    double broadcastMs() const { return m_broadcastMs; }
    int64_t gradientBytes() const { return m_gradientBytes; }
    double parameterSum() const { return m_parameterSum; }
    double parameterAbsSum() const { return m_parameterAbsSum; }
    int64_t parameterCount() const { return m_parameterCount; }

private:
    // Groups tensors of one dtype and device into flat buckets of about m_bucketBytes, runs `op` on
    // each (all in flight), waits, then copies the results back (times `scale` when given).
    template<typename Op>
    void forEachBucket(std::vector<torch::Tensor> &tensors, Op op, double scale = 1.0)
    {
        std::vector<std::vector<torch::Tensor>> buckets;
        int64_t bytes = 0;
        for (const auto &t : tensors) {
            const int64_t size = t.numel() * static_cast<int64_t>(t.element_size());
            const bool fresh = buckets.empty() || bytes + size > m_bucketBytes || buckets.back().front().scalar_type() != t.scalar_type()
                               || buckets.back().front().device() != t.device();
            if (fresh) {
                buckets.emplace_back();
                bytes = 0;
            }
            buckets.back().push_back(t);
            bytes += size;
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
        waitAll(works);
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

    c10::intrusive_ptr<compat::CollectiveGroup> m_group;
    Rendezvous m_rendezvous;
    int64_t m_bucketBytes;
    std::string m_dumpPath;
    std::vector<double> m_stepCommMs;
    double m_broadcastMs = 0;
    int64_t m_gradientBytes = 0;
    double m_parameterSum = 0, m_parameterAbsSum = 0;
    int64_t m_parameterCount = 0;
};

#ifdef PB_HAVE_GLOO
std::shared_ptr<::gloo::transport::Device> glooDevice(const Rendezvous &rendezvous)
{
    const QByteArray interface = qgetenv("GLOO_SOCKET_IFNAME");
    if (!interface.isEmpty())
        return c10d::ProcessGroupGloo::createDeviceForInterface(interface.toStdString());
    // One host: stay on loopback. Several: the address this host's name resolves to.
    if (rendezvous.masterAddr == "127.0.0.1" || rendezvous.masterAddr == "localhost")
        return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

c10::intrusive_ptr<compat::CollectiveGroup> makeGroup(const Rendezvous &r, const std::string &device, int timeoutSeconds, std::string &collective)
{
    const std::chrono::milliseconds timeout(static_cast<int64_t>(timeoutSeconds) * 1000);
    c10d::TCPStoreOptions storeOptions;
    storeOptions.port = static_cast<std::uint16_t>(r.masterPort);
    storeOptions.isServer = r.rank == 0;
    storeOptions.numWorkers = static_cast<std::size_t>(r.worldSize);
    storeOptions.waitWorkers = true;
    storeOptions.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> store;
    try {
        store = c10::make_intrusive<c10d::TCPStore>(r.masterAddr, storeOptions);
    } catch (const std::exception &e) {
        throw PilotBenchError(ExitCode::Failure, "rank " + std::to_string(r.rank) + ": TCPStore rendezvous at " + r.masterAddr + ":" + std::to_string(r.masterPort)
                                                     + " failed: " + e.what());
    }
    collective = collectiveFor(device);
#ifdef PB_HAVE_NCCL
    if (collective == "nccl") {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, r.rank, r.worldSize, options);
    }
#endif
#ifdef PB_HAVE_GLOO
    if (collective == "gloo") {
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(glooDevice(r));
        return c10::make_intrusive<c10d::ProcessGroupGloo>(store, r.rank, r.worldSize, options);
    }
#endif
    throw InvalidInputError("--device", "'" + device + "' needs a collective library this LibTorch lacks (no "
                                            + std::string(device.rfind("cuda", 0) == 0 ? "NCCL or Gloo" : "Gloo")
                                            + " headers at build time; a PyTorch wheel ships none for Gloo, so CPU scaling needs a LibTorch with them)");
}

} // namespace

std::string collectiveFor(const std::string &device)
{
#ifdef PB_HAVE_NCCL
    if (device.rfind("cuda", 0) == 0)
        return "nccl";
#endif
#ifdef PB_HAVE_GLOO
    (void)device;
    return "gloo"; // CPU tensors, and CUDA tensors where NCCL is missing
#else
    (void)device;
    return "none";
#endif
}

std::string cpuAffinityList()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return "";
    std::string list;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
            ++last;
        list += (list.empty() ? "" : ",") + std::to_string(cpu) + (last > cpu ? "-" + std::to_string(last) : "");
        cpu = last;
    }
    return list;
}

DistributedPilotResult runDistributedPilot(const RunConfig &config, PilotOptions options, const DistributedPilotOptions &distOptions, PilotObserver *observer)
{
    const Rendezvous &r = distOptions.rendezvous;
    if (r.worldSize < 1 || r.rank < 0 || r.rank >= r.worldSize)
        throw InvalidInputError("RANK", "rank " + std::to_string(r.rank) + " is outside a world of " + std::to_string(r.worldSize));
    if (distOptions.timeoutSeconds < 1)
        throw InvalidInputError("--timeout", "must be at least 1 second");
    DistributedPilotResult result;
    result.rendezvous = r;
    result.pid = static_cast<int64_t>(::getpid());
    result.cpuAffinity = cpuAffinityList();
    result.collective = "none";
    c10::intrusive_ptr<compat::CollectiveGroup> group;
    if (r.worldSize > 1 || r.masterPort > 0) {
        spdlog::info("rank {}/{}: rendezvous at {}:{}", r.rank, r.worldSize, r.masterAddr, r.masterPort);
        group = makeGroup(r, options.device, distOptions.timeoutSeconds, result.collective);
        spdlog::info("rank {}/{}: {} process group ready", r.rank, r.worldSize, result.collective);
    }
    DataParallelHooks hooks(group, r, distOptions.bucketBytes, distOptions.parameterDumpPath);
    options.distributed = &hooks;
    PilotEngine engine;
    result.run = engine.run(config, options, observer);
    result.collectiveVersion = result.collective == "nccl" ? result.run.environment.ncclVersion
                               : result.collective == "gloo" ? "bundled with LibTorch " + result.run.environment.torchVersion
                                                             : "";
    const auto &comm = hooks.stepCommMs();
    const auto measured = std::min<size_t>(comm.size(), static_cast<size_t>(std::max<int64_t>(result.run.summary.measuredSteps, 0)));
    double sum = 0;
    for (size_t i = comm.size() - measured; i < comm.size(); ++i)
        sum += comm[i];
    result.commMsPerStep = measured > 0 ? sum / static_cast<double>(measured) : 0;
    result.broadcastMs = hooks.broadcastMs();
    result.gradientBytesPerStep = hooks.gradientBytes();
    result.parameterSum = hooks.parameterSum();
    result.parameterAbsSum = hooks.parameterAbsSum();
    result.parameterCount = hooks.parameterCount();
    return result;
}

} // namespace pb
