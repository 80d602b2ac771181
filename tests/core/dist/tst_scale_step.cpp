// The arithmetic and set-up checks of a scaling step, worked by hand: the baseline's effective
// batch, the summary figures, the warnings, and the torchrun-style environment.
#include "config/Presets.h"
#include "dist/Rendezvous.h"
#include "dist/ScaleStep.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QtTest>

using namespace pb;

namespace {
RankFigures rank(int r, double tokensPerS, double stepMs, double commMs, int64_t peak, const char *checksum = "abc")
{
    RankFigures f;
    f.rank = r;
    f.tokensPerSecond = tokensPerS;
    f.stepTimeMeanMs = stepMs;
    f.commMsPerStep = commMs;
    f.peakAllocatedBytes = peak;
    f.verdict = "fits";
    f.parameterChecksum = checksum;
    return f;
}

QProcessEnvironment env(std::initializer_list<std::pair<const char *, const char *>> vars)
{
    QProcessEnvironment e;
    for (const auto &[k, v] : vars)
        e.insert(QLatin1String(k), QLatin1String(v));
    return e;
}
} // namespace

class TestScaleStep : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void baselineKeepsMicroBatchAndMultipliesAccumulation()
    {
        RunConfig worker = presetConfig(QStringLiteral("tiny"));
        worker.train.microBatch = 3;
        worker.train.gradAccum = 2;
        const RunConfig baseline = baselineConfigFor(worker, 4);
        QCOMPARE(baseline.train.microBatch, int64_t(3));
        QCOMPARE(baseline.train.gradAccum, int64_t(8));
        // 4 ranks x 3 x 2 = 24 sequences per step = 3 x 8 in one process.
        QCOMPARE(baseline.train.microBatch * baseline.train.gradAccum, int64_t(4) * worker.train.microBatch * worker.train.gradAccum);
        QCOMPARE(baseline.train.seqLen, worker.train.seqLen);
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, baselineConfigFor(worker, 0));
    }

    void summaryByHand()
    {
        // Baseline 1000 tok/s; ranks 900 + 700 = 1600 tok/s -> speed-up 1.6, efficiency 1.6 / 2 = 0.8.
        const ScaleSummary s = summarizeScale("ddp", 1000, 50, {rank(0, 900, 55, 4, 100), rank(1, 700, 60, 6, 120)});
        QCOMPARE(s.gpus, 2);
        QCOMPARE(s.tokensPerSecond, 1600.0);
        QCOMPARE(s.speedup, 1.6);
        QCOMPARE(s.scalingEfficiency, 0.8);
        QCOMPARE(s.commMsPerStep, 5.0);       // (4 + 6) / 2
        QCOMPARE(s.stepTimeMs, 60.0);         // the slowest rank
        QCOMPARE(s.perRankPeakAllocatedBytes, (std::vector<int64_t> {100, 120}));
        QVERIFY(s.parametersAgree);
        const QJsonObject json = toJson(s);
        for (const char *key : {"strategy", "gpus", "baseline_tokens_per_s", "tokens_per_s", "scaling_efficiency", "comm_ms_per_step", "per_rank_peak_allocated_bytes"})
            QVERIFY2(json.contains(QLatin1String(key)), key);
        QCOMPARE(json.value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray().size(), 2);
    }

    void summaryFlagsDisagreeingRanks()
    {
        const ScaleSummary s = summarizeScale("ddp", 1000, 50, {rank(0, 900, 55, 4, 100, "aa"), rank(1, 700, 60, 6, 120, "bb")});
        QVERIFY(!s.parametersAgree);
    }

    void summaryRefusesNothingToCompare()
    {
        QVERIFY_THROWS_EXCEPTION(PilotBenchError, summarizeScale("ddp", 0, 50, {rank(0, 900, 55, 4, 100)}));
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, summarizeScale("ddp", 1000, 50, {}));
    }

    void rankFiguresNeedEveryField()
    {
        QJsonObject json {{QStringLiteral("rank"), 1}, {QStringLiteral("tokens_per_s"), 10.0}, {QStringLiteral("step_time_mean_ms"), 2.0},
                          {QStringLiteral("comm_ms_per_step"), 0.5}, {QStringLiteral("peak_allocated_bytes"), 4096.0}, {QStringLiteral("verdict"), QStringLiteral("fits")}};
        const RankFigures f = rankFiguresFromJson(json, "rank1.json");
        QCOMPARE(f.rank, 1);
        QCOMPARE(f.peakAllocatedBytes, int64_t(4096));
        json.remove(QStringLiteral("comm_ms_per_step"));
        try {
            rankFiguresFromJson(json, "rank1.json");
            QFAIL("accepted a result without comm_ms_per_step");
        } catch (const InvalidInputError &e) {
            QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("comm_ms_per_step")));
        }
    }

    void warnings_data()
    {
        QTest::addColumn<QStringList>("devices");
        QTest::addColumn<QString>("nvls");      // "-" : unset
        QTest::addColumn<int>("threads");
        QTest::addColumn<QString>("expected");  // substring of the one warning, "" for none
        QTest::newRow("two ranks one gpu") << QStringList {QStringLiteral("cuda:0"), QStringLiteral("cuda:0")} << QStringLiteral("0") << 0 << QStringLiteral("share cuda:0");
        QTest::newRow("nvls unset") << QStringList {QStringLiteral("cuda:0"), QStringLiteral("cuda:1")} << QStringLiteral("-") << 0 << QStringLiteral("not set");
        QTest::newRow("nvls on") << QStringList {QStringLiteral("cuda:0"), QStringLiteral("cuda:1")} << QStringLiteral("1") << 0 << QStringLiteral("NCCL_NVLS_ENABLE=1");
        QTest::newRow("clean cuda") << QStringList {QStringLiteral("cuda:0"), QStringLiteral("cuda:1")} << QStringLiteral("0") << 0 << QString();
        QTest::newRow("cpu oversubscribed") << QStringList {QStringLiteral("cpu"), QStringLiteral("cpu")} << QStringLiteral("-") << 3 << QStringLiteral("exceed this host's 4 CPUs");
        QTest::newRow("cpu fits") << QStringList {QStringLiteral("cpu"), QStringLiteral("cpu")} << QStringLiteral("-") << 2 << QString();
    }

    void warnings()
    {
        QFETCH(QStringList, devices);
        QFETCH(QString, nvls);
        QFETCH(int, threads);
        QFETCH(QString, expected);
        std::vector<std::string> ranks;
        for (const auto &d : devices)
            ranks.push_back(d.toStdString());
        QProcessEnvironment e;
        if (nvls != QLatin1String("-"))
            e.insert(QStringLiteral("NCCL_NVLS_ENABLE"), nvls);
        const auto found = scaleWarnings(ranks, e, threads, 4);
        if (expected.isEmpty()) {
            QVERIFY2(found.empty(), found.empty() ? "" : found.front().c_str());
            return;
        }
        QCOMPARE(found.size(), size_t(1));
        QVERIFY2(QString::fromStdString(found.front()).contains(expected), found.front().c_str());
    }

    void rendezvousFromTorchrunEnvironment()
    {
        const Rendezvous r = rendezvousFromEnvironment(
            env({{"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29500"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
        QCOMPARE(r.masterAddr, std::string("10.0.0.5"));
        QCOMPARE(r.masterPort, 29500);
        QCOMPARE(r.rank, 5);
        QCOMPARE(r.worldSize, 8);
        QCOMPARE(r.localRank, 1);
        // One host without LOCAL_RANK: the rank is the GPU index.
        QCOMPARE(rendezvousFromEnvironment(env({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}})).localRank, 1);
        QProcessEnvironment round;
        applyRendezvous(r, round);
        const Rendezvous back = rendezvousFromEnvironment(round);
        QCOMPARE(back.rank, 5);
        QCOMPARE(back.localRank, 1);
        QCOMPARE(back.masterAddr, r.masterAddr);
    }

    void rendezvousRefusals_data()
    {
        QTest::addColumn<QString>("port");
        QTest::addColumn<QString>("rank");
        QTest::addColumn<QString>("world");
        QTest::addColumn<QString>("variable");
        QTest::newRow("rank outside world") << QStringLiteral("29500") << QStringLiteral("2") << QStringLiteral("2") << QStringLiteral("RANK");
        QTest::newRow("port zero") << QStringLiteral("0") << QStringLiteral("0") << QStringLiteral("2") << QStringLiteral("MASTER_PORT");
        QTest::newRow("port text") << QStringLiteral("http") << QStringLiteral("0") << QStringLiteral("2") << QStringLiteral("MASTER_PORT");
        QTest::newRow("world zero") << QStringLiteral("29500") << QStringLiteral("0") << QStringLiteral("0") << QStringLiteral("WORLD_SIZE");
        QTest::newRow("rank missing") << QStringLiteral("29500") << QString() << QStringLiteral("2") << QStringLiteral("RANK");
    }

    void rendezvousRefusals()
    {
        QFETCH(QString, port);
        QFETCH(QString, rank);
        QFETCH(QString, world);
        QFETCH(QString, variable);
        QProcessEnvironment e;
        e.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
        e.insert(QStringLiteral("MASTER_PORT"), port);
        e.insert(QStringLiteral("WORLD_SIZE"), world);
        if (!rank.isNull())
            e.insert(QStringLiteral("RANK"), rank);
        try {
            rendezvousFromEnvironment(e);
            QFAIL("accepted a bad rendezvous environment");
        } catch (const InvalidInputError &error) {
            QCOMPARE(QString::fromStdString(error.where()), variable);
        }
    }

    void freePortIsUsable()
    {
        const int port = freeLocalPort();
        QVERIFY(port > 0 && port < 65536);
    }
};

QTEST_GUILESS_MAIN(TestScaleStep)
#include "tst_scale_step.moc"
