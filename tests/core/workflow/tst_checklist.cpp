// The checklist's rules on a hand-built history: a stage passes on its best evidence (a later
// cancelled or failed run is listed, not counted against it), the evidence names its numerical
// format, and a recorded decision goes stale when the catalog it was made on changes.
#include "catalog/Catalog.h"
#include "catalog/CatalogJson.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "workflow/Checklist.h"
#include "workflow/DecisionRun.h"

#include <QTemporaryDir>
#include <QtTest>

namespace {

pb::RunConfig tinyJob()
{
    pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
    c.job.unit = pb::JobUnit::Tokens;
    c.job.amount = 1e6;
    return c;
}

int64_t recordRun(const QString &db, const pb::RunConfig &config, const char *kind, pb::Verdict verdict, const QJsonObject &summary)
{
    pb::HistoryWriter writer(db);
    pb::RunStart s;
    s.kind = QString::fromLatin1(kind);
    s.model = QStringLiteral("tiny");
    s.device = QStringLiteral("cpu");
    s.configJson = pb::toJson(config);
    s.configHash = pb::configHash(config);
    const int64_t id = writer.beginRun(s);
    pb::PilotSummary sum;
    sum.verdict = verdict;
    writer.finishRun(id, sum, summary);
    writer.flush();
    return id;
}

const QJsonObject kMeasured {{QStringLiteral("measured_steps"), 3.0}, {QStringLiteral("step_time_mean_ms"), 50.0}, {QStringLiteral("step_time_p50_ms"), 50.0},
                             {QStringLiteral("flops_per_step"), 1e9}, {QStringLiteral("tokens_per_s"), 5000.0}};

} // namespace

class TestChecklist : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void laterCancelledRunKeepsThePass()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("h.sqlite"));
        pb::RunConfig config = tinyJob();
        config.train.precision = pb::Precision::Bf16Mixed;
        const int64_t good = recordRun(db, config, "pilot", pb::Verdict::Fits, kMeasured);
        const int64_t cancelled = recordRun(db, config, "pilot", pb::Verdict::Cancelled, {});
        const pb::HistoryStore store(db);
        pb::StageStatus s = pb::evaluateStage(store, 0, QStringLiteral("tiny"), pb::configHash(config));
        QCOMPARE(s.state, pb::StageState::Passed);
        QCOMPARE(s.runId, good);
        QVERIFY2(s.evidence.contains(QStringLiteral("(pilot, bf16-mixed)")), qPrintable(s.evidence));
        QVERIFY2(s.evidence.contains(QStringLiteral("Later, not passing and not replacing it: run %1 (verdict cancelled)").arg(cancelled)), qPrintable(s.evidence));

        // Only failures: the newest is the evidence, and the stage fails.
        pb::RunConfig other = config;
        other.train.seqLen = 32;
        recordRun(db, other, "pilot", pb::Verdict::DoesNotFit, {});
        const int64_t noSteps = recordRun(db, other, "pilot", pb::Verdict::Fits, {});
        s = pb::evaluateStage(store, 0, QStringLiteral("tiny"), pb::configHash(other));
        QCOMPARE(s.state, pb::StageState::Failed);
        QCOMPARE(s.runId, noSteps);
        QVERIFY2(s.evidence.contains(QStringLiteral("measured no step")) && s.evidence.contains(QStringLiteral("2 tried")), qPrintable(s.evidence));
    }

    void decisionStaleWhenItsCatalogChanges()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("h.sqlite"));
        const pb::RunConfig config = tinyJob();
        recordRun(db, config, "pilot", pb::Verdict::Fits, kMeasured);
        const pb::Catalog catalog = pb::builtInCatalog();
        const pb::Comparison c = pb::decide(config, catalog, pb::ComparisonRequest {}, db);
        QVERIFY(!c.catalogRevision.empty());
        const int64_t first = pb::recordDecision(db, config, c);
        {
            const pb::HistoryStore store(db);
            QCOMPARE(pb::evaluateStage(store, 3, QStringLiteral("tiny"), pb::configHash(config), &catalog).state, pb::StageState::Passed);
            QCOMPARE(pb::evaluateStage(store, 3, QStringLiteral("tiny"), pb::configHash(config)).state, pb::StageState::Passed); // no catalog: not checked
            pb::Catalog cheaper = catalog;
            cheaper.cards[1].onDemand.perGpuHourByGpus[1] = 0.5;
            QVERIFY(pb::catalogRevision(cheaper) != pb::catalogRevision(catalog));
            const pb::StageStatus s = pb::evaluateStage(store, 3, QStringLiteral("tiny"), pb::configHash(config), &cheaper);
            QCOMPARE(s.state, pb::StageState::Stale);
            QCOMPARE(s.runId, first);
            QVERIFY2(s.evidence.startsWith(QStringLiteral("Out of date: the catalog changed since it was made")), qPrintable(s.evidence));
            QCOMPARE(QString::fromLatin1(pb::toString(s.state)), QStringLiteral("stale"));
        }
        const int64_t second = pb::recordDecision(db, config, c);
        const pb::HistoryStore store(db);
        QVERIFY(store.run(first).tags.contains(QStringLiteral("superseded")));
        QCOMPARE(pb::currentDecision(store, pb::configHash(config))->id, second);
        QCOMPARE(store.run(second).summary.value(QStringLiteral("supersedes")).toArray().at(0).toInt(), static_cast<int>(first));
        QCOMPARE(pb::evaluateStage(store, 3, QStringLiteral("tiny"), pb::configHash(config), &catalog).runId, second);
    }
};

QTEST_GUILESS_MAIN(TestChecklist)
#include "tst_checklist.moc"
