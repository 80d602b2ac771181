// SGD, Adagrad and RMSprop through TrainingOptimizer: the same steps as torch::optim used directly
// (bitwise), and the named state a checkpoint keeps restoring exactly, before the first step and
// after it.
#include "engine/GradClip.h"
#include "engine/Optimizer.h"

#include <QtTest>

using namespace pb;

namespace {

OptimizerConfig configFor(const QString &row)
{
    OptimizerConfig c;
    c.lr = 0.05;
    c.weightDecay = 0.01;
    c.eps = 1e-8;
    c.momentum = 0.9;
    if (row.startsWith(QLatin1String("sgd")))
        c.kind = OptimizerKind::Sgd;
    else if (row.startsWith(QLatin1String("adagrad")))
        c.kind = OptimizerKind::Adagrad;
    else
        c.kind = OptimizerKind::RmsProp;
    if (row.endsWith(QLatin1String("without momentum")))
        c.momentum = 0;
    return c;
}

// torch::optim built from the same hyper-parameters, written out here rather than taken from the
// code under test: PyTorch's defaults for what the config does not set, RMSprop's alpha 0.99.
std::unique_ptr<torch::optim::Optimizer> directOptimizer(const OptimizerConfig &c, const std::vector<torch::Tensor> &params)
{
    switch (c.kind) {
    case OptimizerKind::Sgd:
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weightDecay));
    case OptimizerKind::Adagrad:
        return std::make_unique<torch::optim::Adagrad>(params, torch::optim::AdagradOptions(c.lr).eps(c.eps).weight_decay(c.weightDecay));
    default:
        return std::make_unique<torch::optim::RMSprop>(
            params, torch::optim::RMSpropOptions(c.lr).alpha(0.99).eps(c.eps).weight_decay(c.weightDecay).momentum(c.momentum));
    }
}

std::vector<torch::Tensor> makeParameters()
{
    torch::manual_seed(11);
    return {torch::randn({4, 3}).requires_grad_(), torch::randn({5}).requires_grad_(), torch::randn({2, 2, 3}).requires_grad_()};
}

std::vector<torch::Tensor> cloneParameters(const std::vector<torch::Tensor> &params)
{
    std::vector<torch::Tensor> out;
    for (const auto &p : params)
        out.push_back(p.detach().clone().requires_grad_());
    return out;
}

// Gradients that depend on the parameters (so a wrong update shows in the next gradient). The last
// parameter gets none at step 0: its state starts a step later than the others'.
void backward(std::vector<torch::Tensor> &params, int step)
{
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < params.size(); ++i) {
        if (step == 0 && i + 1 == params.size())
            continue;
        loss = loss + (torch::sin(params[i]) * params[i] * static_cast<double>(i + 1)).sum();
    }
    loss.backward();
}

double lrAt(int step) { return 0.05 / (1.0 + 0.5 * step); }  // changes every step, like a schedule

void takeStep(TrainingOptimizer &optimizer, int step)
{
    backward(optimizer.parameters(), step);
    optimizer.step(lrAt(step));
    optimizer.zeroGrad();
}

bool sameTensors(const std::vector<torch::Tensor> &a, const std::vector<torch::Tensor> &b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!torch::equal(a[i], b[i]))
            return false;
    return true;
}

std::map<std::string, torch::Tensor> copyOf(const std::map<std::string, torch::Tensor> &state)
{
    std::map<std::string, torch::Tensor> out;
    for (const auto &[name, tensor] : state)
        out[name] = tensor.detach().clone();
    return out;
}

QString differenceBetween(const std::map<std::string, torch::Tensor> &a, const std::map<std::string, torch::Tensor> &b)
{
    QStringList names;
    for (const auto &[name, tensor] : a)
        names << QString::fromStdString(name);
    for (const auto &[name, tensor] : a) {
        const auto it = b.find(name);
        if (it == b.end())
            return QStringLiteral("only in the first: %1 (first has %2)").arg(QString::fromStdString(name), names.join(QLatin1Char(' ')));
        if (!torch::equal(tensor, it->second))
            return QStringLiteral("%1 differs").arg(QString::fromStdString(name));
    }
    for (const auto &[name, tensor] : b)
        if (!a.count(name))
            return QStringLiteral("only in the second: %1").arg(QString::fromStdString(name));
    return {};
}

void addRows()
{
    QTest::addColumn<QString>("row");
    for (const char *row : {"sgd", "sgd without momentum", "adagrad", "rmsprop", "rmsprop without momentum"})
        QTest::newRow(row) << QString::fromLatin1(row);
}

} // namespace

class TestOptimizer : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void sameStepsAsTorchOptim_data() { addRows(); }
    void sameStepsAsTorchOptim()
    {
        QFETCH(QString, row);
        const OptimizerConfig config = configFor(row);
        auto ours = makeOptimizer(config, makeParameters());
        QCOMPARE(ours->path(), std::string("torch::optim"));
        std::vector<torch::Tensor> direct = cloneParameters(ours->parameters());
        auto reference = directOptimizer(config, direct);
        for (int step = 0; step < 8; ++step) {
            takeStep(*ours, step);
            backward(direct, step);
            for (auto &group : reference->param_groups())
                group.options().set_lr(lrAt(step));
            reference->step();
            reference->zero_grad();
            QVERIFY2(sameTensors(ours->parameters(), direct), qPrintable(QStringLiteral("step %1").arg(step)));
        }
        // And the parameters moved: the comparison is not of two untouched sets.
        QVERIFY(!torch::equal(ours->parameters().front(), makeParameters().front()));
    }

    void stateNamesFollowTorchOptim_data()
    {
        QTest::addColumn<QString>("row");
        QTest::addColumn<QStringList>("beforeFirstStep");
        QTest::addColumn<QStringList>("afterFirstStep");  // the last parameter had no gradient yet
        QTest::newRow("sgd") << QStringLiteral("sgd") << QStringList {QStringLiteral("step")}
                             << QStringList {QStringLiteral("momentum_buffer.0"), QStringLiteral("momentum_buffer.1"), QStringLiteral("step")};
        QTest::newRow("sgd without momentum") << QStringLiteral("sgd without momentum") << QStringList {QStringLiteral("step")} << QStringList {QStringLiteral("step")};
        QStringList adagrad {QStringLiteral("step")};
        for (int i = 0; i < 3; ++i)
            adagrad << QStringLiteral("step.%1").arg(i) << QStringLiteral("sum.%1").arg(i);
        adagrad.sort();
        QTest::newRow("adagrad: made with the optimizer") << QStringLiteral("adagrad") << adagrad << adagrad;
        QTest::newRow("rmsprop") << QStringLiteral("rmsprop") << QStringList {QStringLiteral("step")}
                                 << QStringList {QStringLiteral("momentum_buffer.0"), QStringLiteral("momentum_buffer.1"), QStringLiteral("square_avg.0"),
                                                 QStringLiteral("square_avg.1"), QStringLiteral("step"), QStringLiteral("step.0"), QStringLiteral("step.1")};
    }
    void stateNamesFollowTorchOptim()
    {
        QFETCH(QString, row);
        QFETCH(QStringList, beforeFirstStep);
        QFETCH(QStringList, afterFirstStep);
        auto optimizer = makeOptimizer(configFor(row), makeParameters());
        const auto names = [&] {
            QStringList out;
            for (const auto &[name, tensor] : optimizer->state())
                out << QString::fromStdString(name);
            return out;
        };
        QCOMPARE(names(), beforeFirstStep);
        takeStep(*optimizer, 0);
        QCOMPARE(names(), afterFirstStep);
        QCOMPARE(optimizer->state().at("step").item<int64_t>(), int64_t(1));
    }

    // A checkpoint's state restored into a fresh optimizer over copies of the parameters: the same
    // state, and the same steps after it, bitwise; written before any step and after some.
    void restoredStateContinuesBitwise_data()
    {
        QTest::addColumn<QString>("row");
        QTest::addColumn<int>("stepsBefore");
        for (const char *row : {"sgd", "sgd without momentum", "adagrad", "rmsprop", "rmsprop without momentum"}) {
            QTest::addRow("%s, before the first step", row) << QString::fromLatin1(row) << 0;
            QTest::addRow("%s, after the first step", row) << QString::fromLatin1(row) << 1;
            QTest::addRow("%s, after three steps", row) << QString::fromLatin1(row) << 3;
        }
    }
    void restoredStateContinuesBitwise()
    {
        QFETCH(QString, row);
        QFETCH(int, stepsBefore);
        const OptimizerConfig config = configFor(row);
        auto original = makeOptimizer(config, makeParameters());
        for (int step = 0; step < stepsBefore; ++step)
            takeStep(*original, step);
        const auto saved = copyOf(original->state());
        auto restored = makeOptimizer(config, cloneParameters(original->parameters()));
        restored->restoreState(saved);
        QCOMPARE(differenceBetween(restored->state(), saved), QString());
        for (int step = stepsBefore; step < stepsBefore + 4; ++step) {
            takeStep(*original, step);
            takeStep(*restored, step);
            QVERIFY2(sameTensors(original->parameters(), restored->parameters()), qPrintable(QStringLiteral("step %1").arg(step)));
        }
        QCOMPARE(differenceBetween(restored->state(), original->state()), QString());
    }

    // The hand-written SGD and RMSprop saved the momentum buffer as "momentum.<i>" and no
    // per-parameter step: their checkpoints still restore.
    void restoresTheHandWrittenOptimizersNames_data()
    {
        QTest::addColumn<QString>("row");
        QTest::newRow("sgd") << QStringLiteral("sgd");
        QTest::newRow("adagrad") << QStringLiteral("adagrad");
        QTest::newRow("rmsprop") << QStringLiteral("rmsprop");
    }
    void restoresTheHandWrittenOptimizersNames()
    {
        QFETCH(QString, row);
        const OptimizerConfig config = configFor(row);
        auto original = makeOptimizer(config, makeParameters());
        for (int step = 0; step < 3; ++step)
            takeStep(*original, step);
        std::map<std::string, torch::Tensor> legacy;
        for (const auto &[name, tensor] : copyOf(original->state())) {
            if (name.rfind("step.", 0) == 0)
                continue;
            legacy[name.rfind("momentum_buffer.", 0) == 0 ? "momentum." + name.substr(16) : name] = tensor;
        }
        auto restored = makeOptimizer(config, cloneParameters(original->parameters()));
        restored->restoreState(legacy);
        // Every parameter but the last saw all three steps; the old format gives all of them the
        // optimizer's count, which only an lr decay (off here) would read.
        const auto state = restored->state();
        for (const auto &[name, tensor] : original->state())
            if (name.rfind("step.", 0) != 0)
                QVERIFY2(torch::equal(state.at(name), tensor), name.c_str());
        takeStep(*original, 3);
        takeStep(*restored, 3);
        QVERIFY(sameTensors(original->parameters(), restored->parameters()));
    }

    // The multi-tensor norm and scale give LibTorch's clip_grad_norm_ norm and clipped gradients,
    // over fp32 and bf16 gradients and a parameter without one; under the bound the scale is 1.
    void clipAsLibTorch()
    {
        torch::manual_seed(7);
        auto make = [](std::vector<int64_t> shape, torch::Dtype dtype, bool grad) {
            auto p = torch::zeros(shape, torch::TensorOptions().dtype(dtype)).requires_grad_();
            if (grad)
                p.mutable_grad() = torch::randn(shape).to(dtype);
            return p;
        };
        std::vector<torch::Tensor> ours {make({33, 17}, torch::kFloat32, true), make({5}, torch::kFloat32, true), make({8, 8}, torch::kBFloat16, true),
                                         make({3}, torch::kFloat32, false)};
        std::vector<torch::Tensor> theirs;
        for (const auto &p : ours) {
            auto q = p.detach().clone().requires_grad_();
            if (p.grad().defined())
                q.mutable_grad() = p.grad().clone();
            theirs.push_back(q);
        }
        const double norm = pb::totalGradNorm(ours);
        pb::scaleGradients(ours, pb::clipScale(norm, 2.0));
        const double expected = torch::nn::utils::clip_grad_norm_(theirs, 2.0);
        QVERIFY(norm > 2.0);
        QVERIFY2(std::abs(norm - expected) <= 1e-5 * expected, qPrintable(QStringLiteral("%1 vs %2").arg(norm).arg(expected)));
        for (size_t i = 0; i < ours.size(); ++i) {
            QCOMPARE(ours[i].grad().defined(), theirs[i].grad().defined());
            if (ours[i].grad().defined())
                QVERIFY(torch::allclose(ours[i].grad().to(torch::kFloat32), theirs[i].grad().to(torch::kFloat32), 1e-2, 1e-6));
        }
        QVERIFY(std::abs(pb::totalGradNorm(ours) - 2.0) < 1e-3);
        QCOMPARE(pb::clipScale(pb::totalGradNorm(ours), 1e9), 1.0);
    }

    // A step with a gradient scale is the step on gradients scaled first, for every optimizer
    // (AdamW on CUDA through the fused kernel's divisor, where the host has one).
    void stepWithGradScale_data()
    {
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<QString>("device");
        for (const char *o : {"adamw", "adam", "sgd"}) {
            QTest::newRow(qPrintable(QStringLiteral("%1 cpu").arg(QLatin1String(o)))) << QString::fromLatin1(o) << QStringLiteral("cpu");
            if (torch::cuda::is_available())
                QTest::newRow(qPrintable(QStringLiteral("%1 cuda").arg(QLatin1String(o)))) << QString::fromLatin1(o) << QStringLiteral("cuda");
        }
    }

    void stepWithGradScale()
    {
        QFETCH(QString, optimizer);
        QFETCH(QString, device);
        pb::OptimizerConfig config;
        QVERIFY(pb::parseEnum<pb::OptimizerKind>(optimizer.toStdString()).has_value());
        config.kind = *pb::parseEnum<pb::OptimizerKind>(optimizer.toStdString());
        config.weightDecay = 0.01;
        torch::manual_seed(3);
        const torch::Tensor start = torch::randn({64, 32}).to(device.toStdString());
        const torch::Tensor grad = torch::randn({64, 32}).to(device.toStdString());
        auto run = [&](bool folded) {
            std::vector<torch::Tensor> params {start.clone().requires_grad_()};
            auto opt = pb::makeOptimizer(config, params);
            for (int s = 0; s < 3; ++s) {
                params[0].mutable_grad() = grad.clone();
                if (folded) {
                    opt->step(1e-2, 0.25);
                } else {
                    pb::scaleGradients(params, 0.25);
                    opt->step(1e-2);
                }
            }
            return params[0].detach().to(torch::kCPU);
        };
        QVERIFY(torch::allclose(run(true), run(false), 1e-5, 1e-6));
    }

    void refusesStateItDoesNotKeep()
    {
        auto optimizer = makeOptimizer(configFor(QStringLiteral("sgd")), makeParameters());
        takeStep(*optimizer, 0);
        const auto good = copyOf(optimizer->state());
        auto with = [&](const std::string &name, const torch::Tensor &tensor) {
            auto state = good;
            state[name] = tensor;
            return state;
        };
        auto without = [&](const std::string &name) {
            auto state = good;
            state.erase(name);
            return state;
        };
        QVERIFY_THROWS_EXCEPTION(c10::Error, optimizer->restoreState(with("exp_avg.0", torch::zeros({4, 3}))));      // AdamW's
        QVERIFY_THROWS_EXCEPTION(c10::Error, optimizer->restoreState(with("momentum_buffer.3", torch::zeros({4, 3})))); // no parameter 3
        QVERIFY_THROWS_EXCEPTION(c10::Error, optimizer->restoreState(with("momentum_buffer.0", torch::zeros({3, 4})))); // wrong shape
        QVERIFY_THROWS_EXCEPTION(c10::Error, optimizer->restoreState(without("step")));
        // A refused state leaves the optimizer as it was.
        QCOMPARE(differenceBetween(optimizer->state(), good), QString());

        auto rmsprop = makeOptimizer(configFor(QStringLiteral("rmsprop")), makeParameters());
        takeStep(*rmsprop, 0);
        auto state = copyOf(rmsprop->state());
        state.erase("momentum_buffer.0"); // momentum is on: the buffer must be there
        QVERIFY_THROWS_EXCEPTION(c10::Error, rmsprop->restoreState(state));
    }
};

QTEST_GUILESS_MAIN(TestOptimizer)
#include "tst_optimizer.moc"
