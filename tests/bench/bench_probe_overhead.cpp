// Overhead of the pilot's probes: the engine's instrumented step (synchronised phase timing, memory
// reads, loader thread, history-free) against a bare LibTorch loop of the same model, optimizer and
// precision that synchronises once at the end. Prints both and their ratio, measured in one run.
//   bench_probe_overhead [--device cuda:0] [--preset llama-3.2-1b] [--steps 10] [--set PATH=VALUE ...] [--trace FILE] [--residual-ab]
//                        [--window-ab] [--loss-chunk-ab TOKENS] [--graph-ab] [--mixed-linear-ab] [--lora-node-ab]
// --residual-ab instead times the bare fused step with the residual add apart and folded into the
// norm (issue 34), in one run; --window-ab the sliding layers on SDPA's mask and on flash's own
// window (model/WindowedAttention.h, issue 28); --loss-chunk-ab the fused loss's chunk as its memory
// budget makes it and of TOKENS tokens; --graph-ab the bare step as the engine runs it, the same
// with nothing read by the host, and that step captured as a CUDA graph and replayed (issue 34);
// --mixed-linear-ab the fused path's projections through autocast's linear and as
// model/MixedLinear.h's nodes (issue 34); --lora-node-ab LoRA's adapters added after those nodes
// and inside them.
// --trace also writes a Kineto trace of two more bare steps (LibTorch 2.x), which
// tests/bench/trace_top_kernels.py ranks by kernel time.
#include "config/RunConfigJson.h"
#include "engine/GradClip.h"
#include "engine/Optimizer.h"
#include "engine/PilotEngine.h"
#include "engine/StepGraph.h"
#include "engine/TorchCompat.h"
#include "model/Transformer.h"

#include <QCoreApplication>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#ifdef PB_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace pb;

namespace {

void sync(const torch::Device &device)
{
#ifdef PB_WITH_CUDA
    if (device.is_cuda())
        cudaDeviceSynchronize();
#else
    (void)device;
#endif
}

// The bare loop's model, optimizer and one batch of random tokens.
struct BareSetup {
    BareSetup(const RunConfig &config, const torch::Device &device, ModelRuntime runtime) : model(nullptr)
    {
        torch::manual_seed(config.seed);
        runtime.fusedAttention = config.train.attention != AttentionImpl::Math && compat::hasScaledDotProductAttention();
        runtime.recompute = config.train.recompute;
        model = DecoderModel(config, runtime, device);
        model->initialise(config.seed);
        model->train();
        optimizer = makeOptimizer(config.train.optimizer, model->trainableParameters());
        const auto tokens = torch::randint(0, config.model.vocabSize, {config.train.microBatch, config.train.seqLen + 1},
                                           torch::TensorOptions().dtype(torch::kLong).device(device));
        inputs = tokens.slice(1, 0, config.train.seqLen).contiguous();
        targets = tokens.slice(1, 1).contiguous();
        // As the engine (PilotSteps.cpp): fp8's bf16 parts run under bf16 autocast too.
        autocast = config.train.precision == Precision::Bf16Mixed || isFp8(config.train.precision);
    }
    torch::Tensor loss()
    {
        const compat::AutocastGuard guard(inputs.device().type(), autocast, at::kBFloat16);
        return model->loss(inputs, targets);
    }
    DecoderModel model;
    std::unique_ptr<TrainingOptimizer> optimizer;
    torch::Tensor inputs, targets;
    bool autocast = false;
};

double timedMs(const torch::Device &device, int warmup, int steps, const std::function<void()> &step)
{
    for (int i = 0; i < warmup; ++i)
        step();
    sync(device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
        step();
    sync(device);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
}

double bareLoopMs(const RunConfig &config, const torch::Device &device, int warmup, int steps, const std::string &trace = {}, ModelRuntime runtime = {})
{
    BareSetup bare(config, device, runtime);
    auto &optimizer = bare.optimizer;
    auto step = [&] {
        bare.loss().backward();
        // Clipping as the engine does it (PilotSteps.cpp): one multi-tensor norm, the factor handed
        // to the optimizer (fused AdamW divides by it in its own pass).
        double gradScale = 1.0;
        if (config.train.gradClip > 0)
            gradScale = clipScale(totalGradNorm(optimizer->parameters()), config.train.gradClip);
        optimizer->step(config.train.optimizer.lr, gradScale);
        optimizer->zeroGrad();
    };
    const double ms = timedMs(device, warmup, steps, step);
    if (!trace.empty()) {
        const bool written = compat::traceToFile(trace, [&] {
            step();
            step();
            sync(device);
        });
        std::printf(written ? "trace of 2 bare steps: %s\n" : "no trace (%s): the C++ profiler needs LibTorch 2.x\n", trace.c_str());
    }
    return ms;
}

// The bare step with nothing read by the host (the loss's count, clipping and the rate on the
// device: what a CUDA graph needs), timed as it is and replayed from a graph of it, in one process.
// Returns {device-side step, graph replay} in ms; the replay is 0 with `failure` set where the
// capture failed.
std::pair<double, double> graphLoopMs(const RunConfig &config, const torch::Device &device, int warmup, int steps, std::string &failure)
{
    BareSetup bare(config, device, {});
    auto &optimizer = bare.optimizer;
    if (!optimizer->stepsOnDevice())
        throw std::runtime_error("--graph-ab needs fused AdamW with a tensor rate (optimizer adamw, a CUDA device, LibTorch 2.2 or later); the optimizer here is " +
                                 optimizer->path());
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    const auto lr = torch::full({}, config.train.optimizer.lr, f32);
    // The optimizer's state comes from one host-valued step (a graph must not make it).
    bare.loss().backward();
    optimizer->step(config.train.optimizer.lr);
    auto step = [&] {
        optimizer->zeroGrad(); // host-side only: the captured backward then writes fresh gradients
        bare.loss().backward();
        const auto &params = optimizer->parameters();
        torch::Tensor divisor = torch::ones({}, f32), skip = torch::zeros({}, f32);
        if (config.train.gradClip > 0) {
            const auto norm = totalGradNormOnDevice(params);
            divisor = clipDivisorOnDevice(norm, config.train.gradClip);
            skip = norm.isfinite().logical_not().to(torch::kFloat);
        }
        optimizer->stepOnDevice(lr, divisor, skip);
    };
    const double deviceMs = timedMs(device, warmup, steps, step);
    StepGraph graph(device);
    try {
        graph.capture(step, 3);
    } catch (const std::exception &e) {
        failure = e.what();
        return {deviceMs, 0.0};
    }
    const double graphMs = timedMs(device, warmup, steps, [&] { graph.replay(); });
    return {deviceMs, graphMs};
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    auto value = [&](const char *name, const QString &fallback) {
        const int i = static_cast<int>(args.indexOf(QLatin1String(name)));
        return i >= 0 && i + 1 < args.size() ? args[i + 1] : fallback;
    };
    QStringList overrides;
    for (int i = 1; i + 1 < args.size(); ++i)
        if (args[i] == QLatin1String("--set"))
            overrides << args[i + 1];
    const std::string deviceName = value("--device", QStringLiteral("cpu")).toStdString();
    const QString preset = value("--preset", deviceName == "cpu" ? QStringLiteral("small") : QStringLiteral("llama-3.2-1b"));
    const int steps = value("--steps", QStringLiteral("10")).toInt();
    const int warmup = 3;
    RunConfig config = loadRunConfig(QStringLiteral("preset:") + preset, overrides);
    config.data.longestFirst = false;
    const torch::Device device(deviceName);

    // A/B of one runtime switch on the bare fused step, alternated twice so drift hits both; the best of each.
    auto ab = [&](const char *what, const char *off, const char *on, auto set) {
        ModelRuntime a, b;
        set(a, false);
        set(b, true);
        double offMs = 1e30, onMs = 1e30;
        for (int round = 0; round < 2; ++round) {
            offMs = std::min(offMs, bareLoopMs(config, device, warmup, steps, {}, a));
            onMs = std::min(onMs, bareLoopMs(config, device, warmup, steps, {}, b));
        }
        std::printf("preset %s on %s, %d measured steps: %s %s %.2f ms, %s %.2f ms, %.3fx\n", qPrintable(preset), deviceName.c_str(), steps, what, off, offMs, on,
                    onMs, offMs / onMs);
    };
    if (args.contains(QStringLiteral("--residual-ab"))) {
        ab("residual add", "apart", "folded into the norm", [](ModelRuntime &r, bool on) { r.foldResidualAdd = on; });
        return 0;
    }
    if (args.contains(QStringLiteral("--mixed-linear-ab"))) {
        ab("projections", "autocast's linear", "one MixedLinear node a group", [](ModelRuntime &r, bool on) { r.mixedLinear = on; });
        return 0;
    }
    if (args.contains(QStringLiteral("--lora-node-ab"))) {
        ab("LoRA adapters", "added by withAdapter", "inside the MixedLinear node", [](ModelRuntime &r, bool on) { r.adaptersInNode = on; });
        return 0;
    }
    if (args.contains(QStringLiteral("--loss-chunk-ab"))) {
        // The fused loss's chunk as the budget makes it against a chunk of N tokens.
        const int64_t tokens = value("--loss-chunk-ab", QStringLiteral("0")).toLongLong();
        ab("fused loss chunk", "by the budget", qPrintable(QStringLiteral("of %1 tokens").arg(tokens)),
           [tokens](ModelRuntime &r, bool on) { r.lossChunkTokens = on ? tokens : 0; });
        return 0;
    }
    if (args.contains(QStringLiteral("--graph-ab"))) {
        // The engine's bare step, the same with nothing read by the host, and its CUDA graph; twice, the best of each.
        double hostMs = 1e30, deviceMs = 1e30, graphMs = 1e30;
        std::string failure;
        try {
            for (int round = 0; round < 2 && failure.empty(); ++round) {
                hostMs = std::min(hostMs, bareLoopMs(config, device, warmup, steps));
                const auto [d, g] = graphLoopMs(config, device, warmup, steps, failure);
                deviceMs = std::min(deviceMs, d);
                if (failure.empty())
                    graphMs = std::min(graphMs, g);
            }
        } catch (const std::exception &e) {
            std::fprintf(stderr, "%s\n", e.what());
            return 2;
        }
        if (!failure.empty()) {
            std::printf("preset %s on %s: bare step %.2f ms, device-side step %.2f ms; no graph: %s\n", qPrintable(preset), deviceName.c_str(), hostMs, deviceMs,
                        failure.c_str());
            return 1;
        }
        std::printf("preset %s on %s, %d measured steps: bare step %.2f ms, device-side step %.2f ms (%.3fx), CUDA graph %.2f ms (%.3fx)\n", qPrintable(preset),
                    deviceName.c_str(), steps, hostMs, deviceMs, hostMs / deviceMs, graphMs, hostMs / graphMs);
        return 0;
    }
    if (args.contains(QStringLiteral("--window-ab"))) {
        ab("sliding layers", "on SDPA's mask", "on flash's window", [](ModelRuntime &r, bool on) { r.windowKernel = on; });
        return 0;
    }
    PilotEngine engine;
    PilotOptions options;
    options.device = deviceName;
    options.steps = steps;
    options.warmupSteps = warmup;
    double instrumented[2], bare[2];
    for (int round = 0; round < 2; ++round) {
        bare[round] = bareLoopMs(config, device, warmup, steps, round == 1 ? value("--trace", QString()).toStdString() : std::string());
        const PilotRun run = engine.run(config, options);
        instrumented[round] = run.summary.stepTimeMeanMs;
        std::printf("round %d: bare %.2f ms/step, instrumented %.2f ms/step (verdict %s)\n", round + 1, bare[round], instrumented[round], toString(run.summary.verdict));
    }
    const double b = std::min(bare[0], bare[1]), m = std::min(instrumented[0], instrumented[1]);
    std::printf("preset %s on %s, %d measured steps: bare %.2f ms, instrumented %.2f ms, overhead %.2f%%\n", qPrintable(preset), deviceName.c_str(), steps, b, m,
                (m / b - 1.0) * 100.0);
    return 0;
}
