#include "history/HistorySchema.h"

#include "result/PilotTypes.h"
#include "history/HistoryDatabase.h"
#include "history/SampleChunk.h"

#include <QStringList>
#include <QUuid>

namespace pb::history {
namespace {

// Version 1 (the first release): runs with their config and summary, one row per sample, phases,
// validation and checkpoint writes. Kept verbatim: tests/data/history/v1.sqlite was made from it.
void createV1(const Connection &c)
{
    c.exec(QStringLiteral(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, verdict TEXT NOT NULL DEFAULT '',"
        " started_at TEXT NOT NULL, finished_at TEXT, name TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '',"
        " device TEXT NOT NULL DEFAULT '', card TEXT NOT NULL DEFAULT '', config_json TEXT NOT NULL DEFAULT '{}',"
        " config_hash TEXT NOT NULL DEFAULT '', environment_json TEXT NOT NULL DEFAULT '{}', summary_json TEXT NOT NULL DEFAULT '{}')"));
    c.exec(QStringLiteral(
        "CREATE TABLE samples (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,"
        " phase TEXT NOT NULL, step_time_ms REAL, forward_ms REAL, backward_ms REAL, optimizer_ms REAL, data_wait_ms REAL,"
        " allocated_bytes INTEGER, reserved_bytes INTEGER, peak_allocated_bytes INTEGER, device_used_bytes INTEGER,"
        " tokens INTEGER, loss REAL, lr REAL, grad_norm REAL, PRIMARY KEY (run_id, step)) WITHOUT ROWID"));
    c.exec(QStringLiteral(
        "CREATE TABLE phase_marks (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, phase TEXT NOT NULL,"
        " step INTEGER NOT NULL, start_ms REAL, duration_ms REAL, peak_allocated_bytes INTEGER, peak_device_used_bytes INTEGER)"));
    c.exec(QStringLiteral(
        "CREATE TABLE validations (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,"
        " loss REAL, batches INTEGER, duration_ms REAL)"));
    c.exec(QStringLiteral(
        "CREATE TABLE checkpoints (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,"
        " path TEXT NOT NULL, bytes INTEGER, write_ms REAL)"));
    c.exec(QStringLiteral("CREATE INDEX runs_started ON runs(started_at)"));
    c.exec(QStringLiteral("CREATE INDEX phase_marks_run ON phase_marks(run_id)"));
    c.exec(QStringLiteral("CREATE INDEX validations_run ON validations(run_id)"));
    c.exec(QStringLiteral("CREATE INDEX checkpoints_run ON checkpoints(run_id)"));
}

Phase phaseFromText(const QString &text)
{
    for (Phase p : {Phase::Setup, Phase::Warmup, Phase::Train, Phase::Validation, Phase::Checkpoint, Phase::Done})
        if (text == QLatin1String(toString(p)))
            return p;
    return Phase::Train;
}

// v1 rows -> v2 column chunks, run by run in step order.
void convertSamples(const Connection &c)
{
    QSqlQuery rows = c.exec(QStringLiteral(
        "SELECT run_id, step, phase, step_time_ms, forward_ms, backward_ms, optimizer_ms, data_wait_ms, allocated_bytes,"
        " reserved_bytes, peak_allocated_bytes, device_used_bytes, tokens, loss, lr, grad_norm FROM samples ORDER BY run_id, step"));
    QSqlQuery insert = c.prepare(QStringLiteral(
        "INSERT INTO sample_chunks (run_id, seq, first_step, last_step, sample_count, data) VALUES (?, ?, ?, ?, ?, ?)"));
    std::vector<StepSample> pending;
    int64_t runId = -1;
    int64_t seq = 0;
    auto writeChunk = [&]() {
        if (pending.empty())
            return;
        insert.bindValue(0, qlonglong(runId));
        insert.bindValue(1, qlonglong(seq++));
        insert.bindValue(2, qlonglong(pending.front().step));
        insert.bindValue(3, qlonglong(pending.back().step));
        insert.bindValue(4, qlonglong(pending.size()));
        insert.bindValue(5, encodeChunk(pending.data(), pending.size()));
        c.execPrepared(insert);
        pending.clear();
    };
    while (rows.next()) {
        const int64_t id = rows.value(0).toLongLong();
        if (id != runId || pending.size() == kChunkSamples) {
            writeChunk();
            if (id != runId)
                seq = 0;
            runId = id;
        }
        StepSample s;
        s.step = rows.value(1).toLongLong();
        s.phase = phaseFromText(rows.value(2).toString());
        s.stepTimeMs = rows.value(3).toDouble();
        s.forwardMs = rows.value(4).toDouble();
        s.backwardMs = rows.value(5).toDouble();
        s.optimizerMs = rows.value(6).toDouble();
        s.dataWaitMs = rows.value(7).toDouble();
        s.allocatedBytes = rows.value(8).toLongLong();
        s.reservedBytes = rows.value(9).toLongLong();
        s.peakAllocatedBytes = rows.value(10).toLongLong();
        s.deviceUsedBytes = rows.value(11).toLongLong();
        s.tokens = rows.value(12).toLongLong();
        s.loss = rows.value(13).toDouble();
        s.learningRate = rows.value(14).toDouble();
        s.gradNorm = rows.value(15).toDouble();
        pending.push_back(s);
    }
    writeChunk();
}

// Version 2: samples as column chunks (a million load in well under a second), run annotations (tags,
// notes, pinned baseline), links between runs (plan, parent), a uuid and origin for imports, and the
// tables of the other kinds of evidence: estimates, calibration residuals, restore results, catalog
// snapshots and pilot plans.
void migrateToV2(const Connection &c)
{
    const QStringList runColumns {
        QStringLiteral("tags TEXT NOT NULL DEFAULT '[]'"), QStringLiteral("notes TEXT NOT NULL DEFAULT ''"),
        QStringLiteral("pinned_baseline INTEGER NOT NULL DEFAULT 0"), QStringLiteral("plan_id INTEGER"),
        QStringLiteral("parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL"), QStringLiteral("run_uuid TEXT"),
        QStringLiteral("origin_host TEXT NOT NULL DEFAULT ''"), QStringLiteral("origin_run_id INTEGER")};
    for (const QString &column : runColumns)
        c.exec(QStringLiteral("ALTER TABLE runs ADD COLUMN ") + column);
    QSqlQuery ids = c.exec(QStringLiteral("SELECT id FROM runs WHERE run_uuid IS NULL"));
    QSqlQuery setUuid = c.prepare(QStringLiteral("UPDATE runs SET run_uuid = ? WHERE id = ?"));
    while (ids.next()) {
        setUuid.bindValue(0, QUuid::createUuid().toString(QUuid::WithoutBraces));
        setUuid.bindValue(1, ids.value(0));
        c.execPrepared(setUuid);
    }
    c.exec(QStringLiteral("CREATE UNIQUE INDEX runs_uuid ON runs(run_uuid)"));
    c.exec(QStringLiteral("CREATE INDEX runs_model ON runs(model)"));
    c.exec(QStringLiteral(
        "CREATE TABLE sample_chunks (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL, first_step INTEGER NOT NULL, last_step INTEGER NOT NULL, sample_count INTEGER NOT NULL,"
        " data BLOB NOT NULL, UNIQUE (run_id, seq))"));
    convertSamples(c);
    c.exec(QStringLiteral("DROP TABLE samples"));
    c.exec(QStringLiteral(
        "CREATE TABLE estimates (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,"
        " created_at TEXT NOT NULL, config_hash TEXT NOT NULL, card TEXT NOT NULL, gpus INTEGER NOT NULL, strategy TEXT NOT NULL,"
        " breakdown_json TEXT NOT NULL, total_bytes INTEGER NOT NULL)"));
    c.exec(QStringLiteral(
        "CREATE TABLE calibration_residuals (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,"
        " created_at TEXT NOT NULL, backend TEXT NOT NULL, torch_version TEXT NOT NULL, device TEXT NOT NULL,"
        " config_hash TEXT NOT NULL, predicted_peak_bytes INTEGER NOT NULL, measured_peak_bytes INTEGER NOT NULL)"));
    c.exec(QStringLiteral(
        "CREATE TABLE restore_results (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,"
        " created_at TEXT NOT NULL, passed INTEGER NOT NULL, result_json TEXT NOT NULL)"));
    c.exec(QStringLiteral(
        "CREATE TABLE catalog_snapshots (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
        " taken_at TEXT NOT NULL, catalog_date TEXT NOT NULL, catalog_json TEXT NOT NULL)"));
    c.exec(QStringLiteral("CREATE TABLE pilot_plans (id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL)"));
    c.exec(QStringLiteral(
        "CREATE TABLE plan_stages (plan_id INTEGER NOT NULL REFERENCES pilot_plans(id) ON DELETE CASCADE, stage TEXT NOT NULL,"
        " run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL, PRIMARY KEY (plan_id, stage))"));
    for (const char *table : {"estimates", "calibration_residuals", "restore_results"})
        c.exec(QStringLiteral("CREATE INDEX %1_run ON %1(run_id)").arg(QLatin1String(table)));
}

// Version 3: each calibration residual keeps the framework bytes its pilot measured (device used
// beyond the allocator's reserve), so the estimator's framework figure is measured, not guessed.
// NULL where unknown, which is what every residual stored before this version is.
void migrateToV3(const Connection &c)
{
    c.exec(QStringLiteral("ALTER TABLE calibration_residuals ADD COLUMN framework_bytes INTEGER"));
}

// Version 4: a run records the process and host that write it, so a run left "running" by a
// process that died can be told from one still going (it becomes "interrupted" when the history
// is opened). The tables that no product code wrote (estimates, restore results, catalog snapshots,
// pilot plans and their stages) are dropped: restore proofs and decisions are runs with summaries.
void migrateToV4(const Connection &c)
{
    c.exec(QStringLiteral("ALTER TABLE runs ADD COLUMN pid INTEGER"));
    c.exec(QStringLiteral("ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT ''"));
    for (const char *table : {"plan_stages", "pilot_plans", "catalog_snapshots", "restore_results", "estimates"})
        c.exec(QStringLiteral("DROP TABLE IF EXISTS %1").arg(QLatin1String(table)));
}

} // namespace

void migrateSchema(const Connection &connection, int fromVersion)
{
    if (fromVersion < 1)
        createV1(connection);
    if (fromVersion < 2)
        migrateToV2(connection);
    if (fromVersion < 3)
        migrateToV3(connection);
    if (fromVersion < 4)
        migrateToV4(connection);
}

} // namespace pb::history
