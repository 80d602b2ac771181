// gpt-oss's pieces in float64 against formulas written out here: attention sinks (the composite,
// and the fused-kernel form with one more key, gradients included), the clamped SwiGLU, the
// stacked experts against one plain matmul per expert (interleaved and halved gate/up, with and
// without biases), and the router (top-k of the biased logits, softmax over the k).
#include "config/HfImport.h"
#include "config/ParameterTable.h"
#include "config/Presets.h"
#include "model/SinkAttention.h"
#include "model/StackedExperts.h"
#include "model/Transformer.h"
#include "model/WeightLoader.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using namespace pb;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kDouble);

void randomise(torch::nn::Module &m, uint64_t seed, double scale = 0.3)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    for (auto &p : m.parameters()) {
        p.set_data(torch::empty(p.sizes(), p.options()));
        p.normal_(0.0, scale);
    }
}

// Attention with a sink, one (batch, head, query) at a time: w_j = exp(s_j) / (sum of exp(s_j) over
// the seen keys + exp(sink)), out = sum_j w_j v_j.
torch::Tensor sinkByHand(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale, const torch::Tensor &seen)
{
    const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3), groups = heads / k.size(1);
    auto out = torch::zeros({b, heads, t, d}, kDouble);
    auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
    auto sa = sinks.accessor<double, 1>();
    auto ma = seen.accessor<bool, 2>();
    auto oa = out.accessor<double, 4>();
    for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < t; ++i) {
                std::vector<double> e(static_cast<size_t>(t), 0.0);
                double denominator = std::exp(sa[h]);
                for (int64_t j = 0; j < t; ++j) {
                    if (!ma[i][j])
                        continue;
                    double s = 0;
                    for (int64_t x = 0; x < d; ++x)
                        s += qa[bi][h][i][x] * ka[bi][h / groups][j][x];
                    e[static_cast<size_t>(j)] = std::exp(s * scale);
                    denominator += e[static_cast<size_t>(j)];
                }
                for (int64_t j = 0; j < t; ++j)
                    for (int64_t x = 0; x < d; ++x)
                        oa[bi][h][i][x] += e[static_cast<size_t>(j)] / denominator * va[bi][h / groups][j][x];
            }
    return out;
}

torch::Tensor causal(int64_t t) { return torch::ones({t, t}, torch::kBool).tril(); }
torch::Tensor window(int64_t t, int64_t w)
{
    const auto pos = torch::arange(t, torch::kLong);
    const auto distance = pos.unsqueeze(1) - pos.unsqueeze(0);
    return distance.ge(0).logical_and(distance.lt(w));
}

// gpt-oss's activation written out element by element.
double clampedSwiglu(double gate, double up, double limit, double alpha)
{
    gate = std::min(gate, limit);
    up = std::max(-limit, std::min(up, limit));
    return (up + 1) * gate / (1 + std::exp(-alpha * gate));
}

RunConfig gptOssConfig()
{
    RunConfig c = presetConfig(QStringLiteral("tiny-moe"));
    ModelShape &m = c.model;
    m.family = "gpt_oss";
    m.attentionHeads = 4;
    m.kvHeads = 2;
    m.headDim = 8;
    m.attentionBias = m.traits.outputBias = true;
    m.traits.attentionSinks = true;
    m.traits.normScaleInFp32 = true;
    m.traits.slidingWindow = 3;
    m.traits.globalLayers = LayerSelection {2, {}};
    m.moe.experts = 5;
    m.moe.expertsPerToken = 2;
    m.moe.expertIntermediateSize = 12;
    m.moe.sharedExpertIntermediateSize = 0;
    m.moe.sharedExpertGate = false;
    m.qkNorm = QkNorm::None;
    m.moe.denseLayers = {};
    m.moe.normalizeTopK = false;
    m.moe.routerBias = m.moe.softmaxAfterTopK = true;
    m.moe.stackedExperts = m.moe.interleavedGateUp = m.moe.expertBias = true;
    m.moe.swigluLimit = 0.7; // small, so the random activations reach the clamps
    c.train.precision = Precision::Fp32;
    return c;
}

// A .safetensors file of `tensors` (F32 or U8), written byte by byte as the format says.
void writeSafetensors(const QString &file, const std::vector<std::pair<std::string, torch::Tensor>> &tensors)
{
    QJsonObject header;
    QByteArray data;
    for (const auto &[name, t] : tensors) {
        const auto c = t.contiguous();
        const qint64 begin = data.size();
        data.append(reinterpret_cast<const char *>(c.data_ptr()), static_cast<qsizetype>(c.nbytes()));
        QJsonArray shape;
        for (auto d : c.sizes())
            shape.append(static_cast<qint64>(d));
        header.insert(QString::fromStdString(name), QJsonObject {{"dtype", c.scalar_type() == torch::kUInt8 ? "U8" : "F32"}, {"shape", shape},
                                                                 {"data_offsets", QJsonArray {begin, static_cast<qint64>(data.size())}}});
    }
    QByteArray text = QJsonDocument(header).toJson(QJsonDocument::Compact);
    while (text.size() % 8)
        text.append(' ');
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    const quint64 length = static_cast<quint64>(text.size());
    QByteArray prefix;
    for (int i = 0; i < 8; ++i)
        prefix.append(static_cast<char>((length >> (8 * i)) & 0xff));
    f.write(prefix + text + data);
}

} // namespace

class TestGptOss : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void sinkCompositeIsTheFormula_data()
    {
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<int>("windowSize");
        QTest::newRow("causal, grouped heads") << 2 << 0;
        QTest::newRow("window 3, one kv head") << 1 << 3;
        QTest::newRow("window 1 (the sink against one key)") << 4 << 1;
    }
    void sinkCompositeIsTheFormula()
    {
        QFETCH(int, kvHeads);
        QFETCH(int, windowSize);
        torch::manual_seed(4);
        const int64_t t = 7;
        const auto q = torch::randn({2, 4, t, 5}, kDouble), k = torch::randn({2, kvHeads, t, 5}, kDouble), v = torch::randn({2, kvHeads, t, 5}, kDouble);
        const auto sinks = torch::randn({4}, kDouble) * 2;
        const auto seen = windowSize > 0 ? window(t, windowSize) : causal(t);
        const auto got = sinkEagerAttention(q, k, v, sinks, 0.37, windowSize > 0 ? seen : torch::Tensor());
        const auto want = sinkByHand(q, k, v, sinks, 0.37, seen);
        QVERIFY(torch::allclose(got, want, 1e-12, 1e-12));
        // Not plain attention: the sink takes weight (the rows' weights sum to less than 1).
        const auto plain = sinkEagerAttention(q, k, v, torch::full({4}, -1e4, kDouble), 0.37, windowSize > 0 ? seen : torch::Tensor());
        QVERIFY(!torch::allclose(got, plain, 1e-3, 1e-3));
    }

    void fusedFormIsTheComposite_data()
    {
        QTest::addColumn<int>("headDim");
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<int>("windowSize");
        QTest::newRow("head dim 8 (padded to 16), causal") << 8 << 2 << 0;
        QTest::newRow("head dim 6 (padded to 8), window 2") << 6 << 4 << 2;
        QTest::newRow("head dim 5, one kv head, window 4") << 5 << 1 << 4;
    }
    void fusedFormIsTheComposite()
    {
        QFETCH(int, headDim);
        QFETCH(int, kvHeads);
        QFETCH(int, windowSize);
        torch::manual_seed(8);
        const int64_t t = 6;
        const auto q = torch::randn({2, 4, t, headDim}, kDouble).requires_grad_(true);
        const auto k = torch::randn({2, kvHeads, t, headDim}, kDouble).requires_grad_(true);
        const auto v = torch::randn({2, kvHeads, t, headDim}, kDouble).requires_grad_(true);
        const auto sinks = (torch::randn({4}, kDouble) * 2).requires_grad_(true);
        const auto mask = windowSize > 0 ? window(t, windowSize) : torch::Tensor();
        const double scale = 1.0 / std::sqrt(double(headDim));
        const auto probe = torch::randn({2, 4, t, headDim}, kDouble);

        const auto in = sinkKeyInputs(q, k, v, sinks, scale, mask);
        QCOMPARE(in.q.size(-1) % 8, int64_t(0));
        QCOMPARE(in.k.size(2), t + 1);
        QCOMPARE(in.mask.sizes().vec(), (std::vector<int64_t> {t, t + 1}));
        QVERIFY(in.mask.select(1, t).all().item<bool>()); // every query sees the sink key

        const auto fused = sinkKeyAttention(q, k, v, sinks, scale, mask);
        const auto composite = sinkEagerAttention(q, k, v, sinks, scale, mask);
        QVERIFY(torch::allclose(fused, composite, 1e-12, 1e-12));
        const auto g1 = torch::autograd::grad({(fused * probe).sum()}, {q, k, v, sinks});
        const auto g2 = torch::autograd::grad({(composite * probe).sum()}, {q, k, v, sinks});
        for (size_t i = 0; i < g1.size(); ++i)
            QVERIFY2(torch::allclose(g1[i], g2[i], 1e-11, 1e-11), qPrintable(QStringLiteral("gradient %1").arg(i)));
        QVERIFY(g1[3].abs().sum().item<double>() > 0);
    }

    // In bf16 the sink travels as two bf16 parts: the kernel's score is the sink to ~16 bits.
    void fusedFormKeepsTheSinkIn16Bits()
    {
        const auto sinks = torch::tensor({0.123456789, -3.3333333, 7.654321, 0.0}, kDouble);
        const double scale = 0.125;
        const auto q = torch::zeros({1, 4, 1, 8}, torch::kBFloat16);
        const auto in = sinkKeyInputs(q, q, q, sinks, scale, torch::Tensor());
        const auto score = torch::matmul(in.q.to(torch::kDouble), in.k.to(torch::kDouble).transpose(-2, -1)).select(-1, 1).reshape({4}) * scale;
        QVERIFY2(torch::allclose(score, sinks, 1e-4, 0), qPrintable(QStringLiteral("%1").arg((score - sinks).abs().max().item<double>())));
    }

    void clampedSwigluIsGptOss()
    {
        torch::manual_seed(2);
        const auto gateUp = torch::randn({9, 2 * 6}, kDouble) * 4; // past the limit both ways
        for (bool interleaved : {true, false}) {
            StackedExpertsOptions o;
            o.interleavedGateUp = interleaved;
            o.swigluLimit = 3.0;
            o.swigluAlpha = 1.702;
            const auto got = stackedExpertActivation(gateUp, o);
            auto a = gateUp.accessor<double, 2>();
            for (int64_t r = 0; r < 9; ++r)
                for (int64_t i = 0; i < 6; ++i) {
                    const double g = interleaved ? a[r][2 * i] : a[r][i], u = interleaved ? a[r][2 * i + 1] : a[r][6 + i];
                    QVERIFY(std::abs(got[r][i].item<double>() - clampedSwiglu(g, u, 3.0, 1.702)) < 1e-13);
                }
            o.swigluLimit = 0; // plain SwiGLU
            const auto plain = stackedExpertActivation(gateUp, o);
            const auto g = interleaved ? gateUp.slice(1, 0, 12, 2) : gateUp.narrow(1, 0, 6), u = interleaved ? gateUp.slice(1, 1, 12, 2) : gateUp.narrow(1, 6, 6);
            QVERIFY(torch::allclose(plain, g * torch::sigmoid(g) * u, 1e-14, 1e-14));
        }
    }

    void stackedExpertsAreOneMatmulPerExpert_data()
    {
        QTest::addColumn<bool>("interleaved");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<double>("limit");
        QTest::newRow("gpt-oss: interleaved, biases, clamped") << true << true << 0.5;
        QTest::newRow("llama4: halves, no biases, SwiGLU") << false << false << 0.0;
        QTest::newRow("halves with biases") << false << true << 0.0;
    }
    void stackedExpertsAreOneMatmulPerExpert()
    {
        QFETCH(bool, interleaved);
        QFETCH(bool, bias);
        QFETCH(double, limit);
        StackedExpertsOptions o;
        o.experts = 4;
        o.hidden = 6;
        o.intermediate = 5;
        o.interleavedGateUp = interleaved;
        o.bias = bias;
        o.swigluLimit = limit;
        StackedExperts experts(o, kDouble);
        randomise(*experts, 6, 0.5);
        const std::vector<int64_t> counts {3, 0, 4, 2}; // expert 1 gets nothing
        torch::manual_seed(3);
        const auto x = torch::randn({9, 6}, kDouble).requires_grad_(true);
        const auto probe = torch::randn({9, 6}, kDouble);
        const auto out = experts->forward(x, counts);

        std::vector<torch::Tensor> rows;
        int64_t start = 0;
        for (int64_t e = 0; e < 4; ++e) {
            const auto xe = x.narrow(0, start, counts[size_t(e)]);
            start += counts[size_t(e)];
            const auto w = experts->gateUp[e];
            auto h = torch::matmul(xe, w);
            if (bias)
                h = h + experts->gateUpBias[e];
            // The activation by hand, on the layout's own columns.
            const auto gate = interleaved ? h.slice(1, 0, 10, 2) : h.narrow(1, 0, 5), up = interleaved ? h.slice(1, 1, 10, 2) : h.narrow(1, 5, 5);
            const auto act = limit > 0 ? (up.clamp(-limit, limit) + 1) * gate.clamp_max(limit) * torch::sigmoid(1.702 * gate.clamp_max(limit)) : torch::silu(gate) * up;
            auto y = torch::matmul(act, experts->down[e]);
            if (bias)
                y = y + experts->downBias[e];
            rows.push_back(y);
        }
        const auto ref = torch::cat(rows, 0);
        QVERIFY(torch::allclose(out, ref, 1e-13, 1e-13));
        std::vector<torch::Tensor> params {x, experts->gateUp, experts->down};
        if (bias) {
            params.push_back(experts->gateUpBias);
            params.push_back(experts->downBias);
        }
        const auto g1 = torch::autograd::grad({(out * probe).sum()}, params);
        const auto g2 = torch::autograd::grad({(ref * probe).sum()}, params);
        for (size_t i = 0; i < g1.size(); ++i)
            QVERIFY2(torch::allclose(g1[i], g2[i], 1e-12, 1e-12), qPrintable(QStringLiteral("gradient %1").arg(i)));
        QCOMPARE(g1[1][1].abs().sum().item<double>(), 0.0); // the expert no token chose
        QVERIFY(g1[1][0].abs().sum().item<double>() > 0);
    }

    // GptOssMLP as Transformers computes it: the router's biased logits, top-k, softmax over the k;
    // each chosen expert's output weighted and summed; the auxiliary statistics from the softmax
    // over all experts of the logits (Transformers 5 records the logits).
    void sparseLayerIsGptOssMlp()
    {
        const RunConfig c = gptOssConfig();
        SparseMoe moe(c, kDouble);
        randomise(*moe, 12);
        QVERIFY(moe->stacked);
        QVERIFY(moe->routerBias.defined());
        torch::manual_seed(13);
        const int64_t tokens = 11, h = c.model.hiddenSize;
        const auto x = torch::randn({1, tokens, h}, kDouble).requires_grad_(true);
        const auto probe = torch::randn({1, tokens, h}, kDouble);
        const auto out = moe->forward(x);

        const auto flat = x.reshape({tokens, h});
        const auto logits = torch::matmul(flat, moe->router->weight.t()) + moe->routerBias;
        auto [top, chosen] = torch::topk(logits, 2, -1);
        const auto weights = torch::softmax(top, -1);
        std::vector<torch::Tensor> rows;
        for (int64_t t = 0; t < tokens; ++t) {
            auto row = torch::zeros({h}, kDouble);
            for (int64_t j = 0; j < 2; ++j) {
                const int64_t e = chosen[t][j].item<int64_t>();
                std::vector<int64_t> counts(5, 0);
                counts[size_t(e)] = 1;
                row = row + weights[t][j] * moe->stacked->forward(flat.narrow(0, t, 1), counts)[0];
            }
            rows.push_back(row);
        }
        const auto ref = torch::stack(rows);
        QVERIFY(torch::allclose(out.reshape({tokens, h}), ref, 1e-12, 1e-12));
        const auto g1 = torch::autograd::grad({(out * probe).sum()}, {x, moe->router->weight, moe->routerBias});
        const auto g2 = torch::autograd::grad({(ref.reshape({1, tokens, h}) * probe).sum()}, {x, moe->router->weight, moe->routerBias});
        for (size_t i = 0; i < g1.size(); ++i)
            QVERIFY2(torch::allclose(g1[i], g2[i], 1e-11, 1e-11), qPrintable(QStringLiteral("gradient %1").arg(i)));
        QVERIFY(torch::allclose(moe->routerProbabilitySum, torch::softmax(logits, -1).sum(0).to(torch::kFloat), 1e-6, 1e-6));
        QCOMPARE(moe->expertChoices.sum().item<double>(), double(tokens * 2));
    }

    // Names and shapes as the checkpoints hold them, one per parameter, none left out.
    void parametersAreNamedAsTheCheckpoints()
    {
        const RunConfig c = gptOssConfig();
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        std::map<std::string, std::vector<int64_t>> table;
        for (const auto &p : parameterTable(c))
            table[p.name] = p.shape;
        int64_t n = 0;
        for (const auto &item : model->named_parameters()) {
            ++n;
            QVERIFY2(table.count(item.key()), item.key().c_str());
            QCOMPARE(item.value().sizes().vec(), table[item.key()]);
        }
        QCOMPARE(n, int64_t(table.size()));
        const int64_t e = 5, hs = c.model.hiddenSize, i = 12;
        QCOMPARE(table["model.layers.0.self_attn.sinks"], (std::vector<int64_t> {4}));
        QCOMPARE(table["model.layers.1.mlp.router.bias"], (std::vector<int64_t> {e}));
        QCOMPARE(table["model.layers.1.mlp.experts.gate_up_proj"], (std::vector<int64_t> {e, hs, 2 * i}));
        QCOMPARE(table["model.layers.1.mlp.experts.gate_up_proj_bias"], (std::vector<int64_t> {e, 2 * i}));
        QCOMPARE(table["model.layers.1.mlp.experts.down_proj"], (std::vector<int64_t> {e, i, hs}));
        QCOMPARE(table["model.layers.1.mlp.experts.down_proj_bias"], (std::vector<int64_t> {e, hs}));
        QVERIFY(table.count("model.layers.0.self_attn.o_proj.bias"));
    }

    // A training step of the whole model runs, eager and recomputed, to the same gradients.
    void recomputeGivesTheSameGradients()
    {
        RunConfig c = gptOssConfig();
        auto tokens = (torch::manual_seed(9), torch::randint(0, c.model.vocabSize, {2, 9}, torch::kLong));
        const auto x = tokens.slice(1, 0, 8), y = tokens.slice(1, 1, 9);
        std::map<std::string, torch::Tensor> grads[2];
        double losses[2];
        for (int recompute = 0; recompute < 2; ++recompute) {
            DecoderModel model(c, ModelRuntime {false, recompute == 1}, torch::kCPU);
            model->initialise(1);
            model->train();
            const auto loss = model->loss(x, y);
            losses[recompute] = loss.item<double>();
            loss.backward();
            for (auto &item : model->named_parameters())
                if (item.value().grad().defined())
                    grads[recompute][item.key()] = item.value().grad().clone();
        }
        QCOMPARE(losses[0], losses[1]);
        QCOMPARE(grads[0].size(), grads[1].size());
        QVERIFY(grads[0].count("model.layers.0.self_attn.sinks"));
        QVERIFY(grads[0].count("model.layers.0.mlp.router.bias"));
        for (const auto &[name, g] : grads[0])
            QVERIFY2(torch::allclose(g, grads[1][name], 1e-6, 1e-7), name.c_str());
    }

    // The published gpt-oss checkpoints hold the experts as MXFP4 blocks and scales: each loads
    // dequantised (two e2m1 codes a byte, low nibble first, a power of two per 32 values) into the
    // stacked [E, in, out] tensor; every other tensor loads by name.
    void mxfp4ExpertsLoad()
    {
        RunConfig c = gptOssConfig();
        c.model.moe.expertIntermediateSize = 32; // in-dimensions in groups of 32
        DecoderModel source(c, ModelRuntime {false, false}, torch::kCPU);
        source->initialise(3);
        static const float codes[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
        std::vector<std::pair<std::string, torch::Tensor>> tensors;
        std::map<std::string, torch::Tensor> expected;
        torch::manual_seed(21);
        for (const auto &item : source->named_parameters()) {
            const std::string &name = item.key();
            const bool stacked = name.size() > 13 && (name.compare(name.size() - 13, 13, ".gate_up_proj") == 0 || name.compare(name.size() - 10, 10, ".down_proj") == 0);
            if (!stacked) {
                tensors.emplace_back(name, item.value().detach().clone());
                continue;
            }
            const int64_t e = item.value().size(0), in = item.value().size(1), out = item.value().size(2), groups = in / 32;
            const auto low = torch::randint(0, 16, {e, out, groups, 16}, torch::kLong), high = torch::randint(0, 16, {e, out, groups, 16}, torch::kLong);
            const auto scales = torch::randint(122, 132, {e, out, groups}, torch::kLong);
            auto want = torch::empty({e, out, groups, 32});
            auto wa = want.accessor<float, 4>();
            auto la = low.accessor<int64_t, 4>(), ha = high.accessor<int64_t, 4>();
            auto sa = scales.accessor<int64_t, 3>();
            for (int64_t a = 0; a < e; ++a)
                for (int64_t r = 0; r < out; ++r)
                    for (int64_t g = 0; g < groups; ++g)
                        for (int64_t j = 0; j < 16; ++j) {
                            const float scale = std::ldexp(1.0f, static_cast<int>(sa[a][r][g]) - 127);
                            wa[a][r][g][2 * j] = codes[la[a][r][g][j]] * scale;
                            wa[a][r][g][2 * j + 1] = codes[ha[a][r][g][j]] * scale;
                        }
            expected[name] = want.reshape({e, out, in}).transpose(1, 2);
            tensors.emplace_back(name + "_blocks", (low + 16 * high).to(torch::kUInt8));
            tensors.emplace_back(name + "_scales", scales.to(torch::kUInt8));
        }
        QCOMPARE(int(expected.size()), 2 * int(c.model.layers));
        QTemporaryDir dir;
        writeSafetensors(dir.filePath(QStringLiteral("model.safetensors")), tensors);
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        const WeightLoadReport report = loadSafetensors(*model, dir.path());
        QCOMPARE(report.ignored, int64_t(0));
        for (const auto &item : model->named_parameters()) {
            const auto it = expected.find(item.key());
            if (it != expected.end())
                QVERIFY2(torch::equal(item.value(), it->second), item.key().c_str());
        }
        QVERIFY(torch::equal(model->stack->embedTokens->weight, source->stack->embedTokens->weight));
        // Blocks of another shape are refused by name.
        for (auto &[name, t] : tensors)
            if (name.size() > 7 && name.compare(name.size() - 7, 7, "_scales") == 0)
                t = t.narrow(1, 0, 1).contiguous();
        QTemporaryDir bad;
        writeSafetensors(bad.filePath(QStringLiteral("model.safetensors")), tensors);
        DecoderModel other(c, ModelRuntime {false, false}, torch::kCPU);
        QString message;
        try {
            loadSafetensors(*other, bad.path());
        } catch (const std::exception &e) {
            message = QString::fromUtf8(e.what());
        }
        QVERIFY2(message.contains(QStringLiteral("MXFP4 tensors of")), qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestGptOss)
#include "tst_gpt_oss.moc"
