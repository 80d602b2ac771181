// The fixed-term decision with hand-worked numbers from the shipped catalog's prices.
#include "catalog/CostModel.h"
#include "util/Errors.h"

#include <QtTest>

namespace {

bool near(double a, double b, double tolerance = 1e-6) { return qAbs(a - b) <= tolerance; }

pb::ConfigurationCost row(const char *card, int gpus, bool fits, double totalCost, double windowHours, pb::FigureBasis basis)
{
    pb::ConfigurationCost r;
    r.cardId = card;
    r.gpus = gpus;
    r.fits = fits;
    r.stepTimeBasis = basis;
    r.cost.cardId = card;
    r.cost.gpus = gpus;
    r.cost.totalCost = totalCost;
    r.cost.windowHours = windowHours;
    r.cost.costPerMillionTokens = totalCost / 1000.0;
    r.cost.plan.description = "test plan";
    return r;
}

} // namespace

class TestCostModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void cheapestPlan_data()
    {
        QTest::addColumn<QString>("card");
        QTest::addColumn<int>("gpus");
        QTest::addColumn<double>("windowHours");
        QTest::addColumn<QString>("termId");
        QTest::addColumn<int>("blocks");
        QTest::addColumn<double>("onDemandHours");
        QTest::addColumn<double>("gpuCost");
        QTest::addColumn<QString>("description");
        // H100 x1, 60 h: on demand 60 x 2.95 = 177.00 beats 1 week 168 x 2.71 = 455.28.
        QTest::newRow("short job on demand") << "h100-sxm-80gb" << 1 << 60.0 << "on_demand" << 0 << 60.0 << 177.0 << "60 h on demand";
        // On demand is billed per started hour: 10.2 h -> 11 h x 1.89 = 20.79.
        QTest::newRow("started hour") << "a100-sxm-80gb" << 1 << 10.2 << "on_demand" << 0 << 11.0 << 20.79 << "11 h on demand";
        // A100 x1, exactly 168 h: 1 week 168 x 1.74 = 292.32 < on demand 168 x 1.89 = 317.52.
        QTest::newRow("exactly one week") << "a100-sxm-80gb" << 1 << 168.0 << "1w" << 1 << 0.0 << 292.32 << "1 x 1 week";
        // H200 x4, a 10-day job (240 h):
        //   on demand            240 x 3.58 x 4                       = 3436.80
        //   2 x 1 week           336 x 3.29 x 4                       = 4421.76
        //   1 week + 72 h        168 x 3.29 x 4 + 72 x 3.58 x 4       = 2210.88 + 1031.04 = 3241.92  <- cheapest
        //   1 month              730 x 2.94 x 4                       = 8584.80
        QTest::newRow("ten days H200 x4") << "h200-sxm-141gb" << 4 << 240.0 << "1w" << 1 << 72.0 << 3241.92 << "1 x 1 week + 72 h on demand";
        // H100 x8, 700 h:
        //   on demand            700 x 2.79 x 8                       = 15624.00
        //   5 x 1 week           840 x 2.57 x 8                       = 17270.40
        //   4 weeks + 28 h       672 x 2.57 x 8 + 28 x 2.79 x 8       = 13816.32 + 624.96 = 14441.28
        //   1 month              730 x 2.29 x 8                       = 13373.60  <- cheapest
        QTest::newRow("700 h H100 x8") << "h100-sxm-80gb" << 8 << 700.0 << "1m" << 1 << 0.0 << 13373.6 << "1 x 1 month";
    }
    void cheapestPlan()
    {
        QFETCH(QString, card);
        QFETCH(int, gpus);
        QFETCH(double, windowHours);
        QFETCH(QString, termId);
        QFETCH(int, blocks);
        QFETCH(double, onDemandHours);
        QFETCH(double, gpuCost);
        QFETCH(QString, description);
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto plan = pb::cheapestPlan(catalog, catalog.card(card.toStdString()), gpus, windowHours);
        QCOMPARE(QString::fromStdString(plan.termId), termId);
        QCOMPARE(plan.blocks, blocks);
        QCOMPARE(plan.onDemandHours, onDemandHours);
        QVERIFY2(near(plan.gpuCost, gpuCost), qPrintable(QString::number(plan.gpuCost, 'f', 4)));
        QCOMPARE(QString::fromStdString(plan.description), description);
        // Every candidate covers the window, and the list is sorted by cost.
        const auto all = pb::billingPlans(catalog, catalog.card(card.toStdString()), gpus, windowHours);
        for (size_t i = 0; i < all.size(); ++i) {
            QVERIFY(all[i].billedHours >= windowHours - 1e-9);
            if (i > 0)
                QVERIFY(all[i - 1].gpuCost <= all[i].gpuCost);
        }
    }

    void planForANamedTerm()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto &h200 = catalog.card("h200-sxm-141gb");
        QVERIFY(near(pb::planForTerm(catalog, h200, 4, 240, "on_demand").gpuCost, 3436.80));
        QVERIFY(near(pb::planForTerm(catalog, h200, 4, 240, "1w").gpuCost, 3241.92));
        // 3 months: 2190 x 2.58 x 4 = 22600.80
        QVERIFY(near(pb::planForTerm(catalog, h200, 4, 240, "3m").gpuCost, 22600.80));
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::planForTerm(catalog, h200, 4, 240, "6m"));
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::cheapestPlan(catalog, h200, 3, 240));
    }

    void totalCostAndCostPerMillionTokens()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        pb::CostInputs in;
        in.plannedTokens = 1.008e9;
        in.tokensPerSecond = 5000;           // 1.008e9 / 5000 = 201600 s = 56 h
        in.window = {1.0, 2.0, 0.5, 0.5};    // start-up, validation, checkpoints, export: 4 h
        in.options = {2.0, 1.0, true};       // 2 TB storage, 1 TB egress, support
        const auto e = pb::estimateCost(catalog, catalog.card("h100-sxm-80gb"), 1, in);
        QVERIFY(near(e.jobHours, 56.0));
        QVERIFY(near(e.windowHours, 60.0));
        QCOMPARE(QString::fromStdString(e.plan.termId), QStringLiteral("on_demand"));
        QVERIFY(near(e.plan.gpuCost, 177.0));                    // 60 h x 2.95
        QVERIFY(near(e.storageCost, 2.0 * 45.0 * 60.0 / 730.0)); // 7.397260
        QVERIFY(near(e.egressCost, 60.0));                       // 1 TB x 60
        QVERIFY(near(e.supportCost, 250.0));                     // one started month
        QVERIFY(near(e.optionsCost, 317.397260, 1e-5));
        QVERIFY(near(e.totalCost, 494.397260, 1e-5));            // 177 + 317.397260
        QVERIFY(near(e.costPerMillionTokens, 494.397260 / 1008.0, 1e-8)); // 0.490474 per million
        // Only 900 M tokens trained successfully: 494.397260 / 900 = 0.549330 per million.
        in.usefulTokens = 9e8;
        const auto lost = pb::estimateCost(catalog, catalog.card("h100-sxm-80gb"), 1, in);
        QVERIFY(near(lost.costPerMillionTokens, 0.549330, 1e-6));
    }

    void optionsFollowTheBilledPeriod()
    {
        // A forced 1-month term bills 730 h: storage 1 TB x 45 x 730/730 = 45; support 1 month.
        // H100 x2 1 month: 730 x 2.39 x 2 = 3489.40; total 3489.40 + 45 + 250 = 3784.40.
        const pb::Catalog catalog = pb::builtInCatalog();
        pb::CostInputs in;
        in.plannedTokens = 3.6e8;
        in.tokensPerSecond = 10000;          // 10 h
        in.options = {1.0, 0.0, true};
        in.termId = "1m";
        const auto e = pb::estimateCost(catalog, catalog.card("h100-sxm-80gb"), 2, in);
        QVERIFY(near(e.windowHours, 10.0));
        QVERIFY(near(e.plan.gpuCost, 3489.40));
        QVERIFY(near(e.storageCost, 45.0));
        QVERIFY(near(e.supportCost, 250.0));
        QVERIFY(near(e.totalCost, 3784.40));
        // 5 weeks billed (840 h) is two started months of support: 2 x 250.
        in.termId = "1w";
        in.tokensPerSecond = 3.6e8 / (800.0 * 3600.0);  // 800 h window -> 5 x 1 week covering or 4 weeks + 128 h
        const auto weeks = pb::estimateCost(catalog, catalog.card("h100-sxm-80gb"), 2, in);
        QVERIFY(weeks.plan.billedHours > 730);
        QVERIFY(near(weeks.supportCost, 500.0));
    }

    void refusals_data()
    {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("where");
        QTest::newRow("no tokens") << 0 << "job.tokens";
        QTest::newRow("no throughput") << 1 << "tokens_per_second";
        QTest::newRow("negative validation") << 2 << "window.validation_hours";
        QTest::newRow("negative egress") << 3 << "options.egress_tb";
        QTest::newRow("useful above planned") << 4 << "job.useful_tokens";
        QTest::newRow("unpriced count") << 5 << "gpus";
        QTest::newRow("unknown term") << 6 << "term";
    }
    void refusals()
    {
        QFETCH(int, fault);
        QFETCH(QString, where);
        pb::CostInputs in;
        in.plannedTokens = 1e9;
        in.tokensPerSecond = 1e4;
        int gpus = 1;
        switch (fault) {
        case 0: in.plannedTokens = 0; break;
        case 1: in.tokensPerSecond = 0; break;
        case 2: in.window.validationHours = -1; break;
        case 3: in.options.egressTb = -1; break;
        case 4: in.usefulTokens = 2e9; break;
        case 5: gpus = 3; break;
        case 6: in.termId = "2w"; break;
        }
        const pb::Catalog catalog = pb::builtInCatalog();
        try {
            pb::estimateCost(catalog, catalog.card("a100-sxm-80gb"), gpus, in);
            QFAIL("accepted");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), where);
        }
    }

    void recommendation()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        auto rows = std::vector<pb::ConfigurationCost> {
            row("a100-sxm-80gb", 1, true, 300, 100, pb::FigureBasis::Modelled),
            row("h100-sxm-80gb", 1, true, 250, 50, pb::FigureBasis::Measured),
            row("h200-sxm-141gb", 1, false, 100, 30, pb::FigureBasis::Modelled),   // cheapest but does not fit
            row("mi300x-192gb", 1, true, 260, 40, pb::FigureBasis::Modelled),
        };
        auto r = pb::recommend(rows, catalog, std::nullopt);
        QCOMPARE(r.index, 1);
        QVERIFY(rows[1].recommended && !rows[0].recommended && !rows[2].recommended && !rows[3].recommended);
        const QString text = QString::fromStdString(r.text);
        QVERIFY2(text.startsWith(QStringLiteral("Rent NVIDIA H100 SXM 80GB x1 (test plan): it fits")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("250.00 USD in total")), qPrintable(text));
        // Runner-up: MI300X, 260 - 250 = 10 more, 50 - 40 = 10 h sooner.
        QVERIFY2(text.contains(QStringLiteral("AMD Instinct MI300X 192GB x1, costs 10.00 USD more but finishes 10.0 h sooner")), qPrintable(text));
        QVERIFY(text.contains(QStringLiteral("locally modelled catalog of 2026-12-02")));
        QVERIFY(!text.contains(QStringLiteral("modelled, not measured")));

        // A 45 h deadline leaves only the MI300X (40 h); its step time is modelled, so say so.
        r = pb::recommend(rows, catalog, 45.0);
        QCOMPARE(r.index, 3);
        QVERIFY(!rows[1].meetsDeadline && rows[3].meetsDeadline && !rows[1].recommended && rows[3].recommended);
        QVERIFY(QString::fromStdString(r.text).contains(QStringLiteral("(deadline 45.0 h)")));
        QVERIFY(QString::fromStdString(r.text).contains(QStringLiteral("modelled, not measured")));

        r = pb::recommend(rows, catalog, 30.0);
        QCOMPARE(r.index, -1);
        for (const auto &x : rows)
            QVERIFY(!x.recommended);
        QVERIFY2(QString::fromStdString(r.text).startsWith(QStringLiteral("Nothing that fits meets the deadline of 30.0 h: the fastest fitting configuration, AMD Instinct MI300X 192GB x1, needs a rental window of 40.0 h")),
                 r.text.c_str());

        for (auto &x : rows)
            x.fits = false;
        r = pb::recommend(rows, catalog, std::nullopt);
        QCOMPARE(r.index, -1);
        QVERIFY(QString::fromStdString(r.text).startsWith(QStringLiteral("No configuration fits")));
    }

    void tiesGoToTheShorterWindowThenFewerGpus()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        auto rows = std::vector<pb::ConfigurationCost> {
            row("h100-sxm-80gb", 2, true, 200, 60, pb::FigureBasis::Modelled),
            row("h100-sxm-80gb", 4, true, 200, 30, pb::FigureBasis::Modelled),
            row("h100-sxm-80gb", 1, true, 200, 30, pb::FigureBasis::Modelled),
        };
        QCOMPARE(pb::recommend(rows, catalog, std::nullopt).index, 2);
    }
};

QTEST_GUILESS_MAIN(TestCostModel)
#include "tst_costmodel.moc"
