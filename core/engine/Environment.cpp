#include "engine/Environment.h"

#include <cstdio>

#include "BuildInfo.h"
#include "engine/StepGraph.h"
#include "engine/TorchCompat.h"
#include "util/Errors.h"

#include <QSysInfo>
#include <QFile>
#include <QThread>

#include <sstream>

#ifdef PB_WITH_CUDA
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace pb {
namespace {

std::string cpuModelName()
{
    QFile f(QStringLiteral("/proc/cpuinfo"));
    if (f.open(QIODevice::ReadOnly)) {
        while (!f.atEnd()) {
            const QByteArray line = f.readLine();
            if (line.startsWith("model name")) {
                const auto colon = line.indexOf(':');
                return line.mid(colon + 1).trimmed().toStdString();
            }
        }
    }
    return QSysInfo::currentCpuArchitecture().toStdString();
}

} // namespace

bool cudaAvailable() { return torch::cuda::is_available(); }
int cudaDeviceCount() { return static_cast<int>(torch::cuda::device_count()); }

Environment captureEnvironment(const std::string &device)
{
    Environment env;
    env.pilotbenchVersion = PILOTBENCH_VERSION;
    env.gitRevision = PILOTBENCH_GIT_REVISION;
    env.torchVersion = TORCH_VERSION;
    env.device = device;
    env.cpu = cpuModelName();
    env.cpuThreads = at::get_num_threads();
    env.os = QSysInfo::prettyProductName().toStdString() + " (" + QSysInfo::kernelVersion().toStdString() + ")";
    env.deviceCount = cudaDeviceCount();
#ifdef PB_WITH_CUDA
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    env.cudaRuntime = std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
    env.driverVersion = "CUDA driver API " + std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10);
    if (env.deviceCount > 0) {
        const long cudnn = at::detail::getCUDAHooks().versionCuDNN();
        if (cudnn > 0)
            env.cudnnVersion = std::to_string(cudnn);
    }
    // The kernel driver's own version (what nvidia-smi shows); the runtime API only gives its CUDA level.
    QFile driverFile(QStringLiteral("/proc/driver/nvidia/version"));
    if (driverFile.open(QIODevice::ReadOnly)) {
        const QList<QByteArray> words = driverFile.readLine().simplified().split(' ');
        for (const auto &word : words)
            if (word.count('.') >= 1 && !word.isEmpty() && word.at(0) >= '0' && word.at(0) <= '9') {
                env.driverVersion = word.toStdString() + " (" + env.driverVersion + ")";
                break;
            }
    }
    if (device.rfind("cuda", 0) == 0 && env.deviceCount > 0) {
        const int index = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
        cudaDeviceProp prop {};
        if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) {
            env.deviceName = prop.name;
            env.deviceMemoryBytes = static_cast<int64_t>(prop.totalGlobalMem);
            env.computeCapability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
        }
    }
#endif
    if (device == "cpu") {
        env.deviceName = env.cpu;
    }
    return env;
}

QJsonObject toJson(const Environment &env)
{
    auto s = [](const std::string &v) { return QString::fromStdString(v); };
    return QJsonObject {
        {QStringLiteral("pilotbench_version"), s(env.pilotbenchVersion)},
        {QStringLiteral("git_revision"), s(env.gitRevision)},
        {QStringLiteral("torch_version"), s(env.torchVersion)},
        {QStringLiteral("cuda_runtime"), s(env.cudaRuntime)},
        {QStringLiteral("hip_runtime"), s(env.hipRuntime)},
        {QStringLiteral("cudnn_version"), s(env.cudnnVersion)},
        {QStringLiteral("nccl_version"), s(env.ncclVersion)},
        {QStringLiteral("driver_version"), s(env.driverVersion)},
        {QStringLiteral("device"), s(env.device)},
        {QStringLiteral("device_name"), s(env.deviceName)},
        {QStringLiteral("device_memory_bytes"), static_cast<double>(env.deviceMemoryBytes)},
        {QStringLiteral("compute_capability"), s(env.computeCapability)},
        {QStringLiteral("device_count"), env.deviceCount},
        {QStringLiteral("cpu"), s(env.cpu)},
        {QStringLiteral("cpu_threads"), env.cpuThreads},
        {QStringLiteral("os"), s(env.os)},
    };
}

std::string buildInfoText()
{
    std::ostringstream text;
    text << "pilotbench " << PILOTBENCH_VERSION << " (git " << PILOTBENCH_GIT_REVISION << ")\n"
         << "LibTorch " << TORCH_VERSION << '\n'
         << "CUDA available: " << (cudaAvailable() ? "yes, " + std::to_string(cudaDeviceCount()) + " device(s)" : std::string("no")) << '\n'
         << "Qt " << qVersion();
    return text.str();
}

int64_t deviceMemoryForPilot(const std::string &device)
{
    if (device.rfind("cuda", 0) == 0)
        return captureEnvironment(device).deviceMemoryBytes;
    // Tests stand in a small host here, to see a pilot keep to it (workflow/PilotMemoryCheck.h).
    if (const QByteArray test = qgetenv("PILOTBENCH_TEST_MEM_AVAILABLE"); !test.isEmpty())
        return test.toLongLong();
    QFile meminfo(QStringLiteral("/proc/meminfo"));
    if (!meminfo.open(QIODevice::ReadOnly))
        return 0;
    for (const QByteArray &line : meminfo.readAll().split('\n'))
        if (line.startsWith("MemAvailable:"))
            return line.mid(13).trimmed().split(' ').first().toLongLong() * 1024; // in kB
    return 0;
}

namespace {

void requirePrecisionRuns(Precision precision, const Environment &env)
{
    if (!isFp8(precision))
        return;
    const std::string why = std::string(toString(precision)) + " needs a CUDA device with float8 tensor cores (compute capability 8.9 or later) and LibTorch 2.5 or later";
    int major = 0, minor = 0, torchMajor = 0, torchMinor = 0;
    if (env.device.rfind("cuda", 0) != 0)
        throw InvalidInputError("train.precision", why + "; this run's device is " + env.device);
    if (std::sscanf(env.computeCapability.c_str(), "%d.%d", &major, &minor) == 2 && major * 10 + minor < 89)
        throw InvalidInputError("train.precision", why + "; " + env.deviceName + " is " + env.computeCapability);
    if (std::sscanf(env.torchVersion.c_str(), "%d.%d", &torchMajor, &torchMinor) == 2 && torchMajor * 100 + torchMinor < 205)
        throw InvalidInputError("train.precision", why + "; this build has LibTorch " + env.torchVersion);
}

} // namespace

void requireRunsHere(const RunConfig &config, const Environment &env)
{
    requirePrecisionRuns(config.train.precision, env);
    if (!config.train.cudaGraph)
        return;
    if (env.device.rfind("cuda", 0) != 0 || !StepGraph::supported(torch::Device(env.device)))
        throw InvalidInputError("train.cuda_graph", "a CUDA graph of the step needs a CUDA device and a CUDA build; this run's device is " + env.device);
    if (!compat::kDeviceSideAdamW)
        throw InvalidInputError("train.cuda_graph", "a CUDA graph of the step needs fused AdamW taking its rate as a device tensor (LibTorch 2.2 or later); this build has LibTorch " +
                                                        env.torchVersion);
}

} // namespace pb
