// Overhead of the pilot's probes: the engine's instrumented step (synchronised phase timing, memory
// reads, loader thread, history-free) against a bare LibTorch loop of the same model, optimizer and
// precision that synchronises once at the end. Prints both and their ratio, measured in one run.
//   bench_probe_overhead [--device cuda:0] [--preset llama-3.2-1b] [--steps 10] [--set PATH=VALUE ...] [--trace FILE] [--residual-ab]
//                        [--window-ab] [--loss-chunk-ab TOKENS]
// --residual-ab instead times the bare fused step with the residual add apart and folded into the
// norm (issue 34), in one run; --window-ab the sliding layers on SDPA's mask and on flash's own
// window (model/WindowedAttention.h, issue 28); --loss-chunk-ab the fused loss's chunk as its memory
// budget makes it and of TOKENS tokens.
// --trace also writes a Kineto trace of two more bare steps (LibTorch 2.x), which
// tests/bench/trace_top_kernels.py ranks by kernel time.
#include "config/RunConfigJson.h"
#include "engine/GradClip.h"
#include "engine/Optimizer.h"
#include "engine/PilotEngine.h"
#include "engine/TorchCompat.h"
#include "model/Transformer.h"

#include <QCoreApplication>

#include <algorithm>
#include <chrono>
#include <cstdio>

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

double bareLoopMs(const RunConfig &config, const torch::Device &device, int warmup, int steps, const std::string &trace = {}, ModelRuntime runtime = {})
{
    torch::manual_seed(config.seed);
    runtime.fusedAttention = config.train.attention != AttentionImpl::Math && compat::hasScaledDotProductAttention();
    runtime.recompute = config.train.recompute;
    DecoderModel model(config, runtime, device);
    model->initialise(config.seed);
    model->train();
    auto optimizer = makeOptimizer(config.train.optimizer, model->trainableParameters());
    const auto tokens = torch::randint(0, config.model.vocabSize, {config.train.microBatch, config.train.seqLen + 1},
                                       torch::TensorOptions().dtype(torch::kLong).device(device));
    const auto inputs = tokens.slice(1, 0, config.train.seqLen).contiguous();
    const auto targets = tokens.slice(1, 1).contiguous();
    // As the engine (PilotSteps.cpp): fp8's bf16 parts run under bf16 autocast too.
    const bool autocast = config.train.precision == Precision::Bf16Mixed || isFp8(config.train.precision);
    auto step = [&] {
        if (autocast)
            compat::setAutocast(device.type(), true, at::kBFloat16);
        auto loss = model->loss(inputs, targets);
        if (autocast)
            compat::setAutocast(device.type(), false, at::kBFloat16);
        loss.backward();
        // Clipping as the engine does it (PilotSteps.cpp): one multi-tensor norm, the factor handed
        // to the optimizer (fused AdamW divides by it in its own pass).
        double gradScale = 1.0;
        if (config.train.gradClip > 0)
            gradScale = clipScale(totalGradNorm(optimizer->parameters()), config.train.gradClip);
        optimizer->step(config.train.optimizer.lr, gradScale);
        optimizer->zeroGrad();
    };
    for (int i = 0; i < warmup; ++i)
        step();
    sync(device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
        step();
    sync(device);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
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
    if (args.contains(QStringLiteral("--loss-chunk-ab"))) {
        // The fused loss's chunk as the budget makes it against a chunk of N tokens.
        const int64_t tokens = value("--loss-chunk-ab", QStringLiteral("0")).toLongLong();
        ab("fused loss chunk", "by the budget", qPrintable(QStringLiteral("of %1 tokens").arg(tokens)),
           [tokens](ModelRuntime &r, bool on) { r.lossChunkTokens = on ? tokens : 0; });
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
