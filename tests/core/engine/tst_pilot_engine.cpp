// The pilot engine through its public API on CPU with the tiny preset.
#include "config/Presets.h"
#include "engine/PilotEngine.h"

#include <ATen/record_function.h>

#include <QtTest>

#include <atomic>
#include <cstring>

using namespace pb;

namespace {

RunConfig tiny()
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.schedule.kind = ScheduleKind::Constant;
    return c;
}

struct CancelAfter final : PilotObserver {
    std::atomic<bool> flag {false};
    int64_t after = 0;
    int64_t steps = 0;
    void stepFinished(const StepSample &) override
    {
        if (++steps >= after)
            flag = true;
    }
};

double mean(const std::vector<double> &v, size_t from, size_t to)
{
    double s = 0;
    for (size_t i = from; i < to; ++i)
        s += v[i];
    return s / static_cast<double>(to - from);
}

} // namespace

class TestPilotEngine : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { qputenv("OMP_NUM_THREADS", "1"); }

    void lossFallsOnLearnableData()
    {
        PilotEngine engine;
        PilotOptions options;
        options.warmupSteps = 0;
        options.steps = 30;
        const PilotRun run = engine.run(tiny(), options);
        QCOMPARE(run.summary.verdict, Verdict::Fits);
        QCOMPARE(run.losses.size(), size_t(30));
        QCOMPARE(run.summary.measuredSteps, int64_t(30));
        // Uniform guessing over 256 tokens is ln(256) = 5.55; a model that learns the progression goes well below.
        QVERIFY2(run.losses.front() > 5.0, qPrintable(QString::number(run.losses.front())));
        QVERIFY2(mean(run.losses, 25, 30) < 0.8 * mean(run.losses, 0, 5), qPrintable(QString::number(mean(run.losses, 25, 30))));
        QVERIFY(run.summary.tokensPerSecond > 0);
        QVERIFY(run.summary.peakAllocatedBytes > 0);
        QVERIFY(run.summary.stepTimeP50Ms <= run.summary.stepTimeP99Ms);
        QVERIFY(!run.summary.mfu.has_value()); // no catalog peak for a CPU
        QVERIFY(run.summary.peakAllocatedByPhase.count("train") == 1);
        QCOMPARE(run.environment.device, std::string("cpu"));
        QVERIFY(!run.environment.torchVersion.empty());
        QVERIFY(run.dataRevision.rfind("sha256:", 0) == 0);
    }

    void peakCoversModelState()
    {
        // fp32 AdamW: weights + gradients + two moments = 16 bytes per parameter at least.
        const RunConfig c = tiny();
        const int64_t params = countParameters(c).total;
        PilotEngine engine;
        PilotOptions options;
        options.warmupSteps = 1;
        options.steps = 2;
        const PilotRun run = engine.run(c, options);
        QVERIFY2(run.summary.peakAllocatedBytes >= 16 * params, qPrintable(QString::number(run.summary.peakAllocatedBytes)));
    }

    void memoryLimitGivesDoesNotFitThenNextRunFits()
    {
        PilotEngine engine;
        PilotOptions limited;
        limited.warmupSteps = 0;
        limited.steps = 2;
        limited.memoryLimitBytes = 1 << 20; // 1 MiB: less than the model state
        const PilotRun failed = engine.run(tiny(), limited);
        QCOMPARE(failed.summary.verdict, Verdict::DoesNotFit);
        QVERIFY(!failed.summary.failedPhase.empty());
        QVERIFY2(QString::fromStdString(failed.summary.message).contains(QStringLiteral("out of memory")), failed.summary.message.c_str());

        PilotOptions free = limited;
        free.memoryLimitBytes = 0;
        const PilotRun ok = engine.run(tiny(), free);
        QCOMPARE(ok.summary.verdict, Verdict::Fits);
    }

    void recomputeLowersThePeak()
    {
        RunConfig c = presetConfig(QStringLiteral("small"));
        c.train.seqLen = 256;
        c.train.microBatch = 2;
        PilotEngine engine;
        PilotOptions options;
        options.warmupSteps = 0;
        options.steps = 1;
        const PilotRun plain = engine.run(c, options);
        c.train.recompute = true;
        const PilotRun recomputed = engine.run(c, options);
        QCOMPARE(plain.summary.verdict, Verdict::Fits);
        QCOMPARE(recomputed.summary.verdict, Verdict::Fits);
        QVERIFY2(recomputed.summary.peakAllocatedBytes < plain.summary.peakAllocatedBytes,
                 qPrintable(QStringLiteral("%1 vs %2").arg(recomputed.summary.peakAllocatedBytes).arg(plain.summary.peakAllocatedBytes)));
        // Same seed, same data: the first loss is the same computation either way.
        QCOMPARE(recomputed.losses.front(), plain.losses.front());
    }

    void cancelStopsWithinAStepAndKeepsWhatItMeasured()
    {
        CancelAfter observer;
        observer.after = 3;
        PilotEngine engine;
        PilotOptions options;
        options.warmupSteps = 0;
        options.steps = 1000;
        options.cancel = &observer.flag;
        const PilotRun run = engine.run(tiny(), options, &observer);
        QCOMPARE(run.summary.verdict, Verdict::Cancelled);
        QCOMPARE(run.summary.measuredSteps, int64_t(3));
        QVERIFY(run.summary.stepTimeMeanMs > 0);
    }

    void divergenceIsAFailureNotAFit()
    {
        // A learning rate this large drives the fp32 weights to inf within a few steps.
        RunConfig c = tiny();
        c.train.optimizer.kind = OptimizerKind::Sgd;
        c.train.optimizer.momentum = 0;
        c.train.optimizer.lr = 1e30;
        c.train.gradClip = 0;
        PilotEngine engine;
        PilotOptions options;
        options.warmupSteps = 0;
        options.steps = 20;
        const PilotRun run = engine.run(c, options);
        QCOMPARE(run.summary.verdict, Verdict::Failed);
        QVERIFY2(QString::fromStdString(run.summary.message).contains(QStringLiteral("not finite")), run.summary.message.c_str());
    }

    // Transformers' clip_grad_norm_ multiplies every gradient by the clamped coefficient, 1
    // included: the eager path makes that pass each step (one multi-tensor multiply: every gradient
    // here is an fp32 CPU one); the fused path does not (it folds a scale below 1 into the optimizer).
    void eagerStepMultipliesEveryGradientAsClipGradNormDoes()
    {
        static std::atomic<int> multiplies {0};
        auto count = [](KernelPath kernels) -> int {
            RunConfig c = tiny();
            c.train.kernels = kernels;
            c.train.gradClip = 1e9; // never reached: the coefficient is 1
            PilotEngine engine;
            PilotOptions options;
            options.warmupSteps = 0;
            options.steps = 3;
            multiplies = 0;
            const auto handle = at::addGlobalCallback(at::RecordFunctionCallback(
                [](const at::RecordFunction &fn) -> std::unique_ptr<at::ObserverContext> {
                    if (std::strcmp(fn.name(), "aten::_foreach_mul_") == 0)
                        ++multiplies;
                    return nullptr;
                }));
            const PilotRun run = engine.run(c, options);
            at::removeCallback(handle);
            return run.summary.verdict == Verdict::Fits ? multiplies.load() : -1000;
        };
        const int eager = count(KernelPath::Eager), fused = count(KernelPath::Fused);
        QVERIFY2(eager - fused == 3, qPrintable(QStringLiteral("eager %1, fused %2 multi-tensor multiplies in 3 steps").arg(eager).arg(fused)));
    }

    void badDeviceIsInvalidInput()
    {
        PilotEngine engine;
        PilotOptions options;
        options.device = "tpu:0";
        QVERIFY_THROWS_EXCEPTION(std::exception, engine.run(tiny(), options));
    }

    void percentileIsNearestRank()
    {
        QCOMPARE(percentile({5, 1, 4, 2, 3}, 50), 3.0);
        QCOMPARE(percentile({5, 1, 4, 2, 3}, 90), 5.0);
        QCOMPARE(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90), 9.0);
        QCOMPARE(percentile({}, 50), 0.0);
    }

    void modelFlopsFollowThePalmConvention()
    {
        // llama-3.2-1b, 8 x 2048 tokens: (6 N + 12 L H T) tokens, N = 1,235,814,400.
        const RunConfig c = presetConfig(QStringLiteral("llama-3.2-1b"));
        const double tokens = 8.0 * 2048;
        const double expected = (6.0 * 1235814400.0 + 12.0 * 16 * 2048 * 2048) * tokens;
        QCOMPARE(modelFlopsPerStep(c, 8 * 2048, 2048), expected);

        // A mixture of experts counts the weights a token meets: the active parameters (qwen3-30b-a3b:
        // 3,340,000,000 and some, where all 30.5B would put MFU past 100% on a fast card), 6 each
        // trained, 4 each frozen under LoRA.
        RunConfig moe = presetConfig(QStringLiteral("qwen3-30b-a3b"));
        const auto counts = countParameters(moe);
        QVERIFY(counts.active < counts.total / 5);
        const double attention = 12.0 * static_cast<double>(moe.model.layers * moe.model.attentionHeads) * moe.model.attentionFlopsHeadDim() * 2048;
        QCOMPARE(modelFlopsPerStep(moe, 2048, 2048), (6.0 * static_cast<double>(counts.active) + attention) * 2048);
        moe.train.mode = TrainMode::Lora;
        const auto lora = countParameters(moe);
        QCOMPARE(modelFlopsPerStep(moe, 2048, 2048), (6.0 * static_cast<double>(lora.trainable) + 4.0 * static_cast<double>(lora.active - lora.trainable) + attention) * 2048);
    }
};

QTEST_GUILESS_MAIN(TestPilotEngine)
#include "tst_pilot_engine.moc"
