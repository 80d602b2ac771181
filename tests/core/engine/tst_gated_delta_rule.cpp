// Gated DeltaNet (Qwen3-Next, Qwen3.5) in float64: the chunked gated delta rule against the
// token-by-token recurrence (outputs, final state and the gradients of q, k, v, g, beta and the
// initial state, at lengths on both sides of the chunk boundaries, chunks of 64 and 16, with and
// without an initial state); the recurrence against the formula written out with scalar loops; the
// intra-chunk inverse against torch::inverse; that the tolerance is tight enough to see a decay off
// by 1e-7 at one token; and the layer (both checkpoint layouts, repeated key heads) against a
// composite written here from its definition, one token and one head at a time, outputs and
// gradients of the input and every parameter.
#include "model/GatedDeltaNet.h"
#include "model/GatedDeltaRule.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace pb;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kDouble);
// float64 forms of the same sums agree to ~1e-14 here; 1e-10 of the larger magnitude is tight
// enough that a decay off by 1e-7 at a single token fails (tightToleranceSeesSmallErrors).
constexpr double kTolerance = 1e-10;

double maxAbs(const torch::Tensor &t) { return t.numel() == 0 ? 0.0 : t.abs().max().item<double>(); }

// |a - b| relative to max(1, |b|).
double relativeError(const torch::Tensor &a, const torch::Tensor &b)
{
    return maxAbs(a - b) / std::max(1.0, maxAbs(b));
}

#define COMPARE_TENSORS(actual, expected, what)                                                                                        \
    do {                                                                                                                               \
        QVERIFY2((actual).sizes() == (expected).sizes(), qPrintable(QStringLiteral("%1: shapes differ").arg(QLatin1String(what))));     \
        const double err_ = relativeError((actual), (expected));                                                                       \
        QVERIFY2(err_ <= kTolerance, qPrintable(QStringLiteral("%1: relative error %2").arg(QLatin1String(what)).arg(err_, 0, 'g', 3))); \
    } while (0)

struct RuleInputs {
    torch::Tensor q, k, v, g, beta, state;
};

// Random inputs as the layer produces them: decays g = -A * softplus(.) (here 0.01 .. ~1.5 per
// token), beta in (0, 1), an initial state of unit size.
RuleInputs randomInputs(int64_t b, int64_t t, int64_t h, int64_t dk, int64_t dv, uint64_t seed)
{
    torch::manual_seed(seed);
    RuleInputs in;
    in.q = torch::randn({b, t, h, dk}, kDouble);
    in.k = torch::randn({b, t, h, dk}, kDouble);
    in.v = torch::randn({b, t, h, dv}, kDouble);
    in.g = -(torch::rand({b, t, h}, kDouble) * torch::softplus(torch::randn({b, t, h}, kDouble)) + 0.01);
    in.beta = torch::sigmoid(torch::randn({b, t, h}, kDouble));
    in.state = torch::randn({b, h, dk, dv}, kDouble) * 0.5;
    for (auto *x : {&in.q, &in.k, &in.v, &in.g, &in.beta, &in.state})
        x->requires_grad_(true);
    return in;
}

struct RuleRun {
    torch::Tensor output, state;
    std::vector<torch::Tensor> grads;   // q, k, v, g, beta, initial state (if given)
};

RuleRun runRule(const RuleInputs &in, bool chunked, int64_t chunkSize, bool withState, bool l2, const torch::Tensor &outWeight,
                const torch::Tensor &stateWeight, bool fusedLoop = false)
{
    const auto s0 = withState ? in.state : torch::Tensor();
    const auto r = chunked ? chunkGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, chunkSize, s0, true, l2, fusedLoop)
                           : recurrentGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, s0, true, l2);
    std::vector<torch::Tensor> wrt {in.q, in.k, in.v, in.g, in.beta};
    if (withState)
        wrt.push_back(in.state);
    const auto loss = (r.output * outWeight).sum() + (r.finalState * stateWeight).sum();
    RuleRun run;
    run.output = r.output.detach();
    run.state = r.finalState.detach();
    run.grads = torch::autograd::grad({loss}, wrt);
    return run;
}

// ---- The layer written out from its definition, one token and one head at a time. ----

struct LayerWeights {
    std::map<std::string, torch::Tensor> p;
    const torch::Tensor &operator[](const std::string &name) const { return p.at(name); }
};

torch::Tensor unitNorm(const torch::Tensor &x) { return x / torch::sqrt((x * x).sum() + 1e-6); }
torch::Tensor siluByHand(const torch::Tensor &x) { return x / (1 + torch::exp(-x)); }

torch::Tensor compositeLayer(const torch::Tensor &x, const LayerWeights &w, const GatedDeltaNetOptions &o)
{
    const int64_t batch = x.size(0), t = x.size(1), hk = o.keyHeads, hv = o.valueHeads, dk = o.keyHeadDim, dv = o.valueHeadDim;
    const int64_t r = hv / hk, kernel = o.convKernel;
    const bool interleaved = o.layout == GatedDeltaNetLayout::InterleavedQkvzBa;
    std::vector<torch::Tensor> rows;
    for (int64_t bi = 0; bi < batch; ++bi) {
        // Per token: the conv's input channels [q heads | k heads | v heads], z per value head, b, a.
        std::vector<torch::Tensor> pre;
        std::vector<std::vector<torch::Tensor>> zs;
        std::vector<torch::Tensor> bs, as;
        for (int64_t ti = 0; ti < t; ++ti) {
            const auto xt = x[bi][ti];
            std::vector<torch::Tensor> qs, ks, vs, zt;
            std::vector<torch::Tensor> bt, at;
            if (interleaved) {
                const auto p = torch::mv(w["in_proj_qkvz.weight"], xt);
                const auto ba = torch::mv(w["in_proj_ba.weight"], xt);
                const int64_t group = 2 * dk + 2 * r * dv;
                for (int64_t h = 0; h < hk; ++h) {
                    qs.push_back(p.slice(0, h * group, h * group + dk));
                    ks.push_back(p.slice(0, h * group + dk, h * group + 2 * dk));
                }
                for (int64_t j = 0; j < hv; ++j) {
                    const int64_t h = j / r, inGroup = j % r;
                    const int64_t vAt = h * group + 2 * dk + inGroup * dv, zAt = h * group + 2 * dk + r * dv + inGroup * dv;
                    vs.push_back(p.slice(0, vAt, vAt + dv));
                    zt.push_back(p.slice(0, zAt, zAt + dv));
                    bt.push_back(ba[h * 2 * r + inGroup]);
                    at.push_back(ba[h * 2 * r + r + inGroup]);
                }
            } else {
                const auto p = torch::mv(w["in_proj_qkv.weight"], xt);
                const auto z = torch::mv(w["in_proj_z.weight"], xt);
                const auto bb = torch::mv(w["in_proj_b.weight"], xt), aa = torch::mv(w["in_proj_a.weight"], xt);
                for (int64_t h = 0; h < hk; ++h) {
                    qs.push_back(p.slice(0, h * dk, (h + 1) * dk));
                    ks.push_back(p.slice(0, hk * dk + h * dk, hk * dk + (h + 1) * dk));
                }
                for (int64_t j = 0; j < hv; ++j) {
                    vs.push_back(p.slice(0, 2 * hk * dk + j * dv, 2 * hk * dk + (j + 1) * dv));
                    zt.push_back(z.slice(0, j * dv, (j + 1) * dv));
                    bt.push_back(bb[j]);
                    at.push_back(aa[j]);
                }
            }
            std::vector<torch::Tensor> channels(qs);
            channels.insert(channels.end(), ks.begin(), ks.end());
            channels.insert(channels.end(), vs.begin(), vs.end());
            pre.push_back(torch::cat(channels));
            zs.push_back(zt);
            bs.push_back(torch::stack(bt));
            as.push_back(torch::stack(at));
        }
        // Causal depthwise conv: out_t = sum_s w[:, 0, s] * in_{t - (K - 1) + s}, then SiLU.
        const auto &convW = w["conv1d.weight"];
        std::vector<torch::Tensor> post;
        for (int64_t ti = 0; ti < t; ++ti) {
            auto acc = torch::zeros({o.convChannels()}, kDouble);
            for (int64_t s = 0; s < kernel; ++s) {
                const int64_t src = ti - (kernel - 1) + s;
                if (src >= 0)
                    acc = acc + convW.select(1, 0).select(1, s) * pre[static_cast<size_t>(src)];
            }
            post.push_back(siluByHand(acc));
        }
        // One state per value head; its key head's q and k.
        std::vector<torch::Tensor> states(static_cast<size_t>(hv), torch::zeros({dk, dv}, kDouble));
        std::vector<torch::Tensor> outTokens;
        for (int64_t ti = 0; ti < t; ++ti) {
            const auto &c = post[static_cast<size_t>(ti)];
            std::vector<torch::Tensor> heads;
            for (int64_t j = 0; j < hv; ++j) {
                const int64_t h = j / r;
                const auto q = unitNorm(c.slice(0, h * dk, (h + 1) * dk)) / std::sqrt(static_cast<double>(dk));
                const auto k = unitNorm(c.slice(0, hk * dk + h * dk, hk * dk + (h + 1) * dk));
                const auto v = c.slice(0, 2 * hk * dk + j * dv, 2 * hk * dk + (j + 1) * dv);
                const auto beta = 1 / (1 + torch::exp(-bs[static_cast<size_t>(ti)][j]));
                const auto shifted = as[static_cast<size_t>(ti)][j] + w["dt_bias"][j];
                const auto g = -torch::exp(w["A_log"][j]) * torch::log1p(torch::exp(shifted));
                auto &S = states[static_cast<size_t>(j)];
                S = S * torch::exp(g);
                const auto delta = (v - torch::mv(S.t(), k)) * beta;
                S = S + torch::outer(k, delta);
                const auto out = torch::mv(S.t(), q);
                const auto normed = out / torch::sqrt(out.pow(2).mean() + o.normEps);
                heads.push_back(w["norm.weight"] * normed * siluByHand(zs[static_cast<size_t>(ti)][static_cast<size_t>(j)]));
            }
            outTokens.push_back(torch::mv(w["out_proj.weight"], torch::cat(heads)));
        }
        rows.push_back(torch::stack(outTokens));
    }
    return torch::stack(rows);
}

// Gives the layer's placeholders float64 storage and values: projections N(0, 0.3^2), the conv
// N(0, 0.5^2), norm.weight around 1, A_log = log U(lo, hi), dt_bias N(0, 0.3^2).
void fillLayer(GatedDeltaNetImpl &layer, uint64_t seed, double aLo, double aHi)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    for (auto &item : layer.named_parameters()) {
        auto &p = item.value();
        p.set_data(torch::empty(p.sizes(), kDouble));
        const auto &name = item.key();
        if (name == "A_log")
            p.uniform_(aLo, aHi).log_();
        else if (name == "norm.weight")
            p.normal_(1.0, 0.2);
        else if (name == "conv1d.weight")
            p.normal_(0.0, 0.5);
        else
            p.normal_(0.0, 0.3);
    }
}

GatedDeltaNetOptions layerOptions(GatedDeltaNetLayout layout, int64_t valueHeads, int64_t chunkSize)
{
    GatedDeltaNetOptions o;
    o.hidden = 12;
    o.keyHeads = 2;
    o.valueHeads = valueHeads;
    o.keyHeadDim = 4;
    o.valueHeadDim = 3;
    o.convKernel = 4;
    o.normEps = 1e-6;
    o.chunkSize = chunkSize;
    o.layout = layout;
    return o;
}

} // namespace

class TestGatedDeltaRule : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void chunkedMatchesRecurrent_data()
    {
        QTest::addColumn<qint64>("length");
        QTest::addColumn<qint64>("chunk");
        QTest::addColumn<bool>("withState");
        QTest::addColumn<bool>("l2");
        QTest::addColumn<bool>("fused");
        // fused: the chunk loop as one node (model/GatedDeltaScan.h: its LibTorch scan, the CUDA
        // kernel's twin) with its own backward.
        for (bool fused : {false, true})
            for (qint64 length : {1, 63, 64, 65, 130})
                for (qint64 chunk : {64, 16})
                    for (bool withState : {false, true})
                        QTest::addRow("T=%lld chunk=%lld %s%s", length, chunk, withState ? "state" : "zero", fused ? " fused" : "")
                            << length << chunk << withState << true << fused;
        // Without the in-kernel L2 norm (the rule's default): keys of unit size by construction.
        QTest::addRow("T=65 chunk=16 state, no l2") << qint64(65) << qint64(16) << true << false << false;
        QTest::addRow("T=130 chunk=64 zero, no l2") << qint64(130) << qint64(64) << false << false << false;
    }

    void chunkedMatchesRecurrent()
    {
        QFETCH(qint64, length);
        QFETCH(qint64, chunk);
        QFETCH(bool, withState);
        QFETCH(bool, l2);
        QFETCH(bool, fused);
        const int64_t b = 2, h = 3, dk = 8, dv = 6;
        auto in = randomInputs(b, length, h, dk, dv, 1000 + static_cast<uint64_t>(length));
        if (!l2) {
            torch::NoGradGuard noGrad;
            in.q.set_data(gatedDeltaL2Norm(in.q.detach()) * 1.3);
            in.k.set_data(gatedDeltaL2Norm(in.k.detach()) * 0.9);
        }
        const auto outWeight = torch::randn({b, length, h, dv}, kDouble);
        const auto stateWeight = torch::randn({b, h, dk, dv}, kDouble);
        const auto chunked = runRule(in, true, chunk, withState, l2, outWeight, stateWeight, fused);
        const auto recurrent = runRule(in, false, 0, withState, l2, outWeight, stateWeight);
        QVERIFY(maxAbs(recurrent.output) > 1e-3);   // not trivially zero
        COMPARE_TENSORS(chunked.output, recurrent.output, "output");
        COMPARE_TENSORS(chunked.state, recurrent.state, "final state");
        const char *names[] = {"dq", "dk", "dv", "dg", "dbeta", "dstate"};
        QCOMPARE(chunked.grads.size(), recurrent.grads.size());
        for (size_t i = 0; i < chunked.grads.size(); ++i) {
            // One token from a zero state: the decay multiplies nothing, dg is 0 in both forms.
            if (!(i == 3 && length == 1 && !withState))
                QVERIFY(maxAbs(recurrent.grads[i]) > 1e-6);
            COMPARE_TENSORS(chunked.grads[i], recurrent.grads[i], names[i]);
        }
    }

    void recurrenceMatchesTheFormula()
    {
        // Scalar loops: S <- exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q / sqrt(Dk), with q and k
        // L2-normalised (eps 1e-6 under the root); 3 tokens, chunks of 2 (one boundary, one pad).
        const int64_t b = 1, t = 3, h = 2, dk = 3, dv = 2;
        const auto in = randomInputs(b, t, h, dk, dv, 7);
        const auto q = in.q.detach(), k = in.k.detach(), v = in.v.detach(), g = in.g.detach(), beta = in.beta.detach(), s0 = in.state.detach();
        auto expected = torch::zeros({b, t, h, dv}, kDouble);
        auto expectedState = torch::zeros({b, h, dk, dv}, kDouble);
        for (int64_t hi = 0; hi < h; ++hi) {
            double S[3][2];
            for (int64_t i = 0; i < dk; ++i)
                for (int64_t j = 0; j < dv; ++j)
                    S[i][j] = s0[0][hi][i][j].item<double>();
            for (int64_t ti = 0; ti < t; ++ti) {
                double qn[3], kn[3], qs = 0, ks = 0;
                for (int64_t i = 0; i < dk; ++i) {
                    qn[i] = q[0][ti][hi][i].item<double>();
                    kn[i] = k[0][ti][hi][i].item<double>();
                    qs += qn[i] * qn[i];
                    ks += kn[i] * kn[i];
                }
                for (int64_t i = 0; i < dk; ++i) {
                    qn[i] /= std::sqrt(qs + 1e-6) * std::sqrt(static_cast<double>(dk));
                    kn[i] /= std::sqrt(ks + 1e-6);
                }
                const double decay = std::exp(g[0][ti][hi].item<double>()), bt = beta[0][ti][hi].item<double>();
                for (int64_t j = 0; j < dv; ++j) {
                    double remembered = 0;
                    for (int64_t i = 0; i < dk; ++i) {
                        S[i][j] *= decay;
                        remembered += S[i][j] * kn[i];
                    }
                    const double delta = bt * (v[0][ti][hi][j].item<double>() - remembered);
                    double o = 0;
                    for (int64_t i = 0; i < dk; ++i) {
                        S[i][j] += kn[i] * delta;
                        o += S[i][j] * qn[i];
                    }
                    expected[0][ti][hi][j] = o;
                }
            }
            for (int64_t i = 0; i < dk; ++i)
                for (int64_t j = 0; j < dv; ++j)
                    expectedState[0][hi][i][j] = S[i][j];
        }
        const auto recurrent = recurrentGatedDeltaRule(q, k, v, g, beta, s0, true, true);
        const auto chunked = chunkGatedDeltaRule(q, k, v, g, beta, 2, s0, true, true);
        COMPARE_TENSORS(recurrent.output, expected, "recurrent output");
        COMPARE_TENSORS(recurrent.finalState, expectedState, "recurrent state");
        COMPARE_TENSORS(chunked.output, expected, "chunked output");
        COMPARE_TENSORS(chunked.finalState, expectedState, "chunked state");
        // Without an initial state and no final one asked for: none returned.
        QVERIFY(!chunkGatedDeltaRule(q, k, v, g, beta, 2).finalState.defined());
    }

    void unitLowerInverseMatchesTheInverse()
    {
        torch::manual_seed(11);
        const int64_t c = 16;
        const auto a = (torch::randn({2, 3, c, c}, kDouble) * 0.3).requires_grad_(true);
        const auto x = unitLowerInverse(a);
        const auto eye = torch::eye(c, kDouble);
        const auto reference = torch::inverse(eye - a.tril(-1));
        COMPARE_TENSORS(x, reference, "inverse");
        const auto weight = torch::randn({2, 3, c, c}, kDouble);
        const auto grad = torch::autograd::grad({(x * weight).sum()}, {a})[0];
        const auto referenceGrad = torch::autograd::grad({(reference * weight).sum()}, {a})[0];
        COMPARE_TENSORS(grad, referenceGrad, "inverse gradient");
        QCOMPARE(maxAbs(grad.triu(0)), 0.0);
    }

    void tightToleranceSeesSmallErrors()
    {
        // What a wrong decay would look like, at sizes the comparison above would have to catch: one
        // token's decay off by 1e-7, the decay's sign flipped, the cumulative sum off by a token.
        const int64_t b = 1, t = 65, h = 2, dk = 8, dv = 6;
        const auto in = randomInputs(b, t, h, dk, dv, 21);
        const auto q = in.q.detach(), k = in.k.detach(), v = in.v.detach(), g = in.g.detach(), beta = in.beta.detach();
        const auto reference = recurrentGatedDeltaRule(q, k, v, g, beta, {}, false, true).output;
        const auto exact = chunkGatedDeltaRule(q, k, v, g, beta, 64, {}, false, true).output;
        QVERIFY(relativeError(exact, reference) <= kTolerance);
        auto nudged = g.clone();
        nudged[0][40][1] += 1e-7;
        const auto offByLittle = chunkGatedDeltaRule(q, k, v, nudged, beta, 64, {}, false, true).output;
        QVERIFY2(relativeError(offByLittle, reference) > 10 * kTolerance, "a decay off by 1e-7 must fail the comparison");
        const auto wrongSign = chunkGatedDeltaRule(q, k, v, (-g).clamp_max(0.05), beta, 64, {}, false, true).output;
        QVERIFY(relativeError(wrongSign, reference) > 1e-3);
        const auto shifted = chunkGatedDeltaRule(q, k, v, torch::roll(g, {1}, {1}), beta, 64, {}, false, true).output;
        QVERIFY(relativeError(shifted, reference) > 1e-3);
    }

    void parameterNamesAndShapes()
    {
        const auto options = kDouble;
        GatedDeltaNet next(layerOptions(GatedDeltaNetLayout::InterleavedQkvzBa, 4, 64), options);
        std::vector<std::pair<std::string, std::vector<int64_t>>> expectedNext {
            {"conv1d.weight", {2 * 8 + 12, 1, 4}}, {"in_proj_qkvz.weight", {2 * 8 + 2 * 12, 12}}, {"in_proj_ba.weight", {8, 12}},
            {"dt_bias", {4}}, {"A_log", {4}}, {"norm.weight", {3}}, {"out_proj.weight", {12, 12}}};
        GatedDeltaNet qwen35(layerOptions(GatedDeltaNetLayout::SeparateQkvZBA, 4, 64), options);
        std::vector<std::pair<std::string, std::vector<int64_t>>> expected35 {
            {"conv1d.weight", {28, 1, 4}}, {"dt_bias", {4}}, {"A_log", {4}}, {"norm.weight", {3}}, {"out_proj.weight", {12, 12}},
            {"in_proj_qkv.weight", {28, 12}}, {"in_proj_z.weight", {12, 12}}, {"in_proj_b.weight", {4, 12}}, {"in_proj_a.weight", {4, 12}}};
        // By name: LibTorch lists a module's own parameters (dt_bias, A_log) before its submodules'.
        for (auto [layer, expected] : {std::make_pair(next.ptr(), expectedNext), std::make_pair(qwen35.ptr(), expected35)}) {
            const auto params = layer->named_parameters();
            QCOMPARE(params.size(), expected.size());
            for (const auto &[name, shape] : expected) {
                const auto *p = params.find(name);
                QVERIFY2(p, name.c_str());
                QVERIFY2(p->sizes().vec() == shape, name.c_str());
                // A shape without memory until the owner gives it storage (as emptyParam).
                QVERIFY(std::all_of(p->strides().begin(), p->strides().end(), [](int64_t s) { return s == 0; }));
            }
        }
        QVERIFY_THROWS_EXCEPTION(c10::Error, GatedDeltaNet(layerOptions(GatedDeltaNetLayout::InterleavedQkvzBa, 3, 64), options));
    }

    void layerMatchesComposite_data()
    {
        QTest::addColumn<bool>("interleaved");
        QTest::addColumn<qint64>("valueHeads");
        QTest::addColumn<qint64>("length");
        QTest::addColumn<qint64>("chunk");
        QTest::addColumn<double>("aHigh");
        QTest::addColumn<bool>("fused");
        for (bool fused : {false, true}) {
            const char *path = fused ? ", fused loop" : "";
            QTest::addRow("qwen3_next, v = k heads, T=70, chunk 64%s", path) << true << qint64(2) << qint64(70) << qint64(64) << 1.0 << fused;
            QTest::addRow("qwen3_next, v = 2 k heads, T=70, chunk 16%s", path) << true << qint64(4) << qint64(70) << qint64(16) << 1.0 << fused;
            QTest::addRow("qwen3_next, v = 2 k heads, T=1%s", path) << true << qint64(4) << qint64(1) << qint64(64) << 1.0 << fused;
            QTest::addRow("qwen3_5, v = 2 k heads, T=70, chunk 64%s", path) << false << qint64(4) << qint64(70) << qint64(64) << 1.0 << fused;
            QTest::addRow("qwen3_5, v = k heads, T=33, chunk 16%s", path) << false << qint64(2) << qint64(33) << qint64(16) << 1.0 << fused;
            // Transformers' A_log initialisation, log U(0, 16): fast decays, exp of the chunk's
            // cumulative sum near underflow.
            QTest::addRow("qwen3_next, A up to 16, T=70, chunk 64%s", path) << true << qint64(4) << qint64(70) << qint64(64) << 16.0 << fused;
        }
    }

    void layerMatchesComposite()
    {
        QFETCH(bool, interleaved);
        QFETCH(qint64, valueHeads);
        QFETCH(qint64, length);
        QFETCH(qint64, chunk);
        QFETCH(double, aHigh);
        QFETCH(bool, fused);
        auto o = layerOptions(interleaved ? GatedDeltaNetLayout::InterleavedQkvzBa : GatedDeltaNetLayout::SeparateQkvZBA, valueHeads, chunk);
        o.fusedLoop = fused;
        GatedDeltaNet layer(o, kDouble);
        fillLayer(*layer, 31 + static_cast<uint64_t>(length), 0.05, aHigh);
        torch::manual_seed(5);
        const auto x = torch::randn({2, length, o.hidden}, kDouble).requires_grad_(true);
        const auto outWeight = torch::randn({2, length, o.hidden}, kDouble);

        const auto y = layer->forward(x);
        LayerWeights w;
        std::vector<torch::Tensor> wrt {x};
        std::vector<std::string> names {"input"};
        for (const auto &item : layer->named_parameters()) {
            w.p[item.key()] = item.value();
            wrt.push_back(item.value());
            names.push_back(item.key());
        }
        const auto expected = compositeLayer(x, w, o);
        QVERIFY(maxAbs(expected) > 1e-2);
        COMPARE_TENSORS(y.detach(), expected.detach(), "layer output");
        const auto grads = torch::autograd::grad({(y * outWeight).sum()}, wrt);
        const auto expectedGrads = torch::autograd::grad({(expected * outWeight).sum()}, wrt);
        for (size_t i = 0; i < wrt.size(); ++i) {
            // One token: the decay multiplies a zero state, so dt_bias and A_log get no gradient.
            if (length > 1 || (names[i] != "dt_bias" && names[i] != "A_log"))
                QVERIFY2(maxAbs(expectedGrads[i]) > 1e-8, names[i].c_str());
            COMPARE_TENSORS(grads[i], expectedGrads[i], names[i].c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestGatedDeltaRule)
#include "tst_gated_delta_rule.moc"
