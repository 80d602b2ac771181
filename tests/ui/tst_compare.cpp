// The card comparison with hand-worked numbers (a pilot measured on an H100, projected to the
// others), the deadline, refused input, and the comparison view showing it.
#include "compare/CompareView.h"
#include "compare/CostHoursChart.h"
#include "compare/ElidedLinesLabel.h"
#include "ForLooking.h"
#include "workflow/Decision.h"
#include "workflow/DecisionRun.h"
#include "catalog/RentalWindow.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "estimate/CheckpointBytes.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QChart>
#include <QComboBox>
#include <QFrame>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

namespace {

// A pilot on an H100 SXM: 1 s per step of 8192 tokens at 100 TFLOP (10.1 % of its 989 TFLOP/s),
// half an hour of start-up, no validation or checkpoints.
pb::PilotEvidence h100Pilot()
{
    pb::PilotEvidence e;
    e.runId = 7;
    e.deviceLabel = "NVIDIA H100 80GB HBM3";
    e.cardId = "h100-sxm-80gb";
    e.stepTimeMs = 1000;
    e.flopsPerStep = 100e12;
    e.tokensPerStep = 8192;
    e.setupMs = 1800e3;
    return e;
}

// 36,000 steps of 8192 tokens: 10 h on the H100.
pb::RunConfig plannedJob()
{
    pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
    c.job.unit = pb::JobUnit::Tokens;
    c.job.amount = 8192.0 * 36000;
    c.validation.everySteps = 0;
    c.checkpoint.everySteps = 0;
    return c;
}

// Shows the view, then saves it for looking at (ForLooking.h).
bool showForLooking(QWidget &view, const QString &file)
{
    view.show();
    return QTest::qWaitForWindowExposed(&view) && saveForLooking(view, file);
}

const pb::ComparisonRow &row(const pb::Comparison &c, const std::string &card, int gpus)
{
    for (const auto &r : c.rows) {
        if (r.cardId == card && r.gpus == gpus)
            return r;
    }
    throw std::runtime_error("no row " + card);
}

int recommendedCount(const pb::Comparison &c)
{
    int n = 0;
    for (const auto &r : c.rows)
        n += r.recommended ? 1 : 0;
    return n;
}

// The four cards the hand-worked figures below were worked out on (the built-in catalog's first
// four; the cards of 2026 after them change which is cheapest, not the arithmetic).
pb::Catalog fourCards()
{
    pb::Catalog c = pb::builtInCatalog();
    c.cards.resize(4);
    return c;
}

bool anyContains(const std::vector<std::string> &list, const char *text)
{
    for (const auto &s : list)
        if (s.find(text) != std::string::npos)
            return true;
    return false;
}

pb::ComparisonRequest onDemandOneAndTwo()
{
    pb::ComparisonRequest request;
    request.gpuCounts = {1, 2};
    request.termId = "on_demand";
    return request;
}

} // namespace

class TestCompare : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void handWorkedRows()
    {
        const pb::Catalog catalog = fourCards();
        const pb::Comparison c = pb::compareConfigurations(plannedJob(), catalog, onDemandOneAndTwo(), h100Pilot());
        QCOMPARE(c.rows.size(), size_t(8));
        QCOMPARE(c.pilotRunId.value_or(0), int64_t(7));

        // H100 x1: measured. 36,000 s = 10 h of training + 0.5 h start-up = 10.5 h, billed per
        // started hour: 11 h x 2.95 USD = 32.45 USD; per million of 294.912 M tokens: 0.110032...
        const auto &h100 = row(c, "h100-sxm-80gb", 1);
        QCOMPARE(h100.stepTimeBasis, pb::FigureBasis::Measured);
        QCOMPARE(h100.stepTimeMs, 1000.0);
        QCOMPARE(h100.tokensPerSecond, 8192.0);
        QVERIFY(qAbs(h100.cost.jobHours - 10.0) < 1e-9);
        QVERIFY(qAbs(h100.cost.windowHours - 10.5) < 1e-9);
        QVERIFY(qAbs(h100.cost.totalCost - 32.45) < 1e-9);
        QVERIFY(qAbs(h100.cost.costPerMillionTokens - 32.45 / 294.912) < 1e-9);
        QVERIFY(h100.fits);

        // H100 x2: the assumed 0.9 scaling: 1000 / (2 x 0.9) = 555.56 ms, modelled;
        // 10 h / 1.8 + 0.5 h = 6.06 h -> 7 h x 2 GPUs x 2.92 = 40.88 USD.
        const auto &h100x2 = row(c, "h100-sxm-80gb", 2);
        QCOMPARE(h100x2.stepTimeBasis, pb::FigureBasis::Modelled);
        QVERIFY(qAbs(h100x2.stepTimeMs - 1000.0 / 1.8) < 1e-6);
        QVERIFY(qAbs(h100x2.cost.totalCost - 40.88) < 1e-9);

        // A100: compute bound at the same efficiency: 1000 x 989 / 312 = 3169.87 ms;
        // 31.70 h + 0.5 h -> 33 h x 1.89 = 62.37 USD.
        const auto &a100 = row(c, "a100-sxm-80gb", 1);
        QCOMPARE(a100.stepTimeBasis, pb::FigureBasis::Modelled);
        QVERIFY(qAbs(a100.stepTimeMs - 1000.0 * 989 / 312) < 1e-3);
        QVERIFY(qAbs(a100.cost.totalCost - 62.37) < 1e-9);

        // MI300X x1: 1000 x 989 / 1307.4 = 756.46 ms; 7.56 h + 0.5 h -> 9 h x 3.19 = 28.71 USD, the
        // cheapest of all eight: recommended.
        const auto &mi300 = row(c, "mi300x-192gb", 1);
        QVERIFY(qAbs(mi300.stepTimeMs - 1000.0 * 989 / 1307.4) < 1e-3);
        QVERIFY(qAbs(mi300.cost.totalCost - 28.71) < 1e-9);
        QVERIFY(mi300.recommended);
        QCOMPARE(recommendedCount(c), 1);
        QCOMPARE(c.recommendedIndex, 6);
        QVERIFY(QString::fromStdString(c.recommendation).contains(QStringLiteral("AMD Instinct MI300X")));
    }

    void deadlineMovesTheRecommendation()
    {
        // Only the MI300X x2 finishes within 5 h: 756.46 / 1.8 ms per step -> 4.20 h + 0.5 h = 4.70 h,
        // billed 5 h x 2 x 3.16 = 31.60 USD.
        pb::RunConfig config = plannedJob();
        config.job.deadlineHours = 5.0;
        const pb::Comparison c = pb::compareConfigurations(config, fourCards(), onDemandOneAndTwo(), h100Pilot());
        QCOMPARE(recommendedCount(c), 1);
        const auto &best = c.rows[static_cast<size_t>(c.recommendedIndex)];
        QCOMPARE(best.cardId, std::string("mi300x-192gb"));
        QCOMPARE(best.gpus, 2);
        QVERIFY(qAbs(best.cost.windowHours - (10.0 * 1000 * 989 / 1307.4 / 1000 / 1.8 + 0.5)) < 1e-6);
        QVERIFY(qAbs(best.cost.totalCost - 31.60) < 1e-9);
        QVERIFY(!row(c, "mi300x-192gb", 1).meetsDeadline);
        QVERIFY(!row(c, "mi300x-192gb", 1).recommended);
    }

    void withoutPilotEverythingIsModelled()
    {
        const pb::Comparison c = pb::compareConfigurations(plannedJob(), fourCards(), pb::ComparisonRequest {}, std::nullopt);
        QCOMPARE(c.rows.size(), size_t(16)); // 4 cards x 1, 2, 4, 8
        for (const auto &r : c.rows) {
            QCOMPARE(r.stepTimeBasis, pb::FigureBasis::Modelled);
            QVERIFY(r.tokensPerSecond > 0);
            QVERIFY(r.cost.costPerMillionTokens > 0);
        }
        QCOMPARE(recommendedCount(c), 1);
        QVERIFY(!c.pilotRunId);
        bool said = false;
        for (const auto &a : c.assumptions)
            said = said || a.find("no pilot") != std::string::npos;
        QVERIFY(said);
    }

    void refusedInput_data()
    {
        QTest::addColumn<int>("gpus");
        QTest::addColumn<QString>("term");
        QTest::addColumn<double>("tokens");
        QTest::addColumn<QString>("where");
        QTest::newRow("3 gpus") << 3 << QString() << 1e9 << QStringLiteral("--gpus");
        QTest::newRow("0 gpus") << 0 << QString() << 1e9 << QStringLiteral("--gpus");
        QTest::newRow("2-week term") << 1 << QStringLiteral("2w") << 1e9 << QStringLiteral("--term");
        QTest::newRow("no tokens") << 1 << QString() << 0.0 << QStringLiteral("job.amount");
    }

    void refusedInput()
    {
        QFETCH(int, gpus);
        QFETCH(QString, term);
        QFETCH(double, tokens);
        QFETCH(QString, where);
        pb::RunConfig config = plannedJob();
        config.job.amount = tokens;
        pb::ComparisonRequest request;
        request.gpuCounts = {gpus};
        request.termId = term.toStdString();
        try {
            pb::compareConfigurations(config, fourCards(), request, std::nullopt);
            QFAIL("expected InvalidInputError");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), where);
        }
    }

    void evidenceFromHistory()
    {
        // A pilot recorded on an H200 (as its environment says), with two validation passes, one
        // checkpoint, a GPU scaling step at 2 and a CPU one at 4 (which must not count), and a
        // restore check of the same config that timed its verify and restore.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString db = dir.filePath(QStringLiteral("h.sqlite"));
        pb::RunConfig config = plannedJob();
        config.validation.everySteps = 1000;
        config.checkpoint.everySteps = 6000;
        const std::string hash = pb::configHash(config);
        const QJsonObject env {{QStringLiteral("device"), QStringLiteral("cuda:0")}, {QStringLiteral("device_name"), QStringLiteral("NVIDIA H200")},
                               {QStringLiteral("device_memory_bytes"), 143771.0 * 1024 * 1024}, {QStringLiteral("compute_capability"), QStringLiteral("9.0")},
                               {QStringLiteral("cuda_runtime"), QStringLiteral("12.4")}, {QStringLiteral("driver_version"), QStringLiteral("570.86.15")}};
        int64_t pilotId = 0, restoreId = 0;
        {
            pb::HistoryWriter writer(db);
            auto start = [&](const char *kind, const char *device, std::optional<int64_t> parent) {
                pb::RunStart s;
                s.kind = QString::fromLatin1(kind);
                s.name = QStringLiteral("h200 pilot");
                s.device = QString::fromLatin1(device);
                s.configJson = pb::toJson(config);
                s.configHash = hash;
                s.environmentJson = env;
                s.parentRunId = parent;
                return writer.beginRun(s);
            };
            pb::PilotSummary fits;
            fits.verdict = pb::Verdict::Fits;
            pilotId = start("pilot", "cuda:0", std::nullopt);
            writer.appendValidation(pilotId, {1000, 2.0, 4, 300});
            writer.appendValidation(pilotId, {2000, 1.9, 4, 500});
            writer.appendCheckpoint(pilotId, {2000, "/ckpt/step-2000", 2000000000, 4000});
            writer.finishRun(pilotId, fits,
                             {{QStringLiteral("step_time_mean_ms"), 500.0}, {QStringLiteral("flops_per_step"), 200e12}, {QStringLiteral("tokens_per_s"), 16384.0},
                              {QStringLiteral("setup_ms"), 60000.0}, {QStringLiteral("environment"), env}});
            const int64_t gpuScale = start("scale", "cuda:0", pilotId);
            writer.finishRun(gpuScale, fits, {{QStringLiteral("gpus"), 2}, {QStringLiteral("scaling_efficiency"), 0.95}});
            const int64_t cpuScale = start("scale", "cpu", pilotId);
            writer.finishRun(cpuScale, fits, {{QStringLiteral("gpus"), 4}, {QStringLiteral("scaling_efficiency"), 0.5}});
            // 1 GB: written in 2 s, verified in 0.5 s (2 GB/s), restored in 0.25 s (4 GB/s).
            restoreId = start("restore-check", "cuda:0", std::nullopt);
            writer.finishRun(restoreId, fits,
                             {{QStringLiteral("checkpoint_bytes"), 1e9}, {QStringLiteral("checkpoint_write_ms"), 2000.0}, {QStringLiteral("verify_ms"), 500.0},
                              {QStringLiteral("restore_ms"), 250.0}});
            QVERIFY(writer.flush());
        }
        const pb::HistoryStore store(db);
        const auto run = pb::newestMatchingPilot(store, hash);
        QVERIFY(run.has_value());
        QCOMPARE(run->id, pilotId);
        const pb::Catalog catalog = fourCards();
        const pb::PilotEvidence e = pb::pilotEvidence(store, *run, catalog);
        QCOMPARE(e.cardId, std::string("h200-sxm-141gb"));
        QCOMPARE(e.stepTimeMs, 500.0);
        QCOMPARE(e.tokensPerStep, 8192.0);          // 16384 tokens/s x 0.5 s
        QCOMPARE(e.validationPassMs, 400.0);        // mean of 300 and 500
        QCOMPARE(e.checkpointWriteBytesPerSecond, 5e8); // 2 GB in 4 s
        QCOMPARE(e.checkpointBytes, int64_t(2000000000));
        QCOMPARE(e.restoreCheckRunId.value_or(0), restoreId);
        QCOMPARE(e.checkpointVerifyBytesPerSecond, 2e9);
        QCOMPARE(e.checkpointRestoreBytesPerSecond, 4e9);
        QCOMPARE(e.setupMs, 60000.0);
        QCOMPARE(e.scalingEfficiencyByGpus.size(), size_t(1));
        QCOMPARE(e.scalingEfficiencyByGpus.at(2), 0.95);

        const pb::Comparison c = pb::compareConfigurations(config, catalog, onDemandOneAndTwo(), e);
        const auto &one = row(c, "h200-sxm-141gb", 1);
        QCOMPARE(one.stepTimeBasis, pb::FigureBasis::Measured);
        QCOMPARE(one.stepTimeMs, 500.0);
        QVERIFY(qAbs(one.cost.jobHours - 5.0) < 1e-9); // 36,000 steps x 0.5 s
        // Measured scaling on the card it ran on: 500 / (2 x 0.95) ms, still measured.
        const auto &two = row(c, "h200-sxm-141gb", 2);
        QCOMPARE(two.stepTimeBasis, pb::FigureBasis::Measured);
        QVERIFY(qAbs(two.stepTimeMs - 500.0 / 1.9) < 1e-9);
        QCOMPARE(row(c, "h100-sxm-80gb", 2).stepTimeBasis, pb::FigureBasis::Modelled);
        // The window adds the measured phases scaled to the job, as rentalWindow works them out:
        // checkpoints of the planned job's size (preset:tiny, 1,502,976 B) at the pilot's rate.
        QCOMPARE(c.checkpointBytes, int64_t(1502976));
        QCOMPARE(c.checkpointWriteBytesPerSecond, 5e8);
        QCOMPARE(c.restoreCheckRunId.value_or(0), restoreId);
        pb::JobSchedule schedule;
        schedule.jobSteps = 36000;
        schedule.validationEverySteps = 1000;
        schedule.checkpointEverySteps = 6000;
        schedule.checkpointBytes = 1502976;
        const pb::WindowEstimate w = pb::rentalWindow({60000, 400, 5e8, 2e9, 4e9}, schedule);
        QCOMPARE(w.validationPasses, int64_t(36));
        QVERIFY(qAbs(w.checkpointWriteMs - 1502976 / 5e8 * 1000.0) < 1e-9);
        const double extra = w.window.startupHours + w.window.validationHours + w.window.checkpointHours + w.window.exportHours;
        QVERIFY(extra > 60.0 / 3600);
        QVERIFY(qAbs(one.cost.windowHours - (5.0 + extra)) < 1e-9);
    }

    // FP8 from measurements: an fp8-rowwise pilot (400 ms) and a bf16-mixed one (500 ms) of the
    // same job on an H200 measure a 1.25x gain. The fp8 comparison is measured on the H200 and
    // elsewhere is bf16-mixed's projection divided by 1.25 (never the datasheets' 2x); an A100
    // cannot run it; the bf16 comparison says what fp8 measured.
    void fp8FromMeasuredGain()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString db = dir.filePath(QStringLiteral("h.sqlite"));
        pb::RunConfig bf16 = plannedJob();
        bf16.train.precision = pb::Precision::Bf16Mixed;
        pb::RunConfig fp8 = bf16;
        fp8.train.precision = pb::Precision::Fp8Rowwise;
        const QJsonObject env {{QStringLiteral("device"), QStringLiteral("cuda:0")}, {QStringLiteral("device_name"), QStringLiteral("NVIDIA H200")},
                               {QStringLiteral("device_memory_bytes"), 143771.0 * 1024 * 1024}, {QStringLiteral("compute_capability"), QStringLiteral("9.0")},
                               {QStringLiteral("cuda_runtime"), QStringLiteral("12.4")}, {QStringLiteral("driver_version"), QStringLiteral("570.86.15")}};
        auto record = [&](const pb::RunConfig &config, double stepMs) {
            pb::HistoryWriter writer(db);
            pb::RunStart s;
            s.kind = QStringLiteral("pilot");
            s.device = QStringLiteral("cuda:0");
            s.configJson = pb::toJson(config);
            s.configHash = pb::configHash(config);
            s.environmentJson = env;
            const int64_t id = writer.beginRun(s);
            pb::PilotSummary fits;
            fits.verdict = pb::Verdict::Fits;
            writer.finishRun(id, fits, {{QStringLiteral("step_time_mean_ms"), stepMs}, {QStringLiteral("flops_per_step"), 100e12},
                                        {QStringLiteral("tokens_per_s"), 8192 / (stepMs / 1000)}, {QStringLiteral("environment"), env}});
            writer.flush();
            return id;
        };
        const pb::Catalog catalog = fourCards();
        const int64_t fp8Run = record(fp8, 400);
        const auto alone = pb::findPilotEvidence(db, fp8, catalog);
        QVERIFY(alone && !alone->fp8Speedup);
        QCOMPARE(alone->precision, std::string("fp8-rowwise"));
        const pb::Comparison unmeasured = pb::compareConfigurations(fp8, catalog, onDemandOneAndTwo(), alone);
        QVERIFY(anyContains(row(unmeasured, "mi300x-192gb", 1).assumptions, "was not measured"));

        const int64_t bf16Run = record(bf16, 500);
        const auto e = pb::findPilotEvidence(db, fp8, catalog);
        QVERIFY(e && e->fp8Speedup);
        QCOMPARE(e->runId, fp8Run);
        QCOMPARE(e->fp8Speedup->bf16RunId, bf16Run);
        QVERIFY(qAbs(e->fp8Speedup->ratio - 1.25) < 1e-12);
        const pb::Comparison c = pb::compareConfigurations(fp8, catalog, onDemandOneAndTwo(), e);
        const pb::Comparison b = pb::compareConfigurations(bf16, catalog, onDemandOneAndTwo(), pb::findPilotEvidence(db, bf16, catalog));
        QCOMPARE(row(c, "h200-sxm-141gb", 1).stepTimeBasis, pb::FigureBasis::Measured);
        QCOMPARE(row(c, "h200-sxm-141gb", 1).stepTimeMs, 400.0);
        for (const char *card : {"h100-sxm-80gb", "mi300x-192gb"}) {
            const auto &r = row(c, card, 1);
            QCOMPARE(r.stepTimeBasis, pb::FigureBasis::Modelled);
            QVERIFY2(qAbs(r.stepTimeMs - row(b, card, 1).stepTimeMs / 1.25) < 1e-9, card);
            QVERIFY(anyContains(r.assumptions, "1.25x over bf16-mixed measured by pilots"));
            // Where fp8 runs, the gain cancels out of a projection from an fp8 pilot: the same
            // figure without it, only the words differ.
            QVERIFY2(qAbs(row(unmeasured, card, 1).stepTimeMs - r.stepTimeMs) < 1e-9, card);
        }
        // Where it cannot run, the card is shown at bf16-mixed's speed: the measured gain puts
        // the fp8 pilot's projection on the bf16 pilot's; unmeasured, it is 1.25x too fast.
        QVERIFY(qAbs(row(c, "a100-sxm-80gb", 1).stepTimeMs - row(b, "a100-sxm-80gb", 1).stepTimeMs) < 1e-9);
        QVERIFY(qAbs(row(unmeasured, "a100-sxm-80gb", 1).stepTimeMs - row(b, "a100-sxm-80gb", 1).stepTimeMs / 1.25) < 1e-9);
        QVERIFY(!row(c, "a100-sxm-80gb", 1).fits);
        QVERIFY(anyContains(row(c, "a100-sxm-80gb", 1).assumptions, "cannot use fp8"));
        QVERIFY(anyContains(b.assumptions, "fp8-rowwise ran this job at 1.25x the tokens/s of bf16-mixed"));
        QCOMPARE(pb::toJson(c).value(QStringLiteral("fp8_speedup")).toObject().value(QStringLiteral("ratio")).toDouble(), 1.25);

        // An fp8 config nobody piloted is modelled at bf16's speed, and says so.
        pb::RunConfig other = fp8;
        other.train.seqLen *= 2;
        const pb::Comparison none = pb::compareConfigurations(other, catalog, onDemandOneAndTwo(), pb::findPilotEvidence(db, other, catalog));
        QVERIFY(!none.pilotRunId);
        QVERIFY(anyContains(none.assumptions, "no pilot of this fp8 config"));
    }

    // One checkpoint of the whole job takes the same time on 1, 2 and 8 cards and with any strategy:
    // every rank on one host writes to the same disk at the rate the pilot measured.
    void checkpointHoursSameOnEveryCardCount()
    {
        pb::RunConfig config = plannedJob();
        config.checkpoint.everySteps = 6000; // 36,000 steps: 6 writes and the final export
        pb::PilotEvidence pilot = h100Pilot();
        pilot.checkpointWriteBytesPerSecond = 1e6; // 1 MB/s, so a tiny checkpoint takes a visible 1.5 s
        pb::ComparisonRequest request = onDemandOneAndTwo();
        request.gpuCounts = {1, 2, 8};
        const pb::Comparison c = pb::compareConfigurations(config, fourCards(), request, pilot);
        // 1,502,976 B / 1e6 B/s = 1.502976 s + upload at 1 GB/s 0.001502976 s = 1.504478976 s, x 7.
        const double checkpointSeconds = 7 * 1.504478976;
        QCOMPARE(c.rows.size(), size_t(12));
        for (const auto &r : c.rows) {
            const double outsideTrainingSeconds = (r.cost.windowHours - r.cost.jobHours) * 3600.0;
            QVERIFY2(qAbs(outsideTrainingSeconds - (1800.0 + checkpointSeconds)) < 1e-6,
                     qPrintable(QStringLiteral("%1 x%2 (%3): %4 s").arg(QString::fromStdString(r.cardId)).arg(r.gpus).arg(QLatin1String(pb::toString(r.strategy))).arg(outsideTrainingSeconds)));
        }
        // A strategy asked for by name shards the state across ranks but still writes it all.
        request.multiGpuStrategy = pb::ParallelStrategy::Fsdp;
        for (const auto &r : pb::compareConfigurations(config, fourCards(), request, pilot).rows)
            QVERIFY(qAbs((r.cost.windowHours - r.cost.jobHours) * 3600.0 - (1800.0 + checkpointSeconds)) < 1e-6);
    }

    // The same measured rate timing planned jobs of different sizes: the checkpoint hours follow the
    // planned model's checkpoint bytes, not the bytes the pilot wrote.
    void checkpointHoursFollowThePlannedModel_data()
    {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("optimizer");
        QTest::addColumn<qint64>("bytes");
        // preset:tiny, 125,248 parameters: fp32 weights and two fp32 AdamW moments, 12 B each.
        QTest::newRow("tiny fp32 adamw") << "tiny" << int(pb::Precision::Fp32) << int(pb::OptimizerKind::AdamW) << qint64(1502976);
        // Pure bf16 halves it: 6 B each; SGD with momentum keeps one fp32 buffer: 8 B each.
        QTest::newRow("tiny bf16 adamw") << "tiny" << int(pb::Precision::Bf16) << int(pb::OptimizerKind::AdamW) << qint64(751488);
        QTest::newRow("tiny fp32 sgd") << "tiny" << int(pb::Precision::Fp32) << int(pb::OptimizerKind::Sgd) << qint64(1001984);
        // Llama 3.2 1B, 1,235,814,400 parameters, bf16-mixed AdamW: fp32 masters and moments, 12 B each.
        QTest::newRow("llama-3.2-1b bf16-mixed adamw") << "llama-3.2-1b" << int(pb::Precision::Bf16Mixed) << int(pb::OptimizerKind::AdamW) << qint64(14829772800);
    }
    void checkpointHoursFollowThePlannedModel()
    {
        QFETCH(QString, preset);
        QFETCH(int, precision);
        QFETCH(int, optimizer);
        QFETCH(qint64, bytes);
        pb::RunConfig config = pb::presetConfig(preset);
        config.train.precision = pb::Precision(precision);
        config.train.optimizer.kind = pb::OptimizerKind(optimizer);
        config.job.unit = pb::JobUnit::Tokens;
        config.job.amount = 8192.0 * 36000; // 36,000 steps of the pilot's 8192 tokens
        config.validation.everySteps = 0;
        config.checkpoint.everySteps = 6000;
        QCOMPARE(pb::checkpointBytesFor(config), bytes);
        pb::PilotEvidence pilot = h100Pilot(); // measured on tiny: the rate carries, its size does not
        pilot.checkpointWriteBytesPerSecond = 0.5e9;
        const pb::Comparison c = pb::compareConfigurations(config, fourCards(), onDemandOneAndTwo(), pilot);
        QCOMPARE(c.checkpointBytes, bytes);
        // 7 checkpoints of bytes / 0.5 GB/s to write and bytes / 1 GB/s to upload: 21 s per GB.
        const double checkpointSeconds = 7 * 3e-9 * static_cast<double>(bytes);
        for (const auto &r : c.rows)
            QVERIFY(qAbs((r.cost.windowHours - r.cost.jobHours) * 3600.0 - 1800.0 - checkpointSeconds) < 1e-9 * (1.0 + checkpointSeconds));
    }

    void viewShowsTheComparison()
    {
        const pb::Comparison c = pb::compareConfigurations(plannedJob(), fourCards(), onDemandOneAndTwo(), h100Pilot());
        pb::ui::CompareView view;
        view.resize(1280, 640);
        view.setComparison(c);
        auto *table = view.findChild<QTableWidget *>();
        QVERIFY(table);
        QCOMPARE(table->rowCount(), 8);
        const int best = c.recommendedIndex;
        QCOMPARE(table->item(best, 0)->text(), QStringLiteral("mi300x-192gb"));
        QVERIFY(table->item(best, 0)->font().bold());
        QVERIFY(!table->item(0, 0)->font().bold());
        QCOMPARE(table->item(best, 0)->background().color(), QColor(216, 240, 216));
        bool shown = false;
        for (auto *label : view.findChildren<QLabel *>())
            shown = shown || label->text() == QString::fromStdString(c.recommendation);
        QVERIFY(shown);
        // One tile per catalog card, the recommended card's marked.
        int tiles = 0, marked = 0;
        for (auto *label : view.findChildren<pb::ui::ElidedLinesLabel *>(QStringLiteral("tileVerdict"))) {
            tiles += label->fullText().startsWith(QStringLiteral("best: x")) || label->fullText().startsWith(QStringLiteral("does not fit")) ? 1 : 0;
            marked += label->fullText().startsWith(QStringLiteral("RECOMMENDED: x")) ? 1 : 0;
        }
        QCOMPARE(tiles + marked, 4);
        QCOMPARE(marked, 1);
        QVERIFY(showForLooking(view, QStringLiteral("compare-view.png")));
    }

    // The tiles are the chart's legend: each card with points has a swatch of its series' colour and
    // the legend lists no card, only the deadline (ten cards do not fit a legend column at the chart's
    // height); a compared card without a tile (not in the view's catalog) brings the cards back.
    void tilesAreTheChartLegend()
    {
        pb::Comparison c = pb::compareConfigurations(plannedJob(), fourCards(), onDemandOneAndTwo(), h100Pilot());
        c.deadlineHours = 12.0;
        pb::ui::CompareView view;
        view.resize(1280, 640);
        view.show(); // a legend marker reads as visible only once its chart is
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.setComparison(c);
        QCoreApplication::processEvents();
        QChart *chart = view.findChild<pb::ui::CostHoursChart *>()->chart();
        int swatches = 0;
        for (const QFrame *tile : view.findChildren<QFrame *>(QStringLiteral("cardTile"))) {
            const QString id = tile->property("cardId").toString();
            QScatterSeries *series = nullptr;
            for (QAbstractSeries *s : chart->series())
                if (s->objectName() == QStringLiteral("card:") + id)
                    series = qobject_cast<QScatterSeries *>(s);
            QVERIFY2(series, qPrintable(id));
            const auto *swatch = tile->findChild<QLabel *>(QStringLiteral("tileSwatch"));
            QCOMPARE(swatch != nullptr, series->count() > 0);
            if (swatch) {
                QVERIFY2(swatch->styleSheet().contains(series->color().name()), qPrintable(swatch->styleSheet()));
                ++swatches;
            }
            for (const QLegendMarker *marker : chart->legend()->markers(series))
                QVERIFY(!marker->isVisible());
        }
        QVERIFY(swatches >= 2);
        QVERIFY(chart->legend()->isVisible()); // the deadline's entry
        int deadlines = 0;
        for (QAbstractSeries *s : chart->series())
            if (s->objectName() == QStringLiteral("deadline")) {
                QVERIFY(chart->legend()->markers(s).first()->isVisible());
                ++deadlines;
            }
        QCOMPARE(deadlines, 1);

        c.deadlineHours.reset();
        view.setComparison(c);
        QCoreApplication::processEvents();
        QVERIFY(!chart->legend()->isVisible()); // nothing left to list: the plot takes the column

        for (auto &row : c.rows)
            if (row.cardId == "a100-sxm-80gb")
                row.cardId = "custom-card";
        view.setComparison(c);
        QCoreApplication::processEvents();
        QVERIFY(chart->legend()->isVisible());
        int shown = 0;
        for (QAbstractSeries *s : chart->series())
            for (const QLegendMarker *marker : chart->legend()->markers(s))
                shown += s->objectName().startsWith(QLatin1String("card:")) && marker->isVisible() ? 1 : 0;
        QCOMPARE(shown, 4);
    }

    // The bucket size reaches the ZeRO rows: shown beside auto, ZeRO-1 and ZeRO-2 only; at DeepSpeed's
    // 954 MiB every multi-GPU ZeRO-2 row of an 8B model is at least two buckets' difference heavier per
    // GPU (the exact figure: tst_cli_compare against `estimate`).
    void bucketSizeReachesTheZeroRows()
    {
        pb::ui::CompareView view;
        QSignalSpy spy(&view, &pb::ui::CompareView::comparisonChanged);
        view.setHistoryPath(QString());
        pb::RunConfig c = pb::presetConfig(QStringLiteral("llama-3.1-8b"));
        c.train.recompute = true;
        c.train.microBatch = 1;
        view.setConfig(c);
        QVERIFY(spy.wait(30000));
        auto *strategy = view.findChild<QComboBox *>(QStringLiteral("strategySelector"));
        auto *bucket = view.findChild<QSpinBox *>(QStringLiteral("bucketSelector"));
        QVERIFY(strategy && bucket);
        QCOMPARE(bucket->value(), 25);
        QVERIFY(bucket->isVisibleTo(&view)); // auto may pick ZeRO-1 or ZeRO-2
        strategy->setCurrentIndex(strategy->findText(QStringLiteral("ddp")));
        QVERIFY(spy.wait(30000));
        QVERIFY(!bucket->isVisibleTo(&view));
        strategy->setCurrentIndex(strategy->findText(QStringLiteral("zero2")));
        QVERIFY(spy.wait(30000));
        QVERIFY(bucket->isVisibleTo(&view));
        const pb::Comparison small = *view.comparison();
        bucket->setValue(954);
        QVERIFY(spy.wait(30000));
        const pb::Comparison large = *view.comparison();
        QCOMPARE(large.rows.size(), small.rows.size());
        int multi = 0;
        for (size_t i = 0; i < small.rows.size(); ++i) {
            if (small.rows[i].gpus == 1)
                continue;
            ++multi;
            QCOMPARE(large.rows[i].strategy, pb::ParallelStrategy::Zero2);
            // Two buckets' difference in tensors, plus the allocator's share of them.
            QVERIFY(large.rows[i].peakBytes - small.rows[i].peakBytes >= int64_t {2} * (954 - 25) * 1024 * 1024);
        }
        QVERIFY(multi > 0);
        view.resize(1280, 640);
        QVERIFY(showForLooking(view, QStringLiteral("compare-view-zero2-buckets.png")));
    }

    void viewComputesInTheBackground()
    {
        pb::ui::CompareView view;
        QSignalSpy spy(&view, &pb::ui::CompareView::comparisonChanged);
        view.setHistoryPath(QString()); // no history: modelled step times
        view.setConfig(plannedJob());
        QVERIFY(view.busy());
        QVERIFY(spy.wait(30000));
        QVERIFY(!view.busy());
        QVERIFY2(view.comparison().has_value(), qPrintable(view.errorText()));
        QCOMPARE(view.comparison()->rows.size(), pb::builtInCatalog().cards.size() * 4); // every card x 1, 2, 4, 8
        QCOMPARE(view.selectedGpus(), 0);
        QCOMPARE(view.selectedTerm(), std::string());
        // A narrower window (and PB_SCREENSHOT_DIR's picture of it): every catalog card's tile keeps
        // its lines whole in height, one under another, inside the tile; a line too wide for the
        // tile is elided and whole in the tooltip.
        view.resize(960, 560);
        QVERIFY(showForLooking(view, QStringLiteral("compare-view-960.png")));
        const auto tiles = view.findChildren<QFrame *>(QStringLiteral("cardTile"));
        // The window keeps the size asked for, and the tiles stand above the table, not under it.
        QCOMPARE(view.size(), QSize(960, 560));
        QVERIFY(tiles.first()->parentWidget()->geometry().bottom() < view.findChild<QTableWidget *>()->geometry().top());
        QCOMPARE(tiles.size(), static_cast<qsizetype>(pb::builtInCatalog().cards.size()));
        int elided = 0;
        for (const QFrame *tile : tiles) {
            const auto labels = tile->findChildren<pb::ui::ElidedLinesLabel *>();
            QCOMPARE(labels.size(), 3); // name, specifications, verdict
            int bottom = 0;
            for (const auto *label : labels) {
                const int lines = static_cast<int>(label->fullText().count(QLatin1Char('\n'))) + 1;
                QVERIFY2(label->height() >= lines * label->fontMetrics().height(), qPrintable(label->fullText()));
                QVERIFY(label->geometry().top() >= bottom);
                QVERIFY(tile->contentsRect().contains(label->geometry()));
                bottom = label->geometry().bottom();
                for (const QString &line : label->text().split(QLatin1Char('\n')))
                    QVERIFY(label->fontMetrics().horizontalAdvance(line) <= label->contentsRect().width());
                elided += label->text() != label->fullText() ? 1 : 0;
                QVERIFY(label->toolTip().contains(label->fullText().section(QLatin1Char('\n'), 0, 0)));
            }
        }
        QVERIFY(elided > 0); // at 960 px some line is too wide for a fifth of it
        int marked = 0; // the recommended card's mark is never what gets elided
        for (const auto *label : view.findChildren<pb::ui::ElidedLinesLabel *>(QStringLiteral("tileVerdict")))
            marked += label->text().startsWith(QStringLiteral("RECOMMENDED: x")) ? 1 : 0;
        QCOMPARE(marked, 1);
    }
};

QTEST_MAIN(TestCompare)
#include "tst_compare.moc"
