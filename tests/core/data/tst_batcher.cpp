// Batcher: padding, shifted targets, token counts worked out by hand; longest-first; epoch wrap;
// seek round-trip; the train/validation split.
#include "core/data/DataTestUtil.h"
#include "data/Batcher.h"

#include <algorithm>
#include <map>
#include <set>

using namespace pbtest;

namespace {

// Five samples whose tokens are all distinct, so a batch row tells which sample it holds.
class FakeDataset final : public pb::TokenDataset {
public:
    explicit FakeDataset(std::vector<std::vector<int32_t>> samples) : m_samples(std::move(samples)) {}
    int64_t size() const override { return static_cast<int64_t>(m_samples.size()); }
    int64_t length(int64_t i) const override { return static_cast<int64_t>(m_samples.at(size_t(i)).size()); }
    void read(int64_t i, std::vector<int32_t> &out) const override { out.insert(out.end(), m_samples.at(size_t(i)).begin(), m_samples.at(size_t(i)).end()); }
    std::string revision() const override { return "fake"; }
    std::string description() const override { return "fake"; }

private:
    std::vector<std::vector<int32_t>> m_samples;
};

FakeDataset fiveSamples()
{
    return FakeDataset({{1, 2, 3}, {4, 5, 6, 7, 8}, {9, 10}, {11, 12, 13, 14}, {15, 16, 17, 18, 19, 20}});
}

std::vector<int64_t> allOf(const pb::TokenDataset &d)
{
    std::vector<int64_t> v(static_cast<size_t>(d.size()));
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = int64_t(i);
    return v;
}

bool sameBatch(const pb::Batch &a, const pb::Batch &b)
{
    return a.batchSize == b.batchSize && a.seqLen == b.seqLen && a.inputs == b.inputs && a.targets == b.targets && a.tokens == b.tokens;
}

// The first input token of each row identifies the sample (FakeDataset tokens are distinct).
std::vector<int64_t> firstTokens(const pb::Batch &b)
{
    std::vector<int64_t> v;
    for (int64_t r = 0; r < b.batchSize; ++r)
        v.push_back(b.inputs[size_t(r * b.seqLen)]);
    return v;
}

} // namespace

class TestBatcher : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void longestFirstPaddingAndTargets()
    {
        const FakeDataset d = fiveSamples();
        pb::Batcher b(d, allOf(d), 2, true, 42);
        QCOMPARE(b.batchesPerEpoch(), int64_t(3));
        const pb::Batch first = b.next();
        // The two longest samples: 4 (6 tokens) and 1 (5 tokens); width = 6 - 1.
        QCOMPARE(first.batchSize, int64_t(2));
        QCOMPARE(first.seqLen, int64_t(5));
        QCOMPARE(first.inputs, (std::vector<int64_t> {15, 16, 17, 18, 19, /**/ 4, 5, 6, 7, 0}));
        QCOMPARE(first.targets, (std::vector<int64_t> {16, 17, 18, 19, 20, /**/ 5, 6, 7, 8, -100}));
        QCOMPARE(first.tokens, int64_t(5 + 4));
        QCOMPARE(b.position(), (pb::DataPosition {0, 1, 42}));

        // The rest of the epoch: samples 0, 2 and 3 in some order, the last batch holds one sample.
        const pb::Batch second = b.next();
        const pb::Batch third = b.next();
        QCOMPARE(second.batchSize, int64_t(2));
        QCOMPARE(third.batchSize, int64_t(1));
        std::vector<int64_t> seen = firstTokens(second);
        for (int64_t t : firstTokens(third))
            seen.push_back(t);
        std::sort(seen.begin(), seen.end());
        QCOMPARE(seen, (std::vector<int64_t> {1, 9, 11}));
        QCOMPARE(second.tokens + third.tokens, int64_t(2 + 1 + 3));
        // Padding is at the right; each row's targets != -100 are exactly length - 1.
        for (const pb::Batch *batch : {&second, &third})
            for (int64_t r = 0; r < batch->batchSize; ++r) {
                const int64_t firstToken = batch->inputs[size_t(r * batch->seqLen)];
                const int64_t expected = firstToken == 1 ? 2 : firstToken == 9 ? 1 : 3;
                int64_t counted = 0;
                for (int64_t c = 0; c < batch->seqLen; ++c)
                    if (batch->targets[size_t(r * batch->seqLen + c)] != -100) {
                        QCOMPARE(c, counted); // no gap before the padding
                        QCOMPARE(batch->targets[size_t(r * batch->seqLen + c)], batch->inputs[size_t(r * batch->seqLen + c)] + 1);
                        ++counted;
                    }
                QCOMPARE(counted, expected);
            }

        // Epoch wrap: the longest batch comes first again.
        QCOMPARE(b.position(), (pb::DataPosition {0, 3, 42}));
        QVERIFY(sameBatch(b.next(), first));
        QCOMPARE(b.position(), (pb::DataPosition {1, 1, 42}));
    }

    void shuffledEpochsArePermutations()
    {
        std::vector<std::vector<int32_t>> samples;
        for (int32_t i = 0; i < 40; ++i)
            samples.push_back({i * 10 + 1, i * 10 + 2, i * 10 + 3});
        const FakeDataset d(samples);
        auto epochOrder = [&](pb::Batcher &b) {
            std::vector<int64_t> order;
            for (int64_t i = 0; i < b.batchesPerEpoch(); ++i)
                for (int64_t t : firstTokens(b.next()))
                    order.push_back(t);
            return order;
        };
        pb::Batcher b(d, allOf(d), 3, false, 5);
        QCOMPARE(b.batchesPerEpoch(), int64_t(14)); // 40 = 13 * 3 + 1
        const auto e0 = epochOrder(b);
        const auto e1 = epochOrder(b);
        pb::Batcher other(d, allOf(d), 3, false, 6);
        const auto o0 = epochOrder(other);
        for (const auto *order : {&e0, &e1, &o0}) {
            auto sorted = *order;
            std::sort(sorted.begin(), sorted.end());
            std::vector<int64_t> expected;
            for (int64_t i = 0; i < 40; ++i)
                expected.push_back(i * 10 + 1);
            QCOMPARE(sorted, expected);
        }
        QVERIFY(e0 != e1); // reshuffled per epoch (shuffleSeed + epoch)
        QVERIFY(e0 != o0); // and per seed
        pb::Batcher again(d, allOf(d), 3, false, 5);
        QCOMPARE(epochOrder(again), e0);
    }

    void seekRoundTrip_data()
    {
        QTest::addColumn<bool>("longestFirst");
        QTest::addColumn<int>("saveAfter");
        QTest::newRow("shuffled, mid epoch") << false << 4;
        QTest::newRow("shuffled, epoch end") << false << 12;
        QTest::newRow("shuffled, later epoch") << false << 17;
        QTest::newRow("longest-first, mid epoch") << true << 5;
        QTest::newRow("longest-first, later epoch") << true << 23;
    }
    void seekRoundTrip()
    {
        QFETCH(bool, longestFirst);
        QFETCH(int, saveAfter);
        auto c = pb::DataConfig();
        c.syntheticSamples = 50;
        c.lengths = pb::LengthDistribution::Uniform;
        c.minLength = 3;
        const auto d = pb::openDataset(c, 500, 32, 9);
        std::vector<int64_t> train, validation;
        pb::splitSamples(*d, 100, 9, train, validation);
        pb::Batcher uninterrupted(*d, train, 4, longestFirst, 77); // 45 samples: 12 batches per epoch
        for (int i = 0; i < saveAfter; ++i)
            uninterrupted.next();
        QCOMPARE(uninterrupted.batchesPerEpoch(), int64_t(12));
        const pb::DataPosition saved = uninterrupted.position();
        std::vector<pb::Batch> expected;
        for (int i = 0; i < 15; ++i)
            expected.push_back(uninterrupted.next());

        pb::Batcher restored(*d, train, 4, longestFirst, 1); // a different seed: seek must restore it
        restored.next();
        restored.seek(saved);
        QCOMPARE(restored.position(), saved);
        for (int i = 0; i < 15; ++i)
            QVERIFY2(sameBatch(restored.next(), expected[size_t(i)]), qPrintable(QStringLiteral("batch %1 after the restore").arg(i)));
        QCOMPARE(restored.position(), uninterrupted.position());
    }

    void seekToTheEndOfAnEpochWraps()
    {
        const FakeDataset d = fiveSamples();
        pb::Batcher b(d, allOf(d), 2, true, 3);
        const pb::Batch first = b.next();
        pb::Batcher c(d, allOf(d), 2, true, 3);
        c.seek({4, 3, 3});
        QVERIFY(sameBatch(c.next(), first));
        QCOMPARE(c.position(), (pb::DataPosition {5, 1, 3}));
    }

    void refused()
    {
        const FakeDataset d = fiveSamples();
        pb::Batcher b(d, allOf(d), 2, false, 3);
        PB_EXPECT_INVALID(b.seek({0, 4, 3}), std::string("checkpoint.data_position"), std::string("batch 4 is outside this data set's 3 batches per epoch"));
        PB_EXPECT_INVALID(b.seek({-1, 0, 3}), std::string("checkpoint.data_position"), std::string("epoch -1"));
        PB_EXPECT_INVALID(pb::Batcher(d, allOf(d), 0, false, 1), std::string("train.micro_batch"), std::string("at least 1"));
        PB_EXPECT_INVALID(pb::Batcher(d, {}, 2, false, 1), std::string("data"), std::string("no samples"));
        QVERIFY_THROWS_EXCEPTION(pb::PilotBenchError, pb::Batcher(d, {0, 5}, 2, false, 1));
    }

    void split()
    {
        auto c = pb::DataConfig();
        c.syntheticSamples = 1000;
        const auto d = pb::openDataset(c, 100, 8, 1);
        std::vector<int64_t> train, validation;
        pb::splitSamples(*d, 100, 7, train, validation);
        QCOMPARE(validation.size(), size_t(100));
        QCOMPARE(train.size(), size_t(900));
        QVERIFY(std::is_sorted(train.begin(), train.end()) && std::is_sorted(validation.begin(), validation.end()));
        std::set<int64_t> all(train.begin(), train.end());
        all.insert(validation.begin(), validation.end());
        QCOMPARE(all.size(), size_t(1000));
        QCOMPARE(*all.rbegin(), int64_t(999));
        std::vector<int64_t> train2, validation2;
        pb::splitSamples(*d, 100, 7, train2, validation2);
        QCOMPARE(validation2, validation);
        pb::splitSamples(*d, 100, 8, train2, validation2);
        QVERIFY(validation2 != validation);
        pb::splitSamples(*d, 0, 7, train2, validation2);
        QVERIFY(validation2.empty());
        QCOMPARE(train2.size(), size_t(1000));
    }

    void splitSizes_data()
    {
        QTest::addColumn<int>("samples");
        QTest::addColumn<int>("perMille");
        QTest::addColumn<int>("held");
        QTest::newRow("rounds to nearest") << 10 << 250 << 3;    // 2.5 -> 3
        QTest::newRow("rounds down") << 10 << 240 << 2;          // 2.4 -> 2
        QTest::newRow("at least one") << 5 << 10 << 1;           // 0.05 -> 0, but validation was asked for
        QTest::newRow("nothing left to train") << 2 << 999 << 2; // 1.998 -> 2 of 2: refused
        QTest::newRow("single sample") << 1 << 10 << -1;
    }
    void splitSizes()
    {
        QFETCH(int, samples);
        QFETCH(int, perMille);
        QFETCH(int, held);
        auto c = pb::DataConfig();
        c.syntheticSamples = samples;
        const auto d = pb::openDataset(c, 100, 8, 1);
        std::vector<int64_t> train, validation;
        if (held < 0 || held >= samples) {
            PB_EXPECT_INVALID(pb::splitSamples(*d, perMille, 1, train, validation), std::string("data.validation_fraction"), std::string("too few"));
            return;
        }
        pb::splitSamples(*d, perMille, 1, train, validation);
        QCOMPARE(validation.size(), size_t(held));
        QCOMPARE(train.size(), size_t(samples - held));
    }

    void splitRefusesBadFractions()
    {
        const FakeDataset d = fiveSamples();
        std::vector<int64_t> t, v;
        PB_EXPECT_INVALID(pb::splitSamples(d, 1000, 1, t, v), std::string("data.validation_fraction"), std::string("0..999"));
        PB_EXPECT_INVALID(pb::splitSamples(d, -1, 1, t, v), std::string("data.validation_fraction"), std::string("0..999"));
    }
};

QTEST_GUILESS_MAIN(TestBatcher)
#include "tst_batcher.moc"
