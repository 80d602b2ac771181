// The training step with nothing read by the host (engine/GradClip.h's device norm and divisor,
// TrainingOptimizer::stepOnDevice, the fused loss's device count) and its CUDA graph
// (engine/StepGraph.h): on the CPU, the device-side clipping against the host's, bit for bit, and
// the refusals; on a CUDA device, a device-side AdamW step against the host-valued one, a skipped
// step, a model trained by graph replays against the same steps run eagerly, and a pilot with
// train.cuda_graph against the eager pilot.
#include "config/Presets.h"
#include "engine/GradClip.h"
#include "engine/Optimizer.h"
#include "engine/PilotEngine.h"
#include "engine/StepGraph.h"
#include "engine/TorchCompat.h"
#include "model/Transformer.h"

#include <QtTest>

#include <cmath>
#include <limits>

using namespace pb;

namespace {

// fp32 parameters with gradients, one without, and (`withBf16`) a bf16 one, a norm group of its own.
std::vector<torch::Tensor> parametersWithGradients(const torch::Device &device, bool withBf16)
{
    torch::manual_seed(11);
    auto make = [&](std::vector<int64_t> shape, torch::Dtype dtype, bool grad) {
        auto p = torch::randn(shape).to(device, dtype).requires_grad_();
        if (grad)
            p.mutable_grad() = (torch::randn(shape) * 3).to(device, dtype);
        return p;
    };
    std::vector<torch::Tensor> params {make({33, 17}, torch::kFloat32, true), make({5}, torch::kFloat32, true), make({3}, torch::kFloat32, false)};
    if (withBf16)
        params.push_back(make({8, 8}, torch::kBFloat16, true));
    return params;
}

bool cudaGraphsHere() { return torch::cuda::is_available() && StepGraph::supported(torch::kCUDA) && compat::kDeviceSideAdamW; }

// The tiny preset on the fused path under bf16 autocast: what a graphed step runs on a card.
RunConfig tinyFusedBf16()
{
    RunConfig c = presetConfig(QStringLiteral("tiny"));
    c.train.precision = Precision::Bf16Mixed;
    c.train.kernels = KernelPath::Fused;
    return c;
}

} // namespace

class TestStepGraph : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // The device norm is the host's norm (same operations; on the CPU the same values bit for bit).
    void deviceNormIsTheHostNorm()
    {
        const auto params = parametersWithGradients(torch::kCPU, true);
        const auto onDevice = totalGradNormOnDevice(params);
        QCOMPARE(onDevice.scalar_type(), torch::kFloat64);
        QCOMPARE(onDevice.item<double>(), totalGradNorm(params));
        std::vector<torch::Tensor> none {torch::zeros({2}).requires_grad_()};
        QVERIFY(!totalGradNormOnDevice(none).defined());
    }

    // clipDivisorOnDevice is 1 / clipScale as the host computes it and hands to fused AdamW (fp32),
    // bit for bit, above, at and under the bound.
    void deviceDivisorIsTheHostDivisor_data()
    {
        QTest::addColumn<double>("norm");
        QTest::addColumn<double>("maxNorm");
        for (double norm : {0.0, 0.3, 0.999999, 1.0, 1.000001, 1.7, 3.0, 12345.678, 1e12})
            for (double maxNorm : {1.0, 0.7, 2.5})
                QTest::newRow(qPrintable(QStringLiteral("norm %1, max %2").arg(norm, 0, 'g', 7).arg(maxNorm))) << norm << maxNorm;
    }
    void deviceDivisorIsTheHostDivisor()
    {
        QFETCH(double, norm);
        QFETCH(double, maxNorm);
        const auto divisor = clipDivisorOnDevice(torch::scalar_tensor(norm, torch::kFloat64), maxNorm);
        QCOMPARE(divisor.scalar_type(), torch::kFloat32);
        const float expected = static_cast<float>(1.0 / clipScale(norm, maxNorm));
        QCOMPARE(divisor.item<float>(), expected);
    }

    // Where the step needs host values, it says so instead of running something else.
    void refusedWhereItCannotRun()
    {
        QVERIFY(!StepGraph::supported(torch::kCPU));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, StepGraph(torch::kCPU));
        OptimizerConfig config;
        config.kind = OptimizerKind::AdamW;
        std::vector<torch::Tensor> params {torch::zeros({4}).requires_grad_()};
        auto optimizer = makeOptimizer(config, params);
        QVERIFY(!optimizer->stepsOnDevice());
        const auto one = torch::ones({});
        try {
            optimizer->stepOnDevice(one, one, torch::zeros({}));
            QFAIL("stepOnDevice ran on the per-tensor AdamW");
        } catch (const std::logic_error &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("per-tensor")), e.what());
        }
    }

    // On a card: a device-side step is the host-valued step (the same kernel, the same values), and
    // a step flagged as skipped leaves parameters, moments and counters as they were.
    void deviceSideAdamWIsTheHostStep()
    {
        if (!cudaGraphsHere())
            QSKIP("needs a CUDA device and fused AdamW with a tensor rate");
        OptimizerConfig config;
        config.kind = OptimizerKind::AdamW;
        config.weightDecay = 0.01;
        auto hostParams = parametersWithGradients(torch::kCUDA, false), deviceParams = parametersWithGradients(torch::kCUDA, false);
        auto host = makeOptimizer(config, hostParams), device = makeOptimizer(config, deviceParams);
        QVERIFY(device->stepsOnDevice());
        const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
        host->step(1e-3);
        device->step(1e-3); // the state, as the engine makes it before a capture
        const double rates[] = {2e-3, 5e-4, 1e-3};
        for (double lr : rates) {
            host->step(lr, clipScale(totalGradNorm(hostParams), 1.0));
            device->stepOnDevice(torch::full({}, lr, f32), clipDivisorOnDevice(totalGradNormOnDevice(deviceParams), 1.0), torch::zeros({}, f32));
            device->countStep();
        }
        for (size_t i = 0; i < hostParams.size(); ++i)
            QVERIFY2(torch::equal(hostParams[i], deviceParams[i]), qPrintable(QStringLiteral("parameter %1").arg(i)));
        const auto before = device->state();
        std::map<std::string, torch::Tensor> kept;
        for (const auto &[name, t] : before)
            kept[name] = t.clone();
        std::vector<torch::Tensor> paramsBefore;
        for (const auto &p : deviceParams)
            paramsBefore.push_back(p.detach().clone());
        device->stepOnDevice(torch::full({}, 1e-3, f32), torch::ones({}, f32), torch::ones({}, f32));
        for (size_t i = 0; i < deviceParams.size(); ++i)
            QVERIFY(torch::equal(deviceParams[i], paramsBefore[i]));
        for (const auto &[name, t] : device->state())
            QVERIFY2(torch::equal(t, kept.at(name)), name.c_str());
        // The counters kept too: the next step taken equals the host's next step.
        host->step(1e-3);
        device->stepOnDevice(torch::full({}, 1e-3, f32), torch::ones({}, f32), torch::zeros({}, f32));
        for (size_t i = 0; i < hostParams.size(); ++i)
            QVERIFY2(torch::equal(hostParams[i], deviceParams[i]), qPrintable(QStringLiteral("parameter %1 after the skip").arg(i)));
    }

    // On a card: a small model on the fused path trained by replays of its captured step reaches the
    // parameters and loss of the same steps run eagerly (one host-valued step, the three warm-ups,
    // then four steps either way; the capture itself runs nothing).
    void replaysTrainAsEagerSteps()
    {
        if (!cudaGraphsHere())
            QSKIP("needs a CUDA device and fused AdamW with a tensor rate");
        RunConfig c = tinyFusedBf16();
        c.train.gradClip = 1.0;
        torch::manual_seed(5);
        const auto tokens = torch::randint(0, c.model.vocabSize, {2, 65}, torch::kLong).cuda();
        const auto x = tokens.slice(1, 0, 64).contiguous(), y = tokens.slice(1, 1, 65).contiguous();
        auto train = [&](bool graphed, double &lastLoss) {
            DecoderModel model(c, ModelRuntime {}, torch::kCUDA);
            model->initialise(1);
            model->train();
            auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
            const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
            const auto lr = torch::full({}, 1e-3, f32);
            {
                const compat::AutocastGuard autocast(torch::kCUDA, true, at::kBFloat16);
                model->loss(x, y).backward();
            }
            optimizer->step(1e-3);
            torch::Tensor loss;
            auto step = [&] {
                optimizer->zeroGrad();
                {
                    const compat::AutocastGuard autocast(torch::kCUDA, true, at::kBFloat16);
                    loss = model->loss(x, y);
                }
                loss.backward();
                const auto norm = totalGradNormOnDevice(optimizer->parameters());
                optimizer->stepOnDevice(lr, clipDivisorOnDevice(norm, 1.0), norm.isfinite().logical_not().to(torch::kFloat));
            };
            if (graphed) {
                StepGraph graph(torch::kCUDA);
                graph.capture(step, 3);
                for (int i = 0; i < 4; ++i)
                    graph.replay();
            } else {
                for (int i = 0; i < 7; ++i)
                    step();
            }
            lastLoss = loss.item<double>();
            std::vector<torch::Tensor> out;
            for (const auto &p : model->trainableParameters())
                out.push_back(p.detach().to(torch::kDouble).cpu());
            return out;
        };
        double eagerLoss = 0, graphLoss = 0;
        const auto eager = train(false, eagerLoss), graphed = train(true, graphLoss);
        QVERIFY2(std::abs(eagerLoss - graphLoss) <= 1e-3 * std::abs(eagerLoss), qPrintable(QStringLiteral("loss %1 against %2").arg(graphLoss).arg(eagerLoss)));
        QCOMPARE(graphed.size(), eager.size());
        double worst = 0;
        for (size_t i = 0; i < eager.size(); ++i)
            worst = std::max(worst, (graphed[i] - eager[i]).abs().max().item<double>() / std::max(eager[i].abs().max().item<double>(), 1e-12));
        QVERIFY2(worst < 1e-3, qPrintable(QStringLiteral("worst relative parameter difference %1").arg(worst)));
    }

    // On a card: a pilot with train.cuda_graph captures the step after its warm-ups (one more
    // warm-up step) and replays every measured step, with the eager pilot's losses; batches of
    // changing widths end the graph and the run goes on eagerly, saying so.
    void aPilotReplaysItsStep()
    {
        if (!cudaGraphsHere())
            QSKIP("needs a CUDA device and fused AdamW with a tensor rate");
        RunConfig c = tinyFusedBf16();
        c.train.seqLen = 64;
        PilotOptions options;
        options.device = "cuda:0";
        options.warmupSteps = 2;
        options.steps = 4;
        PilotEngine engine;
        const PilotRun eager = engine.run(c, options);
        c.train.cudaGraph = true;
        const PilotRun graphed = engine.run(c, options);
        QCOMPARE(graphed.summary.verdict, Verdict::Fits);
        // The capture is one more warm-up step: the same 4 measured steps, all replays.
        QCOMPARE(QString::fromStdString(graphed.stepGraph), QStringLiteral("captured at step 3, replayed 4 time(s)"));
        QCOMPARE(graphed.losses.size(), eager.losses.size() + 1);
        for (size_t i = 0; i < eager.losses.size(); ++i)
            QVERIFY2(std::abs(graphed.losses[i] - eager.losses[i]) <= 1e-3 * std::abs(eager.losses[i]),
                     qPrintable(QStringLiteral("step %1: %2 against %3").arg(i + 1).arg(graphed.losses[i]).arg(eager.losses[i])));
        c.data.lengths = LengthDistribution::Uniform;
        c.data.minLength = 8;
        const PilotRun varying = engine.run(c, options);
        QCOMPARE(varying.summary.verdict, Verdict::Fits);
        QVERIFY2(QString::fromStdString(varying.stepGraph).contains(QLatin1String("ended at step")), varying.stepGraph.c_str());
    }
};

QTEST_GUILESS_MAIN(TestStepGraph)
#include "tst_step_graph.moc"
