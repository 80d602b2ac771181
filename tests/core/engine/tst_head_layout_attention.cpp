// The capped attention's grouped-head products (model/FusedOps.h's groupedHeadsAttention): the
// products that read q, k, v in the projections' [B, T, heads, D] layout (model/HeadLayoutProducts.h)
// and the bmms over stacked rows, against k and v expanded to every head in double on the CPU and,
// where there is a GPU, through the capped softmax's CUDA kernel against each other and float64.
#include "engine/TorchCompat.h"
#include "model/FusedOps.h"

#include "RelativeNormError.h"

#include <QtTest>

#include <cmath>
#include <limits>

using namespace pb;

class TestHeadLayoutAttention : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The capped kernel's grouped products against softmax(q k^T) v with k and v expanded to every
    // head, as Transformers' repeat_kv: the same output and the same gradients of q, k and v (the
    // group's sum made by the GEMMs), in double, through a causal, capped softmax. Inputs laid out
    // [B, T, heads, D] and transposed, as the projections leave them, take the products that read
    // them in place: the output and every gradient come back in that layout (no copy made to or
    // from [B, heads, T, D]); inputs made [B, heads, T, D] take the bmms over stacked rows.
    void groupedHeadsAttentionMatchesExpandedHeads_data()
    {
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<bool>("projectionLayout");
        QTest::addColumn<QString>("frozen"); // the input without a gradient (a projection without an adapter)
        QTest::newRow("groups of 2") << 4 << 2 << true << QString();
        QTest::newRow("groups of 3, one key/value head") << 3 << 1 << true << QString();
        QTest::newRow("no groups") << 2 << 2 << true << QString();
        QTest::newRow("groups of 2, keys frozen") << 4 << 2 << true << QStringLiteral("k");
        QTest::newRow("groups of 2, values frozen") << 4 << 2 << true << QStringLiteral("v");
        QTest::newRow("groups of 2, heads-first copies") << 4 << 2 << false << QString();
        QTest::newRow("groups of 3, heads-first copies") << 6 << 2 << false << QString();
    }
    void groupedHeadsAttentionMatchesExpandedHeads()
    {
        QFETCH(int, heads);
        QFETCH(int, kvHeads);
        QFETCH(bool, projectionLayout);
        QFETCH(QString, frozen);
        const int64_t b = 2, t = 5, d = 3;
        torch::manual_seed(11);
        const auto opts = torch::TensorOptions().dtype(torch::kDouble);
        auto q = torch::randn({b, t, heads, d}, opts).requires_grad_(true), k = torch::randn({b, t, kvHeads, d}, opts).requires_grad_(frozen != "k"),
             v = torch::randn({b, t, kvHeads, d}, opts).requires_grad_(frozen != "v");
        std::vector<torch::Tensor> trained {q};
        for (const auto &x : {k, v})
            if (x.requires_grad())
                trained.push_back(x);
        const auto causal = torch::ones({t, t}, torch::kBool).triu(1);
        auto probabilities = [&](const torch::Tensor &scores) {
            return torch::softmax((torch::tanh(scores * 0.5 / 3.0) * 3.0).masked_fill(causal, -std::numeric_limits<double>::infinity()), -1);
        };
        const auto upstream = torch::randn({b, heads, t, d}, opts);
        auto laidOut = [&](const torch::Tensor &x) { return projectionLayout ? x.transpose(1, 2) : x.transpose(1, 2).contiguous(); };
        const auto grouped = groupedHeadsAttention(laidOut(q), laidOut(k), laidOut(v), probabilities);
        QCOMPARE(grouped.sizes().vec(), (std::vector<int64_t> {b, heads, t, d}));
        QCOMPARE(grouped.transpose(1, 2).is_contiguous(), projectionLayout);
        const auto gradsGrouped = torch::autograd::grad({grouped}, trained, {upstream});
        for (const auto &g : gradsGrouped)
            QCOMPARE(g.is_contiguous(), projectionLayout);
        const int64_t groups = heads / kvHeads;
        const auto expanded =
            torch::matmul(probabilities(torch::matmul(q.transpose(1, 2), compat::expandKvHeads(k.transpose(1, 2), groups).transpose(-2, -1))),
                          compat::expandKvHeads(v.transpose(1, 2), groups));
        const auto gradsExpanded = torch::autograd::grad({expanded}, trained, {upstream});
        QVERIFY(torch::allclose(grouped, expanded, 1e-12, 1e-12));
        for (size_t i = 0; i < trained.size(); ++i)
            QVERIFY2(torch::allclose(gradsGrouped[i], gradsExpanded[i], 1e-12, 1e-12), qPrintable(QString::number(i)));
    }

    // On a card, the same two layouts through the capped softmax's kernel, Gemma 2's shape cut down
    // (heads 256 wide in groups of 2, two batch rows): the products that read [B, T, heads, D] in
    // place against the bmms over stacked rows, and both against the float64 maths on the CPU. In
    // bf16 the products sum a group's key and value gradients in two rounded GEMMs, not one.
    void groupedHeadsAttentionOnTheCard_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::newRow("fp32") << false;
        QTest::newRow("bf16") << true;
    }
    void groupedHeadsAttentionOnTheCard()
    {
        if (!torch::cuda::is_available())
            QSKIP("no CUDA device: the capped softmax's kernel runs only there");
        QFETCH(bool, bf16);
        const int64_t b = 2, t = 96, heads = 4, kvHeads = 2, d = 256;
        const double scale = 1.0 / 16.0, softcap = 50.0;
        torch::manual_seed(5);
        const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
        const auto q64 = torch::randn({b, t, heads, d}, torch::kDouble), k64 = torch::randn({b, t, kvHeads, d}, torch::kDouble),
                   v64 = torch::randn({b, t, kvHeads, d}, torch::kDouble), up64 = torch::randn({b, heads, t, d}, torch::kDouble);
        auto run = [&](bool projectionLayout) {
            auto leaf = [&](const torch::Tensor &x) { return x.to(torch::kCUDA, type).requires_grad_(true); };
            auto q = leaf(q64), k = leaf(k64), v = leaf(v64);
            auto laidOut = [&](const torch::Tensor &x) { return projectionLayout ? x.transpose(1, 2) : x.transpose(1, 2).contiguous(); };
            const auto out = groupedHeadsAttention(laidOut(q), laidOut(k), laidOut(v),
                                                   [&](const torch::Tensor &scores) { return cappedSoftmax(scores, scale, softcap, 0); });
            auto grads = torch::autograd::grad({out}, {q, k, v}, {up64.to(torch::kCUDA, type)});
            grads.insert(grads.begin(), out);
            return grads;
        };
        const auto inPlace = run(true), stacked = run(false);
        // The maths in float64: scale, cap, causal mask, softmax, with k and v expanded.
        auto q = q64.clone().requires_grad_(true), k = k64.clone().requires_grad_(true), v = v64.clone().requires_grad_(true);
        const auto scores = torch::matmul(q.transpose(1, 2), compat::expandKvHeads(k.transpose(1, 2), heads / kvHeads).transpose(-2, -1));
        const auto capped = (torch::tanh(scores * scale / softcap) * softcap).masked_fill(torch::ones({t, t}, torch::kBool).triu(1), -INFINITY);
        const auto ref = torch::matmul(torch::softmax(capped, -1), compat::expandKvHeads(v.transpose(1, 2), heads / kvHeads));
        auto refs = torch::autograd::grad({ref}, {q, k, v}, {up64});
        refs.insert(refs.begin(), ref);
        const double tolerance = bf16 ? 2e-2 : 1e-5;
        const char *names[] = {"output", "q", "k", "v"};
        for (int i = 0; i < 4; ++i) {
            const double between = relativeNormError(inPlace[i].cpu(), stacked[i].cpu()), toMaths = relativeNormError(inPlace[i].cpu(), refs[i]);
            qInfo("%s: in place against stacked %.3g, against float64 %.3g", names[i], between, toMaths);
            QVERIFY2(between < tolerance && toMaths < tolerance, names[i]);
        }
    }
};

QTEST_GUILESS_MAIN(TestHeadLayoutAttention)
#include "tst_head_layout_attention.moc"
