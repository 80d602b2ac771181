// The mixture-of-experts MLP against a dense reference computation on small, odd shapes (every
// expert run on every token, combined through the routing weights): same outputs, same gradients;
// the model's load-balancing loss as Transformers' load_balancing_loss_func; recomputation gives
// the plain backward's gradients, auxiliary loss included; parameters named as the checkpoints are.
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "model/Transformer.h"

#include <QtTest>

#include <set>

using namespace pb;

namespace {

RunConfig moeConfig(int64_t experts, int64_t k, bool normalize, int64_t shared, bool sharedGate, const std::string &family = "qwen2_moe")
{
    RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
    c.train.precision = Precision::Fp32;
    c.model.family = family;
    c.model.moe.experts = experts;
    c.model.moe.expertsPerToken = k;
    c.model.moe.normalizeTopK = normalize;
    c.model.moe.sharedExpertIntermediateSize = shared;
    c.model.moe.sharedExpertGate = sharedGate;
    return c;
}

void randomise(torch::nn::Module &m, uint64_t seed)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    // A module built on its own holds emptyParam's placeholders until it is given storage, as
    // DecoderModel gives it.
    for (auto &p : m.parameters()) {
        p.set_data(torch::empty(p.sizes(), p.options()));
        p.normal_(0.0, 0.3);
    }
}

// out_t = sum over the chosen experts e of w_te * expert_e(x_t) (+ the gated shared expert).
torch::Tensor denseReference(SparseMoeImpl &moe, const torch::Tensor &x, const MoeConfig &cfg)
{
    const auto flat = x.reshape({-1, x.size(-1)});
    const auto probabilities = torch::softmax(torch::matmul(flat, moe.router->weight.t()), 1, torch::kFloat);
    auto [weights, chosen] = torch::topk(probabilities, cfg.expertsPerToken, -1);
    if (cfg.normalizeTopK)
        weights = weights / weights.sum(-1, true);
    const auto dense = torch::zeros_like(probabilities).scatter(1, chosen, weights); // N x E, zero where not chosen
    auto out = torch::zeros_like(flat);
    for (int64_t e = 0; e < cfg.experts; ++e)
        out = out + dense.select(1, e).unsqueeze(-1) * moe.expertList[static_cast<size_t>(e)]->forward(flat);
    if (moe.shared) {
        auto s = moe.shared->forward(flat);
        if (moe.sharedGate)
            s = torch::sigmoid(torch::matmul(flat, moe.sharedGate->weight.t())) * s;
        out = out + s;
    }
    return out.reshape(x.sizes());
}

} // namespace

class TestSparseMoe : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matchesTheDenseReference_data()
    {
        QTest::addColumn<int>("experts");
        QTest::addColumn<int>("k");
        QTest::addColumn<bool>("normalize");
        QTest::addColumn<int>("shared");
        QTest::addColumn<bool>("sharedGate");
        QTest::addColumn<int>("tokens");
        QTest::newRow("mixtral-like 8 top-2, renormalised") << 8 << 2 << true << 0 << false << 7;
        QTest::newRow("olmoe-like 5 top-3, raw weights") << 5 << 3 << false << 0 << false << 13;
        QTest::newRow("qwen2-moe-like shared expert and gate") << 4 << 2 << false << 24 << true << 9;
        QTest::newRow("top-1 over 3") << 3 << 1 << true << 0 << false << 1;
        QTest::newRow("every expert chosen") << 3 << 3 << true << 16 << false << 5;
    }
    void matchesTheDenseReference()
    {
        QFETCH(int, experts);
        QFETCH(int, k);
        QFETCH(bool, normalize);
        QFETCH(int, shared);
        QFETCH(bool, sharedGate);
        QFETCH(int, tokens);
        const RunConfig c = moeConfig(experts, k, normalize, shared, sharedGate);
        const auto options = torch::TensorOptions().dtype(torch::kDouble);
        SparseMoe moe(c, options);
        randomise(*moe, 3);
        torch::manual_seed(11);
        const auto x = torch::randn({1, tokens, c.model.hiddenSize}, options).requires_grad_(true);
        const auto probe = torch::randn({1, tokens, c.model.hiddenSize}, options);

        const auto out = moe->forward(x);
        const auto grads = torch::autograd::grad({(out * probe).sum()}, {x, moe->router->weight}, {}, true);
        const auto expertGrads = torch::autograd::grad({(out * probe).sum()}, moe->parameters(), {}, true, false, true);
        const auto ref = denseReference(*moe, x, c.model.moe);
        const auto refGrads = torch::autograd::grad({(ref * probe).sum()}, {x, moe->router->weight}, {}, true);
        const auto refExpertGrads = torch::autograd::grad({(ref * probe).sum()}, moe->parameters(), {}, true, false, true);

        QVERIFY(torch::allclose(out, ref, 1e-12, 1e-12));
        QVERIFY(torch::allclose(grads[0], refGrads[0], 1e-12, 1e-12));
        QVERIFY(torch::allclose(grads[1], refGrads[1], 1e-12, 1e-12));
        QCOMPARE(expertGrads.size(), refExpertGrads.size());
        for (size_t i = 0; i < expertGrads.size(); ++i) {
            // An expert no token chose is not run at all: the reference's gradient for it is zero.
            if (!expertGrads[i].defined())
                QVERIFY(!refExpertGrads[i].defined() || refExpertGrads[i].abs().max().item<double>() == 0);
            else
                QVERIFY(torch::allclose(expertGrads[i], refExpertGrads[i], 1e-12, 1e-12));
        }
        // The statistics the auxiliary loss reads.
        const auto flat = x.reshape({-1, x.size(-1)});
        const auto probabilities = torch::softmax(torch::matmul(flat, moe->router->weight.t()), 1, torch::kFloat);
        QVERIFY(torch::allclose(moe->routerProbabilitySum, probabilities.sum(0), 1e-6, 1e-6));
        QCOMPARE(moe->expertChoices.sizes().vec(), (std::vector<int64_t> {k, experts}));
        QCOMPARE(moe->expertChoices.sum().item<double>(), double(tokens * k));
        QCOMPARE(moe->tokens, int64_t(tokens));
    }

    // Transformers' load_balancing_loss_func over the concatenated layers, by hand from each
    // sparse block's router, added with the config's weight.
    void auxiliaryLossIsTransformers()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
        c.train.precision = Precision::Fp32;
        c.model.moe.denseLayers = {};
        auto tokens = (torch::manual_seed(5), torch::randint(0, c.model.vocabSize, {2, 9}, torch::kLong));
        const auto x = tokens.slice(1, 0, 8), y = tokens.slice(1, 1, 9);
        auto loss = [&](double weight, std::vector<torch::Tensor> *logits) {
            RunConfig cw = c;
            cw.model.moe.auxLossWeight = weight;
            DecoderModel model(cw, ModelRuntime {false, false}, torch::kCPU);
            model->initialise(1);
            torch::NoGradGuard noGrad;
            const double l = model->loss(x, y).item<double>();
            if (logits) {
                // The routers' logits of the same forward, layer by layer, recomputed from their inputs.
                for (auto &block : model->stack->blocks)
                    if (block->moe)
                        logits->push_back(block->moe->routerProbabilitySum);
            }
            return l;
        };
        const double plain = loss(0.0, nullptr);
        std::vector<torch::Tensor> sums;
        const double weighted = loss(0.5, &sums);
        QCOMPARE(int(sums.size()), int(c.model.layers));
        // Rebuild the loss from the blocks' statistics of a third, identical forward.
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(1);
        torch::NoGradGuard noGrad;
        model->loss(x, y);
        torch::Tensor choices = torch::zeros({c.model.moe.expertsPerToken, c.model.moe.experts});
        torch::Tensor probabilities = torch::zeros({c.model.moe.experts});
        int64_t n = 0;
        for (auto &block : model->stack->blocks) {
            choices += block->moe->expertChoices;
            probabilities += block->moe->routerProbabilitySum;
            n += block->moe->tokens;
        }
        QCOMPARE(n, int64_t(2 * 8 * c.model.layers));
        const double aux = ((choices / double(n)) * (probabilities / double(n)).unsqueeze(0)).sum().item<double>() * double(c.model.moe.experts);
        QVERIFY(aux > 0);
        QVERIFY2(std::abs((weighted - plain) - 0.5 * aux) < 1e-5, qPrintable(QStringLiteral("%1 vs %2").arg(weighted - plain).arg(0.5 * aux)));
    }

    void recomputeGivesTheSameGradients_data()
    {
        QTest::addColumn<bool>("lora");
        QTest::newRow("full") << false;
        QTest::newRow("lora on attention and experts") << true;
    }
    void recomputeGivesTheSameGradients()
    {
        QFETCH(bool, lora);
        RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
        c.train.precision = Precision::Fp32;
        if (lora) {
            c.train.mode = TrainMode::Lora;
            c.train.lora.rank = 4;
            c.train.lora.targets = {"q_proj", "gate_proj", "up_proj", "down_proj"};
        }
        auto tokens = (torch::manual_seed(9), torch::randint(0, c.model.vocabSize, {2, 17}, torch::kLong));
        const auto x = tokens.slice(1, 0, 16), y = tokens.slice(1, 1, 17);
        std::map<std::string, torch::Tensor> grads[2];
        double losses[2];
        for (int recompute = 0; recompute < 2; ++recompute) {
            DecoderModel model(c, ModelRuntime {false, recompute == 1}, torch::kCPU);
            model->initialise(1);
            if (lora) { // adapters' B starts at zero; give them values so their gradients flow everywhere
                torch::NoGradGuard noGrad;
                for (auto &item : model->named_parameters())
                    if (item.key().find("lora_B") != std::string::npos)
                        item.value().normal_(0.0, 0.1);
            }
            model->train();
            auto loss = model->loss(x, y);
            loss.backward();
            losses[recompute] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                if (item.value().grad().defined())
                    grads[recompute][item.key()] = item.value().grad().clone();
        }
        QCOMPARE(losses[1], losses[0]);
        QCOMPARE(grads[1].size(), grads[0].size());
        for (const auto &[name, g] : grads[0]) {
            QVERIFY2(grads[1].count(name), name.c_str());
            QVERIFY2(torch::allclose(grads[1][name], g, 1e-6, 1e-7), name.c_str());
        }
        // The routers train through the auxiliary loss in both (with full fine-tuning).
        if (!lora)
            QVERIFY(grads[0].count("model.layers.1.mlp.gate.weight"));
    }

    // The module tree names every parameter as the family's checkpoints and the parameter table do.
    void parametersAreNamedAsTheTable_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("qkNorm");
        QTest::newRow("qwen2_moe, shared expert") << QStringLiteral("qwen2_moe") << QStringLiteral("none");
        QTest::newRow("mixtral: block_sparse_moe, w1 w2 w3") << QStringLiteral("mixtral") << QStringLiteral("none");
        QTest::newRow("qwen3_moe: per-head q/k norm") << QStringLiteral("qwen3_moe") << QStringLiteral("head");
        QTest::newRow("olmoe: q/k norm over the projection") << QStringLiteral("olmoe") << QStringLiteral("full");
    }
    void parametersAreNamedAsTheTable()
    {
        QFETCH(QString, family);
        QFETCH(QString, qkNorm);
        RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
        c.model.family = family.toStdString();
        c.model.qkNorm = *parseEnum<QkNorm>(qkNorm.toStdString());
        if (family == QLatin1String("mixtral"))
            c.model.moe.sharedExpertIntermediateSize = 0, c.model.moe.sharedExpertGate = false;
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        std::map<std::string, std::vector<int64_t>> built;
        for (const auto &item : model->named_parameters())
            built[item.key()] = item.value().sizes().vec();
        std::map<std::string, std::vector<int64_t>> table;
        for (const auto &p : parameterTable(c))
            table[p.name] = p.shape;
        QCOMPARE(built.size(), table.size());
        for (const auto &[name, shape] : table) {
            QVERIFY2(built.count(name), name.c_str());
            QVERIFY2(built[name] == shape, name.c_str());
        }
        if (family == QLatin1String("mixtral"))
            QVERIFY(table.count("model.layers.1.block_sparse_moe.experts.3.w2.weight"));
    }
};

QTEST_GUILESS_MAIN(TestSparseMoe)
#include "tst_sparse_moe.moc"
