// DeepSeek-V3's multi-head latent attention and its sigmoid, group-limited router against float64
// references written from the formulas (each head's query and key built by hand from the weights,
// each pair turned by its angle; each token's experts picked in a loop), outputs and gradients; and
// a small DeepSeek-V3-shaped model end to end: names as the checkpoints, recompute's gradients,
// LoRA on every linear.
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "model/LatentAttention.h"
#include "model/Transformer.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <set>

using namespace pb;

namespace {

// A DeepSeek-V3-shaped model small enough for the CPU: 3 layers (the first dense), 8 experts in 4
// groups, 2 groups and 3 experts a token, shared experts of twice the expert width.
RunConfig tinyDeepseek(int64_t qLoraRank, bool interleave = true, bool bias = false)
{
    RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
    c.train.precision = Precision::Fp32;
    ModelShape &m = c.model;
    m.family = "deepseek_v3";
    m.layers = 3;
    m.hiddenSize = 48;
    m.attentionHeads = m.kvHeads = 4;
    m.headDim = 8;
    m.intermediateSize = 80;
    m.qkNorm = QkNorm::None;
    m.attentionBias = m.traits.outputBias = bias;
    m.latent = {qLoraRank, 16, 12, 8, 10, interleave};
    MoeConfig &e = m.moe;
    e.experts = 8;
    e.expertsPerToken = 3;
    e.expertIntermediateSize = 16;
    e.sharedExpertIntermediateSize = 32;
    e.sharedExpertGate = false;
    e.normalizeTopK = true;
    e.sparseStep = 1;
    e.denseLayers = {0};
    e.auxLossWeight = 0;
    e.scoring = RouterScoring::Sigmoid;
    e.groups = 4;
    e.groupsPerToken = 2;
    e.scoreCorrectionBias = true;
    e.routedScale = 2.5;
    c.train.lora.targets = {"all-linear"};
    return c;
}

void randomise(torch::nn::Module &m, uint64_t seed, torch::ScalarType type)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    for (auto &p : m.parameters()) {
        p.set_data(torch::empty(p.sizes(), p.options().dtype(type)));
        p.normal_(0.0, 0.3);
    }
}

// Transformers' RMSNorm in float64.
torch::Tensor rms(const torch::Tensor &x, const torch::Tensor &w, double eps) { return w * x * torch::rsqrt(x.pow(2).mean(-1, true) + eps); }

// The rotation of one vector's pairs by position `p`: pairs (2i, 2i+1) when interleaved, else
// (i, i + d/2), each turned by p * theta^(-2i/d). Applied to q and k alike, so a head's products are
// those of the model whatever order it keeps the dimensions in.
torch::Tensor turn(const torch::Tensor &v, const std::vector<double> &freq, int64_t p, bool interleaved)
{
    const int64_t d = v.size(-1);
    auto out = v.clone();
    for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + d / 2;
        const double angle = static_cast<double>(p) * freq[static_cast<size_t>(i)];
        const auto x0 = v.select(-1, a), x1 = v.select(-1, b);
        out.select(-1, a).copy_(x0 * std::cos(angle) - x1 * std::sin(angle));
        out.select(-1, b).copy_(x0 * std::sin(angle) + x1 * std::cos(angle));
    }
    return out;
}

// Latent attention by the formulas, one head and one query position at a time. Differentiable in
// x and in the module's weights (the per-position rotation copies through autograd).
torch::Tensor referenceAttention(LatentSelfAttentionImpl &a, const LatentAttention &l, int64_t heads, const torch::Tensor &x, const std::vector<double> &freq,
                                 double scale)
{
    const int64_t b = x.size(0), t = x.size(1);
    auto lin = [](const torch::Tensor &in, const LoraLinear &p) { return p->bias.defined() ? torch::matmul(in, p->weight.t()) + p->bias : torch::matmul(in, p->weight.t()); };
    const auto qAll = a.q ? lin(x, a.q) : lin(rms(lin(x, a.qA), a.qANorm->weight, 1e-6), a.qB);   // [B, T, H*qk]
    const auto kvA = lin(x, a.kvA);                                                                  // [B, T, r + rope]
    const auto latent = rms(kvA.narrow(-1, 0, l.kvLoraRank), a.kvANorm->weight, 1e-6);
    const auto kvAll = lin(latent, a.kvB);                                                           // [B, T, H*(nope+v)]
    const int64_t qk = l.qkHeadDim(), kvw = l.qkNopeHeadDim + l.vHeadDim;
    std::vector<torch::Tensor> batches;
    for (int64_t bi = 0; bi < b; ++bi) {
        std::vector<torch::Tensor> rows;
        for (int64_t ti = 0; ti < t; ++ti) {
            std::vector<torch::Tensor> headOuts;
            for (int64_t h = 0; h < heads; ++h) {
                const auto qh = qAll[bi][ti].narrow(0, h * qk, qk);
                const auto query = torch::cat({qh.narrow(0, 0, l.qkNopeHeadDim), turn(qh.narrow(0, l.qkNopeHeadDim, l.qkRopeHeadDim), freq, ti, l.ropeInterleave)});
                std::vector<torch::Tensor> scores, values;
                for (int64_t s = 0; s <= ti; ++s) {
                    const auto kvh = kvAll[bi][s].narrow(0, h * kvw, kvw);
                    const auto sharedRot = kvA[bi][s].narrow(0, l.kvLoraRank, l.qkRopeHeadDim); // one rotary key for all heads
                    const auto key = torch::cat({kvh.narrow(0, 0, l.qkNopeHeadDim), turn(sharedRot, freq, s, l.ropeInterleave)});
                    scores.push_back((query * key).sum() * scale);
                    values.push_back(kvh.narrow(0, l.qkNopeHeadDim, l.vHeadDim));
                }
                const auto p = torch::softmax(torch::stack(scores), 0);
                headOuts.push_back((p.unsqueeze(1) * torch::stack(values)).sum(0));
            }
            rows.push_back(torch::cat(headOuts));
        }
        batches.push_back(torch::stack(rows));
    }
    return lin(torch::stack(batches), a.o);
}

double relativeError(const torch::Tensor &got, const torch::Tensor &want)
{
    return (got.to(torch::kDouble) - want).abs().max().item<double>() / std::max(want.abs().max().item<double>(), 1e-30);
}

// The experts a token's scores choose, in a plain loop: biased scores; a group's score the sum of
// its two best; the best groups kept; the others' experts scored 0 (Transformers' masked_fill);
// the k best of what is left.
std::set<int64_t> referenceChoice(const std::vector<double> &scores, const std::vector<double> &bias, int64_t groups, int64_t keepGroups, int64_t k)
{
    const int64_t n = static_cast<int64_t>(scores.size()), per = n / groups;
    std::vector<double> choice(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e)
        choice[static_cast<size_t>(e)] = scores[static_cast<size_t>(e)] + bias[static_cast<size_t>(e)];
    std::vector<std::pair<double, int64_t>> groupScores;
    for (int64_t g = 0; g < groups; ++g) {
        std::vector<double> in(choice.begin() + g * per, choice.begin() + (g + 1) * per);
        std::sort(in.rbegin(), in.rend());
        groupScores.push_back({in[0] + (per > 1 ? in[1] : 0.0), g});
    }
    std::sort(groupScores.rbegin(), groupScores.rend());
    std::vector<std::pair<double, int64_t>> masked;
    for (int64_t e = 0; e < n; ++e) {
        bool kept = false;
        for (int64_t i = 0; i < keepGroups; ++i)
            kept = kept || groupScores[static_cast<size_t>(i)].second == e / per;
        masked.push_back({kept ? choice[static_cast<size_t>(e)] : 0.0, e});
    }
    std::sort(masked.rbegin(), masked.rend());
    std::set<int64_t> chosen;
    for (int64_t i = 0; i < k; ++i)
        chosen.insert(masked[static_cast<size_t>(i)].second);
    return chosen;
}

std::set<int64_t> rowSet(const torch::Tensor &chosen, int64_t row)
{
    std::set<int64_t> s;
    for (int64_t i = 0; i < chosen.size(1); ++i)
        s.insert(chosen[row][i].item<int64_t>());
    return s;
}

} // namespace

class TestLatentAttention : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matchesTheFormula_data()
    {
        QTest::addColumn<int>("qLoraRank");
        QTest::addColumn<bool>("interleave");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("yarn");
        QTest::addColumn<bool>("fusedKernels");
        QTest::newRow("q_proj, interleaved (Moonlight)") << 0 << true << false << false << false;
        QTest::newRow("query latent, interleaved (DeepSeek-V3)") << 24 << true << false << false << false;
        QTest::newRow("query latent, halves, biases") << 24 << false << true << false << false;
        QTest::newRow("yarn mscale_all_dim scales the softmax") << 0 << true << false << true << false;
        QTest::newRow("fused norms and rotary") << 24 << true << true << false << true;
    }
    void matchesTheFormula()
    {
        QFETCH(int, qLoraRank);
        QFETCH(bool, interleave);
        QFETCH(bool, bias);
        QFETCH(bool, yarn);
        QFETCH(bool, fusedKernels);
        RunConfig c = tinyDeepseek(qLoraRank, interleave, bias);
        if (yarn) {
            c.model.ropeScaling.type = RopeScalingType::Yarn;
            c.model.ropeScaling.factor = 40;
            c.model.ropeScaling.originalMaxPositions = 64;
            c.model.ropeScaling.mscale = c.model.ropeScaling.mscaleAllDim = 1.0;
        }
        if (fusedKernels)
            c.train.kernels = KernelPath::Fused;
        const LatentAttention &l = c.model.latent;
        const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
        LatentSelfAttentionImpl attention(c, ModelRuntime {false, false}, f64);
        randomise(attention, 7, torch::kDouble);
        // DeepseekV3Attention.scaling: qk_head_dim^-0.5, times (0.1 ln(factor) + 1)^2 with mscale_all_dim 1.
        const double mscale = yarn ? 0.1 * std::log(40.0) + 1.0 : 1.0;
        const double scale = mscale * mscale / std::sqrt(20.0);
        QVERIFY(std::fabs(attention.scale() - scale) <= 1e-15 * scale);

        const int64_t t = 7;
        double attentionFactor = 1;
        const auto invFreq = rotaryInverseFrequencies(l.qkRopeHeadDim, c.model.ropeTheta, c.model.ropeScaling, torch::kCPU, t, &attentionFactor);
        QCOMPARE(attentionFactor, 1.0); // mscale / mscale_all_dim
        std::vector<double> freq;
        for (int64_t i = 0; i < invFreq.size(0); ++i)
            freq.push_back(invFreq[i].item<double>());
        // The model's tables (fp32, the frequencies repeated as two halves).
        const auto angles = torch::outer(torch::arange(t, torch::kFloat), invFreq);
        LayerInputs in;
        in.cos = torch::cat({angles, angles}, -1).cos();
        in.sin = torch::cat({angles, angles}, -1).sin();

        torch::manual_seed(11);
        const auto x = torch::randn({2, t, c.model.hiddenSize}, f64).requires_grad_(true);
        const auto out = attention.forward(x, in);
        QCOMPARE(out.sizes(), x.sizes());
        const auto xr = x.detach().clone().requires_grad_(true);
        const auto want = referenceAttention(attention, l, c.model.attentionHeads, xr, freq, scale);
        // The tables are fp32 and the norms work in fp32, as the model's: a few 1e-7 apart.
        const double tolerance = 2e-5;
        QVERIFY2(relativeError(out, want) < tolerance, qPrintable(QString::number(relativeError(out, want))));

        // Gradients of the input and of every weight, through the same upstream gradient.
        torch::manual_seed(12);
        const auto upstream = torch::randn(out.sizes(), f64);
        const auto params = attention.parameters();
        const auto got = torch::autograd::grad({out}, [&] { std::vector<torch::Tensor> v {x}; v.insert(v.end(), params.begin(), params.end()); return v; }(), {upstream});
        const auto ref = torch::autograd::grad({want}, [&] { std::vector<torch::Tensor> v {xr}; v.insert(v.end(), params.begin(), params.end()); return v; }(), {upstream});
        const auto names = attention.named_parameters();
        for (size_t i = 0; i < got.size(); ++i) {
            const std::string what = i == 0 ? "input" : names[i - 1].key();
            QVERIFY2(relativeError(got[i], ref[i]) < tolerance, qPrintable(QString::fromStdString(what) + QStringLiteral(": ") + QString::number(relativeError(got[i], ref[i]))));
        }
    }

    void sigmoidGroupRouting_data()
    {
        QTest::addColumn<int>("groups");
        QTest::addColumn<int>("keepGroups");
        QTest::addColumn<int>("k");
        QTest::addColumn<bool>("normalize");
        QTest::addColumn<double>("scale");
        QTest::newRow("DeepSeek-V3-like: 4 groups, 2 kept, top 3, x2.5") << 4 << 2 << 3 << true << 2.5;
        QTest::newRow("Moonlight-like: one group, top 3, x2.446") << 1 << 1 << 3 << true << 2.446;
        QTest::newRow("raw weights, 2 groups of 4, 1 kept, top 2") << 2 << 1 << 2 << false << 1.0;
    }
    void sigmoidGroupRouting()
    {
        QFETCH(int, groups);
        QFETCH(int, keepGroups);
        QFETCH(int, k);
        QFETCH(bool, normalize);
        QFETCH(double, scale);
        RunConfig c = tinyDeepseek(0);
        MoeConfig &e = c.model.moe;
        e.groups = groups;
        e.groupsPerToken = keepGroups;
        e.expertsPerToken = k;
        e.normalizeTopK = normalize;
        e.routedScale = scale;
        const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
        SparseMoeImpl moe(c, f64);
        randomise(moe, 21, torch::kDouble);
        QVERIFY(moe.scoreCorrectionBias.defined());
        QCOMPARE(moe.scoreCorrectionBias.scalar_type(), torch::kFloat); // fp32, as Transformers keeps it
        torch::manual_seed(22);
        moe.scoreCorrectionBias.copy_(torch::randn({e.experts}) * 0.2);
        const int64_t tokens = 37;
        const auto x = torch::randn({1, tokens, c.model.hiddenSize}, f64).requires_grad_(true);
        const auto out = moe.forward(x);

        // The reference: scores, choice and weights token by token in doubles, experts run densely.
        const auto flat = x.reshape({tokens, -1});
        const auto scores = torch::sigmoid(torch::matmul(flat, moe.router->weight.t()));
        std::vector<double> bias;
        for (int64_t i = 0; i < e.experts; ++i)
            bias.push_back(moe.scoreCorrectionBias[i].item<double>());
        const auto sharedOut = moe.shared->forward(flat);
        std::vector<torch::Tensor> rows;
        const auto chosen = moe.sigmoidChoice(moe.sigmoidScores(flat.detach()));
        for (int64_t row = 0; row < tokens; ++row) {
            std::vector<double> s;
            for (int64_t i = 0; i < e.experts; ++i)
                s.push_back(scores[row][i].item<double>());
            const auto expected = referenceChoice(s, bias, groups, keepGroups, k);
            QCOMPARE(rowSet(chosen, row), expected);
            torch::Tensor sum = torch::zeros({}, f64);
            for (int64_t ex : expected)
                sum = sum + scores[row][ex];
            torch::Tensor mix = torch::zeros({c.model.hiddenSize}, f64);
            for (int64_t ex : expected) {
                const auto w = (normalize ? scores[row][ex] / (sum + 1e-20) : scores[row][ex]) * scale;
                mix = mix + w * moe.expertList[static_cast<size_t>(ex)]->forward(flat[row].unsqueeze(0)).squeeze(0);
            }
            rows.push_back(sharedOut[row] + mix);
        }
        const auto want = torch::stack(rows);
        // The router works in fp32 (DeepseekV3TopkRouter casts its input and weight), the reference in doubles.
        QVERIFY2(relativeError(out.reshape({tokens, -1}), want) < 1e-5, qPrintable(QString::number(relativeError(out.reshape({tokens, -1}), want))));
        // The router learns through the chosen scores (the bias never trains).
        const auto upstream = torch::randn(out.sizes(), f64);
        const auto got = torch::autograd::grad({out}, {x, moe.router->weight}, {upstream});
        const auto ref = torch::autograd::grad({want.reshape(out.sizes())}, {x, moe.router->weight}, {upstream});
        QVERIFY2(relativeError(got[0], ref[0]) < 1e-5, "input gradient");
        QVERIFY2(relativeError(got[1], ref[1]) < 1e-5, "router gradient");
        QVERIFY(!moe.scoreCorrectionBias.requires_grad());
    }

    void biasChangesTheChoice()
    {
        // One token, 8 experts in 4 groups, 2 groups kept, top 2. Scores (sigmoid of the logits) fall
        // from expert 0 to 7; without a bias groups 0 and 1 win and experts 0, 1 are chosen. A bias
        // of +1 on expert 6 lifts group 3 ({6, 7}) above group 1 and expert 6 above expert 1; the
        // weights stay the unbiased scores of experts 0 and 6.
        RunConfig c = tinyDeepseek(0);
        MoeConfig &e = c.model.moe;
        e.groups = 4;
        e.groupsPerToken = 2;
        e.expertsPerToken = 2;
        e.routedScale = 1.0;
        const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
        SparseMoeImpl moe(c, f64);
        randomise(moe, 3, torch::kDouble);
        const std::vector<double> logits {2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5};
        const auto scores = torch::sigmoid(torch::tensor(logits, f64)).unsqueeze(0);
        auto unbiased = rowSet(moe.sigmoidChoice(scores), 0);
        QCOMPARE(unbiased, (std::set<int64_t> {0, 1}));
        moe.scoreCorrectionBias.zero_();
        moe.scoreCorrectionBias[6] = 1.0;
        const auto chosen = moe.sigmoidChoice(scores);
        QCOMPARE(rowSet(chosen, 0), (std::set<int64_t> {0, 6}));
        std::vector<double> bias(8, 0.0);
        bias[6] = 1.0;
        std::vector<double> s;
        for (double v : logits)
            s.push_back(1.0 / (1.0 + std::exp(-v)));
        QCOMPARE(referenceChoice(s, bias, 4, 2, 2), (std::set<int64_t> {0, 6}));
        // A negative bias can fall below the 0 given to the experts of dropped groups, as in
        // Transformers: 2 groups of 4, one kept, top 3; experts 2 and 3 biased to -0.9 lose to the
        // zeros of group 1, so the third choice is one of experts 4..7, not 2 or 3.
        e.groups = 2;
        e.groupsPerToken = 1;
        e.expertsPerToken = 3;
        SparseMoeImpl narrow(c, f64);
        narrow.scoreCorrectionBias[2] = -0.9;
        narrow.scoreCorrectionBias[3] = -0.9;
        const auto masked = rowSet(narrow.sigmoidChoice(scores), 0);
        QCOMPARE(masked.size(), size_t(3));
        QVERIFY(masked.count(0) && masked.count(1) && !masked.count(2) && !masked.count(3));
        bias.assign(8, 0.0);
        bias[2] = bias[3] = -0.9;
        const auto expectedMasked = referenceChoice(s, bias, 2, 1, 3);
        QVERIFY(expectedMasked.count(0) && expectedMasked.count(1) && *expectedMasked.rbegin() >= 4);
        QVERIFY(*masked.rbegin() >= 4);
    }

    void modelNamesAndCounts()
    {
        for (int64_t qLoraRank : {int64_t(0), int64_t(24)}) {
            RunConfig c = tinyDeepseek(qLoraRank, true, true);
            DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
            std::set<std::string> built;
            int64_t numel = 0;
            for (const auto &p : model->named_parameters()) {
                built.insert(p.key());
                numel += p.value().numel();
            }
            std::set<std::string> listed;
            for (const auto &p : parameterTable(c))
                listed.insert(p.name);
            QCOMPARE(built, listed);
            QCOMPARE(numel, countParameters(c).total);
            // Names as DeepSeek-V3's checkpoints hold them.
            for (const char *name : {"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.7.down_proj.weight",
                                     "model.layers.2.mlp.shared_experts.up_proj.weight", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
                                     "model.layers.1.self_attn.kv_a_proj_with_mqa.bias", "model.layers.1.self_attn.kv_a_layernorm.weight",
                                     "model.layers.1.self_attn.kv_b_proj.weight", "model.layers.1.self_attn.o_proj.bias"})
                QVERIFY2(built.count(name), name);
            QCOMPARE(built.count("model.layers.1.self_attn.q_a_layernorm.weight"), size_t(qLoraRank > 0 ? 1 : 0));
            QCOMPARE(built.count("model.layers.1.self_attn.q_proj.weight"), size_t(qLoraRank > 0 ? 0 : 1));
            // The correction bias is a buffer: loaded and saved, not a parameter (Transformers counts none).
            std::set<std::string> buffers;
            for (const auto &b : model->named_buffers())
                buffers.insert(b.key());
            QVERIFY(buffers.count("model.layers.1.mlp.gate.e_score_correction_bias"));
            QVERIFY(!buffers.count("model.layers.0.mlp.gate.e_score_correction_bias"));
        }
    }

    // Recomputed blocks give the plain backward's gradients; LoRA with all-linear adapts every
    // projection of the latent attention and of the experts.
    void recomputeAndLora_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<QString>("kernels");
        QTest::newRow("full eager") << "full" << "eager";
        QTest::newRow("full fused") << "full" << "fused";
        QTest::newRow("lora all-linear") << "lora" << "eager";
    }
    void recomputeAndLora()
    {
        QFETCH(QString, mode);
        QFETCH(QString, kernels);
        std::vector<std::vector<torch::Tensor>> grads;
        double losses[2] = {0, 0};
        for (bool recompute : {false, true}) {
            RunConfig c = tinyDeepseek(24);
            c.train.mode = mode == QLatin1String("lora") ? TrainMode::Lora : TrainMode::Full;
            c.train.kernels = kernels == QLatin1String("fused") ? KernelPath::Fused : KernelPath::Eager;
            c.train.recompute = recompute;
            DecoderModel model(c, ModelRuntime {false, recompute}, torch::kCPU);
            model->initialise(5);
            {
                torch::NoGradGuard noGrad;
                for (auto &p : model->named_parameters())
                    if (p.key().find("lora_B") != std::string::npos)
                        p.value().normal_(0, 0.02); // adapters that change the output
            }
            model->train();
            torch::manual_seed(6);
            const auto tokens = torch::randint(0, c.model.vocabSize, {2, 17}, torch::kLong);
            const auto loss = model->loss(tokens.slice(1, 0, 16), tokens.slice(1, 1, 17));
            loss.backward();
            losses[recompute ? 1 : 0] = loss.item<double>();
            std::vector<torch::Tensor> g;
            int adapted = 0;
            for (const auto &p : model->named_parameters())
                if (p.value().requires_grad()) {
                    QVERIFY2(p.value().grad().defined(), p.key().c_str());
                    g.push_back(p.value().grad().clone());
                    adapted += p.key().find("lora_A") != std::string::npos ? 1 : 0;
                }
            if (mode == QLatin1String("lora")) {
                // Per layer: q_a, q_b, kv_a, kv_b, o; layer 0's dense MLP 3; layers 1-2: 8 experts x 3 + shared 3.
                QCOMPARE(adapted, 3 * 5 + 3 + 2 * (8 * 3 + 3));
            }
            grads.push_back(g);
        }
        QCOMPARE(losses[0], losses[1]);
        QCOMPARE(grads[0].size(), grads[1].size());
        for (size_t i = 0; i < grads[0].size(); ++i)
            QVERIFY2(torch::allclose(grads[0][i], grads[1][i], 1e-5, 1e-7), qPrintable(QString::number(i)));
    }
};

QTEST_GUILESS_MAIN(TestLatentAttention)
#include "tst_latent_attention.moc"
