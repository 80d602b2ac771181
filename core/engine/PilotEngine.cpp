#include "engine/PilotEngine.h"

#include "checkpoint/Checkpoint.h"

#include "config/ParameterTable.h"
#include "config/RunConfigJson.h"
#include "engine/LrSchedule.h"
#include "engine/MemoryProbe.h"
#include "engine/PilotSteps.h"
#include "engine/TorchCompat.h"
#include "util/Errors.h"

#include <QDir>
#include <QFileInfo>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

namespace pb {

double modelFlopsPerStep(const RunConfig &config, int64_t tokensPerStep, int64_t seqLen)
{
    // 6N (4N for a frozen weight), N the weights a token meets: a routed expert's weights count
    // by the share of tokens routed to it (model FLOPs as the MoE literature states MFU).
    // Gemma 4's per-layer table (half of E2B's weights) is only looked up: no token multiplies it.
    double frozen = 0, trained = 0;
    for (const auto &p : parameterTable(config))
        if (p.name != "model.embed_tokens_per_layer.weight")
            (p.trainable ? trained : frozen) += static_cast<double>(p.numel) * p.activeFraction;
    const double tokens = static_cast<double>(tokensPerStep);
    const auto &m = config.model;
    // Softmax attention's scores on the full-attention layers only, each at its own head width
    // (Gemma 4's global layers are twice as wide); a Gated DeltaNet layer's state products are not
    // counted (its projections are, through the parameters).
    double headDims = 0;
    for (int64_t layer = 0; layer < m.layers; ++layer)
        if (!m.linear.linear(layer))
            headDims += m.layerShapesVary() ? static_cast<double>(m.headDimAt(layer)) : m.attentionFlopsHeadDim();
    const double attention = 12.0 * static_cast<double>(m.attentionHeads) * headDims * static_cast<double>(seqLen);
    return (6.0 * trained + 4.0 * frozen + attention) * tokens;
}

PilotEngine::PilotEngine() = default;
PilotEngine::~PilotEngine() = default;

namespace {

torch::Device parseDevice(const std::string &device)
{
    if (device == "cpu")
        return torch::Device(torch::kCPU);
    if (device.rfind("cuda", 0) == 0) {
        if (!torch::cuda::is_available())
            throw InvalidInputError("--device", "'" + device + "' asked for, but this build or host has no CUDA device (use --device cpu)");
        int index = 0;
        if (device.size() > 4) {
            if (device[4] != ':' || device.size() == 5 || device.find_first_not_of("0123456789", 5) != std::string::npos)
                throw InvalidInputError("--device", "'" + device + "' is not a device (use cpu or cuda:N)");
            index = std::stoi(device.substr(5));
        }
        if (index >= static_cast<int>(torch::cuda::device_count()))
            throw InvalidInputError("--device", "'" + device + "' does not exist: this host has " + std::to_string(torch::cuda::device_count()) + " CUDA device(s)");
        return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
    throw InvalidInputError("--device", "'" + device + "' is not a device (use cpu or cuda:N)");
}

bool isOutOfMemory(const std::exception &e)
{
    if (dynamic_cast<const c10::OutOfMemoryError *>(&e) || dynamic_cast<const std::bad_alloc *>(&e))
        return true;
    const std::string what = e.what();
    return what.find("out of memory") != std::string::npos || what.find("CUDA error: out of memory") != std::string::npos;
}

std::string firstLine(const std::string &text)
{
    const auto end = text.find('\n');
    return end == std::string::npos ? text : text.substr(0, end);
}

} // namespace

void checkPilotOptions(const PilotOptions &options)
{
    if (options.steps < 1)
        throw InvalidInputError("--steps", "must be at least 1");
    if (options.warmupSteps < 0)
        throw InvalidInputError("--warmup", "must not be negative");
    // More threads than cores only slows a step; tens of thousands never finish starting.
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (options.cpuThreads < 0 || options.cpuThreads > 4 * cores)
        throw InvalidInputError("--threads", std::to_string(options.cpuThreads) + " is outside 1.." + std::to_string(4 * cores) + " (this machine has "
                                                 + std::to_string(cores) + " cores)");
    if (!options.dropStateOnResume.empty()) {
        const auto &pieces = statePieces();
        if (std::find(pieces.begin(), pieces.end(), options.dropStateOnResume) == pieces.end()) {
            std::string list;
            for (const auto &p : pieces)
                list += (list.empty() ? "" : ", ") + p;
            throw InvalidInputError("--drop-state", "'" + options.dropStateOnResume + "' is not a piece of training state (" + list + ")");
        }
    }
    if (!options.checkpointDir.empty()) {
        const QString dir = QString::fromStdString(options.checkpointDir);
        const QFileInfo info(dir);
        if (info.exists() && !info.isDir())
            throw InvalidInputError("--checkpoint-dir", options.checkpointDir + " is a file, not a folder");
        if (!QDir().mkpath(dir) || !QFileInfo(dir).isWritable())
            throw InvalidInputError("--checkpoint-dir", options.checkpointDir + " cannot be created or written");
    }
}

PilotRun PilotEngine::run(const RunConfig &config, const PilotOptions &options, PilotObserver *observer)
{
    checkPilotOptions(options);
    const torch::Device device = parseDevice(options.device);
    PilotObserver silent;
    PilotObserver &obs = observer ? *observer : silent;

    PilotRun run;
    run.environment = captureEnvironment(options.device);
    run.configHash = configHash(config);
    run.modelRevision = config.model.revision.empty() ? "random-init:seed=" + std::to_string(config.seed) : config.model.revision;
    MemoryProbe probe(options.device);
    if (!probe.isCuda())
        setCpuMemoryLimit(options.memoryLimitBytes);
    if (options.cpuThreads > 0)
        at::set_num_threads(options.cpuThreads);
    // On the CPU a run in bf16 takes ATen's own kernels, not oneDNN's. LibTorch 1.13 sends bf16
    // matmuls and convolutions to oneDNN only where the processor has AVX-512, and there each GEMM
    // holds fp32 accumulators beside its product, more with more threads (a Xeon, 2 threads: the
    // gemma2 fixture's fused step at vocabulary 65,536 peaked 15.9% higher, a LoRA step 6.4%), so
    // the same run's memory, and the CPU checks of the estimator, would depend on the processor.
    // fp32 runs keep oneDNN's fp32 convolution, which every x86 processor takes.
    if (!probe.isCuda()) {
        const Precision p = config.train.precision;
        at::globalContext().setUserEnabledMkldnn(p == Precision::Fp32 || p == Precision::Fp16Mixed);
    }

    StepRunner runner(config, options, device, probe, obs, run);
    try {
        runner.execute();
    } catch (const PilotBenchError &) {
        setCpuMemoryLimit(0);
        throw;
    } catch (const std::exception &e) {
        if (isOutOfMemory(e)) {
            runner.recordOutOfMemory(firstLine(e.what()));
        } else {
            runner.recordFailure(firstLine(e.what()));
        }
    }
    runner.release();
    probe.releaseCache();
    setCpuMemoryLimit(0);
    runner.finishSummary();
    return run;
}

} // namespace pb
