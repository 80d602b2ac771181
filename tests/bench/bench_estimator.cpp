// Closed-loop check of the memory estimator: a grid of configurations runs through the real
// engine (PilotEngine), and the measured peak allocated tensor bytes are printed against the
// estimate, one row each, with the signed error, then the median and worst absolute error; the
// Accelerate and DeepSpeed formulas for the same rows stand beside them.
//
//   bench_estimator                          CPU grid: tiny and small presets (96 rows)
//   bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b
//   bench_estimator --quick                  one row in four of the grid (both micro-batch sizes)
//   bench_estimator --device cuda:0 --architectures [--part K/N] [--list]
//       a grid across architectures rather than sizes (issue 18): MHA and GQA (kv ratios 1 to 8),
//       tied and untied heads, vocabularies of 32k to 256k, hidden sizes 896 to 4096, LoRA ranks
//       8 to 128 on attention or all linears, recompute, micro-batch 1 to 16, sequence 512 to
//       8192, fp32 / bf16-mixed / pure bf16; shapes from the HF configs in tests/data/hf and our
//       own, layers cut so a row fits one card. --part K/N runs rows K, K+N, ... so sessions can
//       rotate through it. Each row also prints the part (weights, activations, ...) whose
//       estimate is furthest from the pilot's measured attribution, and the summary groups the
//       errors by architecture trait and gives the calibrated error (one row calibrating another).
//   ... --kernels fused                      every row with train.kernels = fused
#include "config/HfImport.h"
#include "config/Presets.h"
#include "engine/Environment.h"
#include "engine/PilotEngine.h"
#include "estimate/MemoryEstimator.h"
#include "estimate/ReferenceEstimators.h"

#include <QCoreApplication>
#include <QStringList>

#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Row {
    std::string label;
    std::vector<std::string> traits;
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

struct Shape {
    std::string name;
    pb::RunConfig config;
};

pb::RunConfig withShape(pb::RunConfig c, int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t inter, int64_t vocab, bool tied, int64_t headDim = 0)
{
    auto &m = c.model;
    m.layers = layers;
    m.hiddenSize = hidden;
    m.attentionHeads = heads;
    m.kvHeads = kv;
    m.headDim = headDim;
    m.intermediateSize = inter;
    m.vocabSize = vocab;
    m.tieEmbeddings = tied;
    m.maxPositions = std::max<int64_t>(m.maxPositions, 8192);
    return c;
}

std::vector<Shape> architectureShapes()
{
    const QString hf = QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/");
    auto imported = [&](const char *folder, int64_t layers) {
        pb::RunConfig c = pb::importHfConfig(hf + QLatin1String(folder) + QStringLiteral("/config.json"));
        c.model.layers = layers;
        c.model.maxPositions = std::max<int64_t>(c.model.maxPositions, 8192);
        return c;
    };
    const pb::RunConfig llama = pb::presetConfig(QStringLiteral("llama-3.2-1b"));
    return {
        {"qwen2.5-0.5b (gqa 7, tied, 152k, h896)", pb::presetConfig(QStringLiteral("qwen2.5-0.5b"))},
        {"llama-3.2-1b (gqa 4, tied, 128k, h2048)", llama},
        {"mha-1.7b (mha, tied, 49k, h2048)", withShape(llama, 24, 2048, 32, 32, 8192, 49152, true)},
        {"llama-3.1-8b/4L (gqa 4, untied, 128k, h4096)", imported("llama-3.1-8b", 4)},
        {"mistral-7b/4L (gqa 4, untied, 32k, h4096)", imported("mistral-7b-v0.3", 4)},
        {"qwen2.5-7b/4L (gqa 7, untied, 152k, h3584)", imported("qwen2.5-7b", 4)},
        {"gqa8-256k (gqa 8, tied, 256k, h2048, hd256)", withShape(llama, 6, 2048, 8, 1, 16384, 256000, true, 256)},
        {"mha-3b-untied (mha, untied, 32k, h3072)", withShape(llama, 8, 3072, 24, 24, 8192, 32064, false)},
    };
}

// A fixed, varied walk through the run settings: each setting steps with the row at its own rate
// and offset per shape, so every value appears and the combinations differ from shape to shape.
// Tokens per micro-batch are capped at 32k (micro-batch cut) so rows stay on one card.
pb::RunConfig varied(const pb::RunConfig &base, int shape, int i, std::vector<std::string> &traits)
{
    pb::RunConfig c = base;
    static const pb::Precision precisions[] {pb::Precision::Bf16Mixed, pb::Precision::Fp32, pb::Precision::Bf16};
    static const int64_t seqs[] {512, 2048, 8192, 1024, 4096};
    static const int64_t micros[] {1, 2, 4, 8, 16};
    static const int64_t ranks[] {8, 16, 64, 128};
    const int mode = i % 3; // full, LoRA on attention, LoRA on all linears
    c.train.precision = precisions[(i / 3 + shape) % 3];
    c.train.recompute = (i + shape) % 2 == 1;
    c.train.seqLen = seqs[(i * 2 + shape) % 5];
    c.train.microBatch = std::max<int64_t>(1, std::min<int64_t>(micros[(i * 3 + shape * 2) % 5], 32768 / c.train.seqLen));
    c.train.mode = mode == 0 ? pb::TrainMode::Full : pb::TrainMode::Lora;
    if (mode != 0) {
        c.train.lora.rank = ranks[(i + shape) % 4];
        c.train.lora.alpha = 2.0 * static_cast<double>(c.train.lora.rank);
        c.train.lora.targets = mode == 1 ? std::vector<std::string> {"q_proj", "k_proj", "v_proj", "o_proj"} : std::vector<std::string> {"all-linear"};
    }
    const int64_t kvRatio = c.model.attentionHeads / std::max<int64_t>(c.model.kvHeads, 1);
    traits = {kvRatio == 1 ? "mha" : "gqa " + std::to_string(kvRatio), c.model.tieEmbeddings ? "tied" : "untied",
              "vocab " + std::to_string(c.model.vocabSize / 1000) + "k", "hidden " + std::to_string(c.model.hiddenSize),
              mode == 0 ? "full" : (mode == 1 ? "lora attn r" : "lora all r") + std::to_string(c.train.lora.rank), pb::toString(c.train.precision),
              c.train.recompute ? "recompute" : "no recompute", "seq " + std::to_string(c.train.seqLen), "mb " + std::to_string(c.train.microBatch)};
    return c;
}

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
    const bool list = args.contains(QLatin1String("--list")); // print the rows and their estimates only
    // --kernels fused: every row with train.kernels = fused (on CUDA the estimate assumes the kernels).
    const bool fusedKernels = value("--kernels", QStringLiteral("eager")) == QLatin1String("fused");

    const pb::Environment env = pb::captureEnvironment(device);
    pb::EstimateOptions options;
    options.device = cuda || list ? pb::DeviceKind::Cuda : pb::DeviceKind::Cpu;
    options.fusedAttentionAvailable = torchAtLeast2(env.torchVersion) || list; // --list: as a CUDA host would run the rows
    std::printf("estimator closed loop on %s (%s), LibTorch %s, fused attention %s\n", device.c_str(), env.deviceName.c_str(),
                env.torchVersion.c_str(), *options.fusedAttentionAvailable ? "available" : "unavailable");

    std::vector<Row> rows;
    int index = 0;
    auto measure = [&](pb::RunConfig config, Row row) {
        config.train.gradAccum = 1;
        if (fusedKernels) {
            config.train.kernels = pb::KernelPath::Fused;
            row.label += " fused";
        }
        config.validation.everySteps = 0;
        config.checkpoint.everySteps = 0;
        const pb::MemoryEstimate estimate = pb::estimateMemory(config, options);
        row.predicted = estimate.peakAllocatedBytes;
        row.phase = estimate.peakPhase;
        row.accelerate = pb::accelerateTrainingBytes(config);
        row.deepspeed = pb::deepSpeedModelStatesBytes(config, pb::ParallelStrategy::None, 1);
        // A row the estimate puts beyond the device is skipped, not run into an out-of-memory.
        const int64_t capacity = cuda ? env.deviceMemoryBytes : 0;
        if (list || (capacity > 0 && estimate.totalBytes > capacity * 95 / 100)) {
            std::printf("%-60s  predicted %9.2f MiB (device total %9.2f MiB)%s\n", row.label.c_str(), mib(row.predicted), mib(estimate.totalBytes),
                        list ? "" : "  skipped: beyond the device");
            return;
        }
        pb::PilotOptions opts;
        opts.device = device;
        opts.steps = 1;
        opts.warmupSteps = 2;
        pb::PilotEngine engine;
        const pb::PilotRun run = engine.run(config, opts, nullptr);
        if (run.summary.verdict != pb::Verdict::Fits) {
            std::printf("%-60s  predicted %9.2f MiB  pilot %s: %.160s\n", row.label.c_str(), mib(row.predicted), pb::toString(run.summary.verdict), run.summary.message.c_str());
            return;
        }
        // The training steps' peak (warm-up and measured): the summary's overall peak also covers
        // model construction, which is not a training step.
        const auto &byPhase = run.summary.peakAllocatedByPhase;
        for (const char *phase : {"warmup", "train"})
            if (const auto it = byPhase.find(phase); it != byPhase.end())
                row.measured = std::max(row.measured, it->second);
        row.reserved = run.summary.peakReservedBytes;
        row.deviceUsed = run.summary.peakDeviceUsedBytes;
        std::printf("%-60s  predicted %9.2f MiB  measured %9.2f MiB  error %+6.2f%%  (%-8s)  accelerate %+8.1f%%  deepspeed %+8.1f%%", row.label.c_str(),
                    mib(row.predicted), mib(row.measured), errorPct(row.predicted, row.measured), row.phase.c_str(), errorPct(row.accelerate, row.measured),
                    errorPct(row.deepspeed, row.measured));
        if (cuda)
            std::printf("  reserved %9.2f MiB  device used %9.2f MiB  (used - reserved %7.2f MiB)", mib(row.reserved), mib(row.deviceUsed), mib(row.deviceUsed - row.reserved));
        if (run.summary.memoryAttribution) {
            // The part the estimate misses most, against the measured attribution of the peak.
            const pb::MemoryBreakdown m = pb::measuredBreakdown(*run.summary.memoryAttribution), &e = estimate.breakdown;
            const std::pair<const char *, int64_t> parts[] {{"weights", e.weights() - m.weights()}, {"gradients", e.gradients - m.gradients},
                                                            {"optimizer", e.optimizer - m.optimizer}, {"activations", e.activations - m.activations},
                                                            {"logits", e.logits - m.logits}};
            const auto worst = *std::max_element(std::begin(parts), std::end(parts), [](const auto &a, const auto &b) { return std::llabs(a.second) < std::llabs(b.second); });
            std::printf("  largest part gap: %s %+.1f MiB (measured peak in %s at %s)", worst.first, mib(worst.second), run.summary.memoryAttribution->peakPhase.c_str(),
                        run.summary.memoryAttribution->peakSite.c_str());
        }
        std::printf("\n");
        std::fflush(stdout);
        rows.push_back(row);
    };
    if (args.contains(QLatin1String("--architectures"))) {
        const QStringList part = value("--part", QStringLiteral("0/1")).split(QLatin1Char('/'));
        const int k = part.value(0).toInt(), every = std::max(1, part.value(1).toInt());
        const auto shapes = architectureShapes();
        for (size_t s = 0; s < shapes.size(); ++s)
            for (int i = 0; i < 8; ++i) {
                const int at = index++;
                if (at % every != k)
                    continue;
                Row row;
                const pb::RunConfig config = varied(shapes[s].config, static_cast<int>(s), i, row.traits);
                row.label = shapes[s].name + " |";
                for (size_t t = 4; t < row.traits.size(); ++t)
                    row.label += " " + row.traits[t];
                measure(config, row);
            }
    }
    for (const auto &preset : args.contains(QLatin1String("--architectures")) ? QStringList {} : presets) {
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
                            Row row;
                            row.label = preset.toStdString() + " " + pb::toString(mode) + " " + pb::toString(precision) + (recompute ? " rc" : "   ") +
                                        " T=" + std::to_string(seq) + " B=" + std::to_string(micro);
                            measure(config, row);
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
    // By architecture trait: our error beside Accelerate's and DeepSpeed's.
    std::map<std::string, std::vector<const Row *>> byTrait;
    for (const auto &r : rows)
        for (size_t t = 0; t < std::min<size_t>(r.traits.size(), 7); ++t)
            byTrait[r.traits[t]].push_back(&r);
    if (!byTrait.empty())
        std::printf("\n%-18s %5s  %-24s  %-24s  %-24s\n", "trait", "rows", "ours median/worst", "accelerate median/worst", "deepspeed median/worst");
    for (const auto &[trait, members] : byTrait) {
        std::vector<double> o, a, d;
        for (const Row *r : members) {
            o.push_back(std::fabs(errorPct(r->predicted, r->measured)));
            a.push_back(std::fabs(errorPct(r->accelerate, r->measured)));
            d.push_back(std::fabs(errorPct(r->deepspeed, r->measured)));
        }
        std::printf("%-18s %5zu  %8.2f%% / %8.2f%%     %8.2f%% / %8.2f%%     %8.2f%% / %8.2f%%\n", trait.c_str(), members.size(), median(o), worst(o), median(a), worst(a),
                    median(d), worst(d));
    }
    // Calibrated: one stored pilot (row j) scales the estimate of every other row i on this device,
    // as the estimator applies a stored residual (predicted x measured/predicted of j).
    std::vector<double> calibrated;
    for (size_t i = 0; i < rows.size(); ++i)
        for (size_t j = 0; j < rows.size(); ++j)
            if (i != j) {
                const double ratio = static_cast<double>(rows[j].measured) / static_cast<double>(rows[j].predicted);
                calibrated.push_back(std::fabs(errorPct(static_cast<int64_t>(std::llround(static_cast<double>(rows[i].predicted) * ratio)), rows[i].measured)));
            }
    if (!calibrated.empty())
        std::printf("\ncalibrated by one other row (%zu pairs): median %.2f%%  worst %.2f%%\n", calibrated.size(), median(calibrated), worst(calibrated));
    return rows.empty() ? 1 : 0;
}
