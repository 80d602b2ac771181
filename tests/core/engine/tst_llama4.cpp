// Llama 4's text model against a float64 reference written from the formulas: chunked attention as
// a direct masked softmax (key j seen from query i when j <= i and both lie in one chunk) on the
// rotary layers and full causal attention on the NoPE ones; each pair (2i, 2i+1) turned by its
// angle; the weightless L2 norm of each head's q and k after the rotary; the query temperature
// 1 + beta ln(1 + floor((pos + 1) / length)) on the NoPE layers only; the top-k router on the logits
// whose sigmoid scales each chosen expert's input; a shared expert; dense layers between sparse
// ones. Logits, loss and gradients, with and without recompute; names as the checkpoints.
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "model/Transformer.h"

#include <QtTest>

#include <cmath>
#include <map>

using namespace pb;

namespace {

// Four layers (the 4th without rotary), sparse layers 1 and 3, chunks of 5 positions over 13, a
// temperature length of 4 so the NoPE layer's queries are scaled from position 3 on.
RunConfig tinyLlama4(int64_t k = 1, int64_t chunk = 5)
{
    RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
    c.train.precision = Precision::Fp32;
    ModelShape &m = c.model;
    m.family = "llama4_text";
    m.layers = 4;
    m.hiddenSize = 32;
    m.attentionHeads = 4;
    m.kvHeads = 2;
    m.headDim = 8;
    m.intermediateSize = 40;
    m.vocabSize = 96;
    m.ropeTheta = 500000;
    m.qkNorm = QkNorm::L2;
    ModelTraits &t = m.traits;
    t.ropeInterleaved = t.ropeFp32 = true;
    t.noRopeLayers.every = 4;
    t.attentionChunk = chunk;
    t.queryTemperatureBeta = 0.1;
    t.queryTemperatureLength = 4;
    t.queryTemperatureOffset = 1;
    t.queryTemperatureNoRope = t.queryTemperatureFp32 = true;
    MoeConfig &e = m.moe;
    e.experts = 4;
    e.expertsPerToken = k;
    e.expertIntermediateSize = 12;
    e.sharedExpertIntermediateSize = 12;
    e.sharedExpertGate = false;
    e.normalizeTopK = false;
    e.sparseStep = 2;
    e.denseLayers.clear();
    e.auxLossWeight = 0;
    e.scoring = RouterScoring::Sigmoid;
    e.scaleExpertInput = true;
    e.stackedExperts = true;
    e.interleavedGateUp = false;
    return c;
}

using Weights = std::map<std::string, torch::Tensor>;

torch::Tensor rms(const torch::Tensor &x, double eps) { return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps); }

torch::Tensor swiglu(const torch::Tensor &x, const torch::Tensor &gate, const torch::Tensor &up, const torch::Tensor &down)
{
    return torch::matmul(torch::silu(torch::matmul(x, gate)) * torch::matmul(x, up), down);
}

// Expert e's SwiGLU from the stacked tensors (or, before they exist, one MLP per expert).
torch::Tensor expert(const Weights &w, const std::string &prefix, int64_t e, int64_t width, const torch::Tensor &x)
{
    const auto stacked = w.find(prefix + "experts.gate_up_proj");
    if (stacked != w.end()) {
        const auto gu = stacked->second[e];
        return swiglu(x, gu.narrow(1, 0, width), gu.narrow(1, width, width), w.at(prefix + "experts.down_proj")[e]);
    }
    const std::string p = prefix + "experts." + std::to_string(e) + ".";
    return swiglu(x, w.at(p + "gate_proj.weight").t(), w.at(p + "up_proj.weight").t(), w.at(p + "down_proj.weight").t());
}

// The whole model in float64 from its weights, the formulas written out.
torch::Tensor referenceLogits(const RunConfig &c, const Weights &w, const torch::Tensor &ids)
{
    const ModelShape &m = c.model;
    const ModelTraits &t = m.traits;
    const int64_t b = ids.size(0), n = ids.size(1), heads = m.attentionHeads, kv = m.kvHeads, hd = m.effectiveHeadDim();
    auto h = w.at("model.embed_tokens.weight").index_select(0, ids.reshape({-1})).reshape({b, n, m.hiddenSize});
    // Angles p * theta^(-2i / hd) for the pairs (2i, 2i + 1).
    auto angle = torch::empty({n, hd / 2}, torch::kDouble);
    for (int64_t p = 0; p < n; ++p)
        for (int64_t i = 0; i < hd / 2; ++i)
            angle[p][i] = static_cast<double>(p) * std::pow(m.ropeTheta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    const auto cs = angle.cos().view({1, n, 1, hd / 2}), sn = angle.sin().view({1, n, 1, hd / 2});
    auto turn = [&](const torch::Tensor &x) { // x [B, T, heads, hd]
        const auto even = x.slice(-1, 0, hd, 2), odd = x.slice(-1, 1, hd, 2);
        return torch::stack({even * cs - odd * sn, odd * cs + even * sn}, -1).flatten(-2);
    };
    for (int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const bool rotary = (l + 1) % 4 != 0;
        const auto x = rms(h, m.normEps) * w.at(p + "input_layernorm.weight");
        auto q = torch::matmul(x, w.at(p + "self_attn.q_proj.weight").t()).view({b, n, heads, hd});
        auto k = torch::matmul(x, w.at(p + "self_attn.k_proj.weight").t()).view({b, n, kv, hd});
        const auto v = torch::matmul(x, w.at(p + "self_attn.v_proj.weight").t()).view({b, n, kv, hd});
        if (rotary) {
            q = rms(turn(q), m.normEps); // the L2 norm: RMS to 1 per head, no weight
            k = rms(turn(k), m.normEps);
        } else {
            auto scale = torch::empty({1, n, 1, 1}, torch::kDouble);
            for (int64_t i = 0; i < n; ++i)
                scale[0][i][0][0] = 1 + t.queryTemperatureBeta * std::log(1 + std::floor(static_cast<double>(i + 1) / static_cast<double>(t.queryTemperatureLength)));
            q = q * scale;
        }
        auto seen = torch::zeros({n, n}, torch::kBool);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j <= i; ++j)
                seen[i][j] = !rotary || j / t.attentionChunk == i / t.attentionChunk;
        const auto kx = k.repeat_interleave(heads / kv, 2), vx = v.repeat_interleave(heads / kv, 2);
        auto scores = torch::einsum("bihd,bjhd->bhij", {q, kx}) / std::sqrt(static_cast<double>(hd));
        scores = scores.masked_fill(seen.logical_not(), -INFINITY);
        const auto attended = torch::einsum("bhij,bjhd->bihd", {torch::softmax(scores, -1), vx}).reshape({b, n, heads * hd});
        h = h + torch::matmul(attended, w.at(p + "self_attn.o_proj.weight").t());
        const auto y = (rms(h, m.normEps) * w.at(p + "post_attention_layernorm.weight")).reshape({b * n, m.hiddenSize});
        torch::Tensor f;
        const std::string ff = p + "feed_forward.";
        auto mlp = [&](const std::string &q) { return swiglu(y, w.at(q + "gate_proj.weight").t(), w.at(q + "up_proj.weight").t(), w.at(q + "down_proj.weight").t()); };
        if (m.moe.sparse(l)) {
            const auto logits = torch::matmul(y, w.at(ff + "router.weight").t());
            const auto chosen = std::get<1>(torch::topk(logits, m.moe.expertsPerToken, -1));
            f = mlp(ff + "shared_expert.");
            for (int64_t e = 0; e < m.moe.experts; ++e) {
                // sigmoid(logit) where e is chosen, 0 elsewhere; the expert reads its input times it.
                const auto picked = chosen.eq(e).any(-1, true);
                const auto weight = picked.to(torch::kDouble) * torch::sigmoid(logits.narrow(1, e, 1));
                f = f + expert(w, ff, e, m.moe.expertIntermediateSize, weight * y);
            }
        } else {
            f = mlp(ff);
        }
        h = h + f.reshape({b, n, m.hiddenSize});
    }
    h = rms(h, m.normEps) * w.at("model.norm.weight");
    return torch::matmul(h, w.at("lm_head.weight").t());
}

Weights doubleWeights(DecoderModel &model)
{
    Weights w;
    for (const auto &item : model->named_parameters())
        w[item.key()] = item.value().detach().to(torch::kDouble).requires_grad_(true);
    return w;
}

torch::Tensor tokens(int64_t b, int64_t n, int64_t vocab, uint64_t seed)
{
    torch::manual_seed(seed);
    return torch::randint(vocab, {b, n}, torch::kLong);
}

} // namespace

class TestLlama4 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void namesAsTheCheckpoints()
    {
        const RunConfig c = tinyLlama4();
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        std::map<std::string, std::vector<int64_t>> shapes;
        for (const auto &item : model->named_parameters())
            shapes[item.key()] = item.value().sizes().vec();
        const std::vector<std::pair<std::string, std::vector<int64_t>>> expected {
            {"model.layers.0.feed_forward.gate_proj.weight", {40, 32}},
            {"model.layers.1.feed_forward.router.weight", {4, 32}},
            {"model.layers.1.feed_forward.experts.gate_up_proj", {4, 32, 24}},
            {"model.layers.1.feed_forward.experts.down_proj", {4, 12, 32}},
            {"model.layers.1.feed_forward.shared_expert.down_proj.weight", {32, 12}},
            {"model.layers.3.self_attn.o_proj.weight", {32, 32}}};
        for (const auto &[name, shape] : expected) {
            QVERIFY2(shapes.count(name), name.c_str());
            QCOMPARE(shapes[name], shape);
        }
        // The L2 norm has no weight; no layer has an "mlp." module.
        for (const auto &[name, shape] : shapes) {
            QVERIFY2(name.find("q_norm") == std::string::npos && name.find(".mlp.") == std::string::npos, name.c_str());
        }
        QCOMPARE(static_cast<int64_t>(shapes.size()), static_cast<int64_t>(parameterTable(c).size()));
    }

    void matchesTheFloat64Reference_data()
    {
        QTest::addColumn<int>("k");
        QTest::addColumn<int>("chunk");
        QTest::addColumn<int>("length");
        QTest::addColumn<bool>("recompute");
        QTest::newRow("top-1, chunks of 5 over 13") << 1 << 5 << 13 << false;
        QTest::newRow("top-1, recompute") << 1 << 5 << 13 << true;
        QTest::newRow("top-2, chunks of 3") << 2 << 3 << 11 << false;
        QTest::newRow("one chunk spans the sequence") << 1 << 16 << 13 << false;
    }
    void matchesTheFloat64Reference()
    {
        QFETCH(int, k);
        QFETCH(int, chunk);
        QFETCH(int, length);
        QFETCH(bool, recompute);
        const RunConfig c = tinyLlama4(k, chunk);
        DecoderModel model(c, ModelRuntime {false, recompute}, torch::kCPU);
        model->initialise(7);
        {
            // Larger weights than initialise's 0.02, so routing, norms and the temperature all matter.
            torch::NoGradGuard noGrad;
            torch::manual_seed(3);
            for (auto &p : model->parameters())
                p.normal_(p.dim() == 1 ? 1.0 : 0.0, p.dim() == 1 ? 0.1 : 0.3);
        }
        model->train();
        const auto ids = tokens(2, length, c.model.vocabSize, 11);
        const auto targets = tokens(2, length, c.model.vocabSize, 12);
        Weights w = doubleWeights(model);
        const auto refLogits = referenceLogits(c, w, ids);
        const auto refLoss = torch::nn::functional::cross_entropy(refLogits.reshape({-1, c.model.vocabSize}), targets.reshape({-1}));
        refLoss.backward();

        torch::Tensor logits;
        {
            torch::NoGradGuard noGrad;
            logits = model->logits(ids);
        }
        QVERIFY(torch::allclose(logits.to(torch::kDouble), refLogits.detach(), 1e-4, 1e-4));
        const auto loss = model->loss(ids, targets);
        loss.backward();
        QVERIFY2(std::abs(loss.item<double>() - refLoss.item<double>()) < 1e-5 * refLoss.item<double>(),
                 qPrintable(QStringLiteral("%1 vs %2").arg(loss.item<double>(), 0, 'g', 12).arg(refLoss.item<double>(), 0, 'g', 12)));
        int compared = 0;
        for (const auto &item : model->named_parameters()) {
            const auto &ref = w.at(item.key()).grad();
            QVERIFY2(item.value().grad().defined() && ref.defined(), item.key().c_str());
            const double scale = ref.abs().max().item<double>() + 1e-6;
            const double diff = (item.value().grad().to(torch::kDouble) - ref).abs().max().item<double>();
            QVERIFY2(diff <= 1e-4 * scale + 1e-6, qPrintable(QStringLiteral("%1: %2 of %3").arg(QString::fromStdString(item.key())).arg(diff).arg(scale)));
            ++compared;
        }
        QVERIFY(compared > 20);
    }

    // Recompute under LoRA: the sparse layers' router statistics (none, Llama 4 has no auxiliary
    // loss) need no gradient; the adapters' gradients are the plain backward's.
    void loraRecomputeMatchesPlainBackward()
    {
        std::vector<torch::Tensor> grads[2];
        for (int recompute = 0; recompute < 2; ++recompute) {
            RunConfig c = tinyLlama4();
            c.train.mode = TrainMode::Lora;
            c.train.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
            DecoderModel model(c, ModelRuntime {false, recompute == 1}, torch::kCPU);
            model->initialise(5);
            {
                torch::NoGradGuard noGrad;
                torch::manual_seed(9);
                for (auto &item : model->named_parameters())
                    if (item.key().find("lora_B") != std::string::npos)
                        item.value().normal_(0.0, 0.1);
            }
            model->train();
            model->loss(tokens(2, 13, c.model.vocabSize, 1), tokens(2, 13, c.model.vocabSize, 2)).backward();
            for (const auto &p : model->trainableParameters())
                grads[recompute].push_back(p.grad().clone());
        }
        QVERIFY(!grads[0].empty());
        QCOMPARE(grads[0].size(), grads[1].size());
        for (size_t i = 0; i < grads[0].size(); ++i)
            QVERIFY(torch::allclose(grads[0][i], grads[1][i], 1e-5, 1e-6));
    }
};

QTEST_GUILESS_MAIN(TestLlama4)
#include "tst_llama4.moc"
