// Closed-loop check of the memory estimator: a grid of configurations runs through the real
// engine (PilotEngine), and the measured peak allocated tensor bytes are printed against the
// estimate, one row each, with the signed error, then the median and worst absolute error; the
// Accelerate and DeepSpeed formulas for the same rows stand beside them.
//
//   bench_estimator                          CPU grid: tiny and small presets (96 rows)
//   bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b
//   bench_estimator --quick                  one row in four of the grid (both micro-batch sizes)
#include "config/Presets.h"
#include "engine/Environment.h"
#include "engine/PilotEngine.h"
#include "estimate/MemoryEstimator.h"
#include "estimate/ReferenceEstimators.h"

#include <QCoreApplication>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Row {
    std::string label;
    int64_t predicted = 0, measured = 0, accelerate = 0, deepspeed = 0;
    int64_t reserved = 0, deviceUsed = 0;
    std::string phase;
};

double errorPct(int64_t predicted, int64_t measured) { return 100.0 * (static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured); }

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.empty() ? 0.0 : v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

bool torchAtLeast2(const std::string &version) { return !version.empty() && std::atoi(version.c_str()) >= 2; }

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    auto value = [&](const char *name, const QString &fallback) {
        const int i = args.indexOf(QLatin1String(name));
        return i >= 0 && i + 1 < args.size() ? args[i + 1] : fallback;
    };
    const std::string device = value("--device", QStringLiteral("cpu")).toStdString();
    const bool cuda = device.rfind("cuda", 0) == 0;
    const QStringList presets = value("--presets", cuda ? QStringLiteral("llama-3.2-1b,qwen2.5-0.5b") : QStringLiteral("tiny,small")).split(QLatin1Char(','));
    const bool quick = args.contains(QLatin1String("--quick"));

    const pb::Environment env = pb::captureEnvironment(device);
    pb::EstimateOptions options;
    options.device = cuda ? pb::DeviceKind::Cuda : pb::DeviceKind::Cpu;
    options.fusedAttentionAvailable = torchAtLeast2(env.torchVersion);
    std::printf("estimator closed loop on %s (%s), LibTorch %s, fused attention %s\n", device.c_str(), env.deviceName.c_str(),
                env.torchVersion.c_str(), *options.fusedAttentionAvailable ? "available" : "unavailable");

    std::vector<Row> rows;
    int index = 0;
    for (const auto &preset : presets) {
        const pb::RunConfig base = pb::presetConfig(preset);
        // Three sequence lengths up to the preset's own (CPU) or 4096 (GPU), two micro-batches.
        const int64_t top = cuda ? 4096 : base.train.seqLen;
        const std::vector<int64_t> seqs {top / 4, top / 2, top};
        const std::vector<int64_t> micros = cuda ? std::vector<int64_t> {1, 2} : std::vector<int64_t> {1, 4};
        for (auto mode : {pb::TrainMode::Full, pb::TrainMode::Lora})
            for (auto precision : {pb::Precision::Fp32, pb::Precision::Bf16Mixed})
                for (bool recompute : {false, true})
                    for (auto seq : seqs)
                        for (auto micro : micros) {
                            // Quick: one row in four, its place rotating within each group of
                            // four so that both micro-batch sizes are measured.
                            const int at = index++;
                            if (quick && at % 4 != (at / 4) % 4)
                                continue;
                            pb::RunConfig config = base;
                            config.train.mode = mode;
                            config.train.precision = precision;
                            config.train.recompute = recompute;
                            config.train.seqLen = seq;
                            config.train.microBatch = micro;
                            config.train.gradAccum = 1;
                            config.validation.everySteps = 0;
                            config.checkpoint.everySteps = 0;
                            Row row;
                            row.label = preset.toStdString() + " " + pb::toString(mode) + " " + pb::toString(precision) + (recompute ? " rc" : "   ") +
                                        " T=" + std::to_string(seq) + " B=" + std::to_string(micro);
                            const pb::MemoryEstimate estimate = pb::estimateMemory(config, options);
                            row.predicted = estimate.peakAllocatedBytes;
                            row.phase = estimate.peakPhase;
                            row.accelerate = pb::accelerateTrainingBytes(config);
                            row.deepspeed = pb::deepSpeedModelStatesBytes(config, pb::ParallelStrategy::None, 1);
                            pb::PilotOptions opts;
                            opts.device = device;
                            opts.steps = 2;
                            opts.warmupSteps = 1;
                            pb::PilotEngine engine;
                            const pb::PilotRun run = engine.run(config, opts, nullptr);
                            if (run.summary.verdict != pb::Verdict::Fits) {
                                std::printf("%-44s  pilot %s: %s\n", row.label.c_str(), pb::toString(run.summary.verdict), run.summary.message.c_str());
                                continue;
                            }
                            // The training steps' peak (warm-up and measured): the summary's overall
                            // peak also covers model construction, which is not a training step.
                            const auto &byPhase = run.summary.peakAllocatedByPhase;
                            for (const char *phase : {"warmup", "train"})
                                if (const auto it = byPhase.find(phase); it != byPhase.end())
                                    row.measured = std::max(row.measured, it->second);
                            row.reserved = run.summary.peakReservedBytes;
                            row.deviceUsed = run.summary.peakDeviceUsedBytes;
                            rows.push_back(row);
                            std::printf("%-44s  predicted %9.2f MiB  measured %9.2f MiB  error %+6.2f%%  (%-8s)  accelerate %+8.1f%%  deepspeed %+8.1f%%",
                                        row.label.c_str(), mib(row.predicted), mib(row.measured), errorPct(row.predicted, row.measured), row.phase.c_str(),
                                        errorPct(row.accelerate, row.measured), errorPct(row.deepspeed, row.measured));
                            if (cuda)
                                std::printf("  reserved %9.2f MiB  device used %9.2f MiB  (used - reserved %7.2f MiB)", mib(row.reserved), mib(row.deviceUsed),
                                            mib(row.deviceUsed - row.reserved));
                            std::printf("\n");
                            std::fflush(stdout);
                        }
    }
    std::vector<double> ours, acc, ds;
    for (const auto &r : rows) {
        ours.push_back(std::fabs(errorPct(r.predicted, r.measured)));
        acc.push_back(std::fabs(errorPct(r.accelerate, r.measured)));
        ds.push_back(std::fabs(errorPct(r.deepspeed, r.measured)));
    }
    auto worst = [](const std::vector<double> &v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
    std::printf("\nrows %zu\n", rows.size());
    std::printf("absolute error    median %7.2f%%  worst %7.2f%%   (PilotBench estimator, uncalibrated)\n", median(ours), worst(ours));
    std::printf("                  median %7.2f%%  worst %7.2f%%   (Accelerate estimate-memory formula)\n", median(acc), worst(acc));
    std::printf("                  median %7.2f%%  worst %7.2f%%   (DeepSpeed model-states formula)\n", median(ds), worst(ds));
    return rows.empty() ? 1 : 0;
}
