// Per-expert MoE families held in pools and run as grouped GEMMs (model/GroupedExperts.h): the
// experts' weights are views of one [E, 2I, H] and one [E, H, I] allocation per layer, laid out as
// the parameter table says; the grouped autograd path (here its one-matmul-per-expert form,
// PILOTBENCH_EXPERTS=grouped) gives the per-expert loop's loss and gradients, its weight gradients
// and the optimizer's states share their pools' layout, and a model whose weights left their pool
// falls back to the loop.
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "engine/Optimizer.h"
#include "model/GroupedExperts.h"
#include "model/Transformer.h"

#include <QtTest>

#include <map>

using namespace pb;

namespace {

RunConfig tinyQwenMoe()
{
    RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
    c.train.precision = Precision::Fp32;
    c.model.family = "qwen2_moe";
    c.model.moe.experts = 6;
    c.model.moe.expertsPerToken = 2;
    c.model.moe.sharedExpertIntermediateSize = 24;
    c.model.moe.sharedExpertGate = true;
    return c;
}

SparseMoe firstMoe(DecoderModel &model)
{
    for (auto &b : model->stack->blocks)
        if (b->moe)
            return b->moe;
    return nullptr;
}

std::pair<torch::Tensor, torch::Tensor> batch(int64_t vocab, int64_t rows, int64_t seq)
{
    torch::manual_seed(5);
    const auto tokens = torch::randint(vocab, {rows, seq + 1}, torch::kLong);
    return {tokens.narrow(1, 0, seq), tokens.narrow(1, 1, seq)};
}

// Loss and every parameter's gradient (zeros where none was made) with the experts' path `path`.
std::pair<double, std::map<std::string, torch::Tensor>> lossAndGradients(const RunConfig &c, const char *path, bool breakPool = false)
{
    qputenv("PILOTBENCH_EXPERTS", path);
    DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
    model->initialise(3);
    if (breakPool) { // a copy of its own, as a sharded model's flat views would be
        torch::NoGradGuard noGrad;
        auto &w = firstMoe(model)->expertList[1]->up->weight;
        w.set_data(w.clone());
    }
    model->train();
    const auto [x, y] = batch(c.model.vocabSize, 2, 24);
    auto loss = model->loss(x, y);
    loss.backward();
    std::map<std::string, torch::Tensor> grads;
    for (const auto &item : model->named_parameters())
        grads[item.key()] = item.value().grad().defined() ? item.value().grad().clone() : torch::zeros_like(item.value());
    qunsetenv("PILOTBENCH_EXPERTS");
    return {loss.item<double>(), grads};
}

} // namespace

class TestGroupedExperts : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void poolsHoldEachLayersExperts()
    {
        const RunConfig c = tinyQwenMoe();
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        const auto moe = firstMoe(model);
        QVERIFY(moe);
        const int64_t e = c.model.moe.experts, i = c.model.moe.expertIntermediateSize, h = c.model.hiddenSize;
        const auto &first = moe->expertList.front()->gate->weight;
        const auto *base = static_cast<const char *>(first.data_ptr());
        for (int64_t x = 0; x < e; ++x) {
            const auto &expert = moe->expertList[static_cast<size_t>(x)];
            QVERIFY(expert->gate->weight.is_alias_of(first));
            QCOMPARE(static_cast<const char *>(expert->gate->weight.data_ptr()), base + 4 * (2 * x) * i * h);
            QCOMPARE(static_cast<const char *>(expert->up->weight.data_ptr()), base + 4 * (2 * x + 1) * i * h);
            QVERIFY(expert->down->weight.is_alias_of(moe->expertList.front()->down->weight));
            QVERIFY(!expert->down->weight.is_alias_of(first));
            QVERIFY(expert->gate->weight.is_leaf() && expert->gate->weight.requires_grad());
        }
        QCOMPARE(static_cast<int64_t>(first.storage().nbytes()), 4 * e * 2 * i * h);
        // The shared expert and the router keep allocations of their own.
        QVERIFY(!moe->shared->gate->weight.is_alias_of(first));

        // No pool where its members would differ: NF4 bases, or a freeze pattern training one expert.
        RunConfig qlora = c;
        qlora.train.mode = TrainMode::Qlora;
        for (const auto &p : parameterTable(qlora))
            QVERIFY2(p.pool.empty(), p.name.c_str());
        RunConfig freeze = c;
        freeze.train.mode = TrainMode::Freeze;
        freeze.train.trainable = {"mlp.experts.1."};
        for (const auto &p : parameterTable(freeze))
            QVERIFY2(p.pool.empty(), p.name.c_str());
        RunConfig lora = c;
        lora.train.mode = TrainMode::Lora;
        lora.train.lora.targets = {"all-linear"};
        int pooled = 0;
        for (const auto &p : parameterTable(lora))
            pooled += !p.pool.empty() && !p.isLora && !p.trainable ? 1 : 0;
        int sparse = 0;
        for (int64_t layer = 0; layer < c.model.layers; ++layer)
            sparse += c.model.moe.sparse(layer) ? 1 : 0;
        QVERIFY(sparse > 0);
        QCOMPARE(pooled, static_cast<int>(3 * e * sparse)); // adapters on the experts leave their frozen bases pooled
    }

    // The grouped path against the loop, fp32, same weights and tokens.
    void groupedGivesTheLoopsGradients_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("full") << QStringLiteral("full");
        QTest::newRow("lora attention, experts frozen") << QStringLiteral("lora");
    }
    void groupedGivesTheLoopsGradients()
    {
        QFETCH(QString, mode);
        RunConfig c = tinyQwenMoe();
        if (mode == QLatin1String("lora")) {
            c.train.mode = TrainMode::Lora;
            c.train.lora.rank = 4;
        }
        const auto [loopLoss, loopGrads] = lossAndGradients(c, "loop");
        const auto [groupedLoss, groupedGrads] = lossAndGradients(c, "grouped");
        QVERIFY2(std::abs(groupedLoss - loopLoss) <= 1e-6 * std::abs(loopLoss), qPrintable(QStringLiteral("%1 vs %2").arg(groupedLoss).arg(loopLoss)));
        QCOMPARE(groupedGrads.size(), loopGrads.size());
        int expertGrads = 0;
        for (const auto &[name, grad] : loopGrads) {
            const auto &other = groupedGrads.at(name);
            const double scale = std::max(grad.abs().max().item<double>(), 1e-6);
            const double diff = (other - grad).abs().max().item<double>();
            QVERIFY2(diff <= 1e-5 * scale, qPrintable(QString::fromStdString(name + ": " + std::to_string(diff) + " of " + std::to_string(scale))));
            expertGrads += name.find(".experts.") != std::string::npos && grad.abs().max().item<double>() > 0 ? 1 : 0;
        }
        QCOMPARE(expertGrads > 0, mode == QLatin1String("full"));
    }

    // The weights' gradients are views of one allocation per pool, so are AdamW's states.
    void gradientsAndStatesSharePools()
    {
        const RunConfig c = tinyQwenMoe();
        qputenv("PILOTBENCH_EXPERTS", "grouped");
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(3);
        model->train();
        auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
        const auto [x, y] = batch(c.model.vocabSize, 2, 24);
        model->loss(x, y).backward();
        qunsetenv("PILOTBENCH_EXPERTS");
        const auto &experts = firstMoe(model)->expertList;
        const auto &g0 = experts.front()->gate->weight.grad();
        QVERIFY(g0.defined());
        for (const auto &e : experts) { // every expert gets one, zeros where no token chose it
            QVERIFY(e->gate->weight.grad().defined() && e->up->weight.grad().defined() && e->down->weight.grad().defined());
            QVERIFY(e->up->weight.grad().is_alias_of(g0));
        }
        optimizer->step(1e-3);
        const auto state = optimizer->state();
        const auto params = model->trainableParameters();
        std::vector<torch::Tensor> gateUpStates;
        for (size_t i = 0; i < params.size(); ++i)
            for (const auto &e : experts)
                if (params[i].is_same(e->gate->weight) || params[i].is_same(e->up->weight))
                    gateUpStates.push_back(state.at("exp_avg_sq." + std::to_string(i)));
        QCOMPARE(gateUpStates.size(), 2 * experts.size());
        for (const auto &s : gateUpStates)
            QVERIFY(s.is_alias_of(gateUpStates.front()));
        QCOMPARE(static_cast<int64_t>(gateUpStates.front().storage().nbytes()),
                 4 * c.model.moe.experts * 2 * c.model.moe.expertIntermediateSize * c.model.hiddenSize);

        // A restore reads each state into the target the optimizer gives: the pools come back.
        auto restored = makeOptimizer(c.train.optimizer, model->trainableParameters());
        std::map<std::string, torch::Tensor> read;
        for (const auto &[name, tensor] : state) {
            auto into = restored->restoreTarget(name, tensor.sizes(), tensor.scalar_type());
            QCOMPARE(into.defined(), name != "step");
            read[name] = into.defined() ? into.copy_(tensor) : tensor.clone();
        }
        restored->restoreState(read);
        const auto back = restored->state();
        for (const auto &[name, tensor] : state)
            QVERIFY2(torch::equal(back.at(name), tensor), name.c_str());
        std::vector<torch::Tensor> restoredGateUp;
        for (size_t i = 0; i < params.size(); ++i)
            for (const auto &e : experts)
                if (params[i].is_same(e->gate->weight) || params[i].is_same(e->up->weight))
                    restoredGateUp.push_back(back.at("exp_avg." + std::to_string(i)));
        for (const auto &s : restoredGateUp)
            QVERIFY(s.is_alias_of(restoredGateUp.front()));
        QVERIFY(!restored->restoreTarget("exp_avg.0", {1, 2, 3}, torch::kFloat).defined()); // another shape: a tensor of its own
        QVERIFY(!restored->restoreTarget("exp_avg.999999", {1}, torch::kFloat).defined());
    }

    // A model whose expert weights no longer sit in their pool runs the loop, with the same result.
    void weightsOutOfTheirPoolTakeTheLoop()
    {
        const RunConfig c = tinyQwenMoe();
        const auto [loopLoss, loopGrads] = lossAndGradients(c, "loop", true);
        const auto [groupedLoss, groupedGrads] = lossAndGradients(c, "grouped", true);
        QCOMPARE(groupedLoss, loopLoss); // the same operations: bit for bit
        for (const auto &[name, grad] : loopGrads)
            QVERIFY2(torch::equal(groupedGrads.at(name), grad), name.c_str());

        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(3);
        auto &experts = firstMoe(model)->expertList;
        const auto x = torch::randn({8, c.model.hiddenSize});
        const std::vector<int64_t> counts = {2, 0, 3, 1, 1, 1};
        QVERIFY(!groupedExperts(experts, x, counts).defined()); // CPU fp32 without the switch: the loop
        qputenv("PILOTBENCH_EXPERTS", "grouped");
        QVERIFY(groupedExperts(experts, x, counts).defined());
        {
            torch::NoGradGuard noGrad;
            experts[1]->up->weight.set_data(experts[1]->up->weight.clone());
        }
        QVERIFY(!groupedExperts(experts, x, counts).defined());
        qunsetenv("PILOTBENCH_EXPERTS");
    }
};

QTEST_GUILESS_MAIN(TestGroupedExperts)
#include "tst_grouped_experts.moc"
