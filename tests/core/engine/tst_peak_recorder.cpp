// The peak recorder through the pilot engine on CPU: one warm-up step's peak attributed to its
// parts, checked against what the model and optimizer hold and against the allocator's own peak.
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "engine/PilotEngine.h"

#include <QtTest>

#include <map>

using namespace pb;

namespace {

struct StepPeaks final : PilotObserver {
    std::map<int64_t, int64_t> peak;
    void stepFinished(const StepSample &s) override { peak[s.step] = s.peakAllocatedBytes; }
};

RunConfig tiny(Precision precision = Precision::Fp32)
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.precision = precision;
    c.train.microBatch = 4;
    c.train.seqLen = 64;
    return c;
}

// The engine keeps trainable weights in fp32 (outside pure bf16) and frozen ones in the compute dtype.
int64_t parameterBytes(const RunConfig &config, bool trainable)
{
    int64_t n = 0;
    for (const auto &p : parameterTable(config))
        if (p.trainable == trainable)
            n += p.numel;
    return n * (trainable || config.train.precision == Precision::Fp32 ? 4 : 2);
}

int64_t partsSum(const MemoryAttribution &a)
{
    int64_t sum = 0;
    for (auto bytes : a.parts)
        sum += bytes;
    return sum;
}

int64_t sitesSum(const MemoryAttribution &a)
{
    int64_t sum = 0;
    for (const auto &s : a.sites)
        sum += s.bytes;
    return sum;
}

PilotRun runPilot(const RunConfig &config, StepPeaks &peaks, int64_t warmup = 2, bool attribute = true)
{
    PilotEngine engine;
    PilotOptions options;
    options.warmupSteps = warmup;
    options.steps = 1;
    options.attributePeak = attribute;
    return engine.run(config, options, &peaks);
}

} // namespace

class TestPeakRecorder : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { qputenv("OMP_NUM_THREADS", "1"); }

    void fullTrainingPeakByPart()
    {
        const RunConfig config = tiny();
        StepPeaks peaks;
        const PilotRun run = runPilot(config, peaks);
        QCOMPARE(run.summary.verdict, Verdict::Fits);
        QVERIFY(run.summary.memoryAttribution.has_value());
        const MemoryAttribution &a = *run.summary.memoryAttribution;
        QCOMPARE(a.step, int64_t(2)); // the last warm-up step
        QCOMPARE(a.device, std::string("cpu"));
        // The recorder's peak is the allocator's: the step's own peak statistic.
        QCOMPARE(a.peakAllocatedBytes, peaks.peak.at(2));
        QCOMPARE(partsSum(a), a.peakAllocatedBytes);
        QVERIFY2(sitesSum(a) <= a.peakAllocatedBytes, "a byte counted twice");
        QCOMPARE(a.part(MemoryPart::TrainableWeights), parameterBytes(config, true));
        QCOMPARE(a.part(MemoryPart::FrozenWeights), int64_t(0));
        QCOMPARE(a.part(MemoryPart::WeightCasts), int64_t(0)); // fp32: no autocast
        // AdamW keeps two fp32 moments per trainable weight.
        QCOMPARE(a.part(MemoryPart::Optimizer), 2 * parameterBytes(config, true));
        QVERIFY(a.part(MemoryPart::Activations) > 0);
        QVERIFY(a.part(MemoryPart::Logits) > 0);
        // Only the loader thread's batches go unseen.
        QVERIFY2(a.part(MemoryPart::Other) < a.peakAllocatedBytes / 50, qPrintable(QString::number(a.part(MemoryPart::Other))));
        QVERIFY(!a.peakPhase.empty() && !a.peakSite.empty());
        for (size_t i = 1; i < a.sites.size(); ++i)
            QVERIFY(a.sites[i - 1].bytes >= a.sites[i].bytes);
        bool attention = false;
        for (const auto &s : a.sites)
            attention = attention || (s.phase == "forward" && s.scope == "attention" && s.part == MemoryPart::Activations && s.bytes > 0);
        QVERIFY2(attention, "the attention scope's saved tensors are named");
        // The live tensors are the sites made in the step, one by one, each placed in its layer:
        // every layer's attention keeps its own tensors, and the head and loss belong to none.
        // In the order made: the forward's tensors of layer i all come before layer i + 1's.
        std::map<int64_t, int64_t> attentionByLayer;
        int64_t lastForwardLayer = -1;
        for (const auto &t : a.live) {
            QCOMPARE(t.blocks, int64_t(1));
            QVERIFY(t.layer >= -1 && t.layer < config.model.layers);
            if (t.phase == "forward" && t.layer >= 0) {
                QVERIFY2(t.layer >= lastForwardLayer, "the live tensors are not in the order made");
                lastForwardLayer = t.layer;
            }
            if (t.scope == "attention" && t.phase == "forward")
                attentionByLayer[t.layer] += t.bytes;
            if (t.scope == "head" || t.scope == "embedding")
                QCOMPARE(t.layer, int64_t(-1));
        }
        QCOMPARE(static_cast<int64_t>(attentionByLayer.size()), config.model.layers);
        for (const auto &[layer, bytes] : attentionByLayer) {
            QVERIFY(layer >= 0);
            QCOMPARE(bytes, attentionByLayer.begin()->second); // the same block kept the same bytes
        }
    }

    // Under recompute a block's tensors are made again in the backward, by the block's own forward:
    // they keep their layer, and the backward nodes' allocations take the layer of the forward op
    // that made the node.
    void recomputedBlocksKeepTheirLayer()
    {
        RunConfig config = tiny();
        config.train.recompute = true;
        StepPeaks peaks;
        const PilotRun run = runPilot(config, peaks);
        QCOMPARE(run.summary.verdict, Verdict::Fits);
        const MemoryAttribution &a = *run.summary.memoryAttribution;
        QCOMPARE(a.peakPhase, std::string("backward"));
        bool rebuilt = false;
        for (const auto &t : a.live) {
            // A rebuilt block's nodes are booked to the scope that made them, not to their own name.
            QVERIFY2(t.scope.find("Backward") == std::string::npos || t.layer < 0, qPrintable(QString::fromStdString(t.scope)));
            rebuilt = rebuilt || (t.phase == "backward" && t.layer >= 0 && (t.scope == "attention" || t.scope == "mlp"));
            // Whatever a block's scopes made, in its forward or its nodes' backward, is in a layer.
            if (t.scope == "attention" || t.scope == "mlp" || t.scope == "norm" || t.scope == "block")
                QVERIFY2(t.layer >= 0, qPrintable(QString::fromStdString(t.phase + " " + t.scope + " / " + t.op)));
        }
        QVERIFY2(rebuilt, "a rebuilt block's tensors carry its layer");
    }

    void loraFreezesBaseAndCastsUnderAutocast()
    {
        RunConfig config = tiny(Precision::Bf16Mixed);
        config.train.mode = TrainMode::Lora;
        config.train.lora.rank = 4;
        StepPeaks peaks;
        const PilotRun run = runPilot(config, peaks);
        QCOMPARE(run.summary.verdict, Verdict::Fits);
        const MemoryAttribution &a = *run.summary.memoryAttribution;
        QCOMPARE(a.peakAllocatedBytes, peaks.peak.at(2));
        QCOMPARE(a.part(MemoryPart::FrozenWeights), parameterBytes(config, false));
        QCOMPARE(a.part(MemoryPart::TrainableWeights), parameterBytes(config, true));
        QCOMPARE(a.part(MemoryPart::Optimizer), 2 * parameterBytes(config, true));
        // CPU autocast runs the projections in bf16: the copies of the weights saved for backward
        // are weight casts, not activations.
        QVERIFY2(a.part(MemoryPart::WeightCasts) > 0, "no weight casts under autocast");
        QVERIFY(sitesSum(a) <= a.peakAllocatedBytes);
        bool lora = false;
        for (const auto &s : a.sites)
            lora = lora || s.scope == "lora";
        QVERIFY2(lora, "the adapters' own allocations are named");
    }

    void withoutWarmupTheFirstStepIsAttributed()
    {
        StepPeaks peaks;
        const PilotRun run = runPilot(tiny(), peaks, 0);
        QVERIFY(run.summary.memoryAttribution.has_value());
        QCOMPARE(run.summary.memoryAttribution->step, int64_t(1));
        QCOMPARE(run.summary.memoryAttribution->peakAllocatedBytes, peaks.peak.at(1));
    }

    void offMeansNone()
    {
        StepPeaks peaks;
        const PilotRun run = runPilot(tiny(), peaks, 1, false);
        QCOMPARE(run.summary.verdict, Verdict::Fits);
        QVERIFY(!run.summary.memoryAttribution.has_value());
    }
};

QTEST_GUILESS_MAIN(TestPeakRecorder)
#include "tst_peak_recorder.moc"
