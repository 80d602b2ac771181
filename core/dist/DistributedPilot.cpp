#include "dist/DistributedPilot.h"

#include "dist/CpuBinding.h"
#include "dist/DataParallelHooks.h"
#include "dist/FsdpHooks.h"
#include "dist/Topology.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <memory>

namespace pb {
namespace {

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
        if (!r.storeFile.empty()) {
            store = c10::make_intrusive<c10d::FileStore>(r.storeFile, r.worldSize);
            store->setTimeout(timeout);
        } else {
            store = c10::make_intrusive<c10d::TCPStore>(r.masterAddr, storeOptions);
        }
    } catch (const std::exception &e) {
        const std::string where = r.storeFile.empty() ? "TCPStore rendezvous at " + r.masterAddr + ":" + std::to_string(r.masterPort) : "file rendezvous at " + r.storeFile;
        throw PilotBenchError(ExitCode::Failure, "rank " + std::to_string(r.rank) + ": " + where + " failed: " + e.what());
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

// Keeps every step's sample for the result and passes every event on.
class SampleCollector final : public PilotObserver {
public:
    SampleCollector(PilotObserver *next, std::vector<StepSample> &samples) : m_next(next), m_samples(samples) {}
    void phaseStarted(Phase phase, int64_t step) override { if (m_next) m_next->phaseStarted(phase, step); }
    void phaseFinished(const PhaseMark &mark) override { if (m_next) m_next->phaseFinished(mark); }
    void stepFinished(const StepSample &sample) override
    {
        m_samples.push_back(sample);
        if (m_next)
            m_next->stepFinished(sample);
    }
    void validationFinished(const ValidationResult &result) override { if (m_next) m_next->validationFinished(result); }
    void checkpointWritten(const CheckpointWrite &write) override { if (m_next) m_next->checkpointWritten(write); }

private:
    PilotObserver *m_next;
    std::vector<StepSample> &m_samples;
};

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

std::string cpuAffinityList() { return formatCpuList(allowedCpus()); }

void checkStrategy(const std::string &strategy, const RunConfig &config)
{
    if (strategy != "ddp" && strategy != "zero2" && strategy != "fsdp")
        throw InvalidInputError("--strategy", "'" + strategy + "' is not a strategy (use ddp, zero2 or fsdp)");
    if (strategy == "fsdp" && config.train.mode == TrainMode::Qlora)
        throw InvalidInputError("train.mode", "qlora keeps each NF4 base whole on every rank, which fsdp would not shard; use ddp or zero2");
    if (strategy != "ddp" && config.train.precision == Precision::Fp16Mixed)
        throw InvalidInputError("train.precision", strategy + " cannot run fp16-mixed: the loss scaler's overflow check would see only this rank's gradients; use bf16-mixed");
}

std::string ncclLibraryVersion()
{
#ifdef PB_HAVE_NCCL
    return c10d::getNcclVersion();
#else
    return {};
#endif
}

DistributedPilotResult runDistributedPilot(const RunConfig &config, PilotOptions options, const DistributedPilotOptions &distOptions, PilotObserver *observer)
{
    const Rendezvous &r = distOptions.rendezvous;
    if (r.worldSize < 1 || r.rank < 0 || r.rank >= r.worldSize)
        throw InvalidInputError("RANK", "rank " + std::to_string(r.rank) + " is outside a world of " + std::to_string(r.worldSize));
    if (distOptions.timeoutSeconds < 1)
        throw InvalidInputError("--timeout", "must be at least 1 second");
    checkStrategy(distOptions.strategy, config);
    DistributedPilotResult result;
    result.strategy = distOptions.strategy;
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
    std::unique_ptr<ParallelHooksBase> strategyHooks;
    if (distOptions.strategy == "fsdp")
        strategyHooks = std::make_unique<FsdpHooks>(group, r, result.collective == "nccl", config.train.gradClip, distOptions.parameterDumpPath);
    else
        strategyHooks = std::make_unique<DataParallelHooks>(group, r, distOptions.strategy == "zero2" ? DataParallelStrategy::Zero2 : DataParallelStrategy::Ddp,
                                                            config.train.gradClip, distOptions.bucketBytes, distOptions.overlap, distOptions.parameterDumpPath);
    ParallelHooksBase &hooks = *strategyHooks;
    options.distributed = &hooks;
    SampleCollector collector(observer, result.samples);
    PilotEngine engine;
    result.run = engine.run(config, options, &collector);
    result.collectiveVersion = result.collective == "nccl" ? ncclLibraryVersion()
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
    result.optimizerParameters = hooks.ownedParameters();
    result.overlap = hooks.overlapping();
    result.parameterSum = hooks.parameterSum();
    result.parameterAbsSum = hooks.parameterAbsSum();
    result.parameterCount = hooks.parameterCount();
    return result;
}

} // namespace pb
