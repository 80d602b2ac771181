#include "history/HistoryEvidence.h"

#include "history/HistoryDatabase.h"
#include "history/HistoryJson.h"
#include "history/HistoryStore.h"
#include "util/Errors.h"

namespace pb {
namespace {

QVariant optionalId(const std::optional<int64_t> &id) { return id ? QVariant(qlonglong(*id)) : QVariant(); }
std::optional<int64_t> readId(const QVariant &v) { return v.isNull() ? std::nullopt : std::optional<int64_t>(v.toLongLong()); }
QString nowOr(const QDateTime &time) { return history::isoUtc(time.isValid() ? time : QDateTime::currentDateTimeUtc()); }
int64_t lastId(const history::Connection &c) { return c.scalar(QStringLiteral("SELECT last_insert_rowid()")).toLongLong(); }

void checkRun(const HistoryStore &store, const std::optional<int64_t> &runId)
{
    if (runId)
        store.run(*runId);
}

} // namespace

int64_t addEstimate(HistoryStore &store, const EstimateRecord &e)
{
    checkRun(store, e.runId);
    const auto &c = store.connection();
    c.exec(QStringLiteral("INSERT INTO estimates (run_id, created_at, config_hash, card, gpus, strategy, breakdown_json, total_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
           {optionalId(e.runId), nowOr(e.createdAt), history::sqlText(QString::fromStdString(e.configHash)), history::sqlText(e.card), e.gpus,
            history::sqlText(e.strategy), history::compactJson(e.breakdown), qlonglong(e.totalBytes)});
    return lastId(c);
}

std::vector<EstimateRecord> estimates(const HistoryStore &store, const std::string &configHash)
{
    QSqlQuery q = store.connection().exec(QStringLiteral(
        "SELECT id, run_id, created_at, config_hash, card, gpus, strategy, breakdown_json, total_bytes FROM estimates"
        " WHERE ? = '' OR config_hash = ? ORDER BY created_at DESC, id DESC"),
        {history::sqlText(QString::fromStdString(configHash)), history::sqlText(QString::fromStdString(configHash))});
    std::vector<EstimateRecord> out;
    while (q.next())
        out.push_back({q.value(0).toLongLong(), readId(q.value(1)), history::parseIsoUtc(q.value(2).toString()), q.value(3).toString().toStdString(),
                       q.value(4).toString(), q.value(5).toInt(), q.value(6).toString(), history::parseJsonObject(q.value(7).toString()), q.value(8).toLongLong()});
    return out;
}

int64_t addCalibrationResidual(HistoryStore &store, const CalibrationRecord &r)
{
    checkRun(store, r.runId);
    history::insertCalibrationRecord(store.connection(), r);
    return lastId(store.connection());
}

std::vector<CalibrationRecord> calibrationResiduals(const HistoryStore &store, const QString &backend, const QString &device)
{
    QSqlQuery q = store.connection().exec(QStringLiteral(
        "SELECT id, run_id, created_at, backend, torch_version, device, config_hash, predicted_peak_bytes, measured_peak_bytes, framework_bytes"
        " FROM calibration_residuals WHERE (? = '' OR backend = ?) AND (? = '' OR device = ?) ORDER BY created_at, id"),
        {history::sqlText(backend), history::sqlText(backend), history::sqlText(device), history::sqlText(device)});
    std::vector<CalibrationRecord> out;
    while (q.next())
        out.push_back({q.value(0).toLongLong(), readId(q.value(1)), history::parseIsoUtc(q.value(2).toString()), q.value(3).toString(),
                       q.value(4).toString(), q.value(5).toString(), q.value(6).toString().toStdString(), q.value(7).toLongLong(),
                       q.value(8).toLongLong(), readId(q.value(9))});
    return out;
}

int64_t addRestoreResult(HistoryStore &store, const RestoreRecord &r)
{
    checkRun(store, r.runId);
    const auto &c = store.connection();
    c.exec(QStringLiteral("INSERT INTO restore_results (run_id, created_at, passed, result_json) VALUES (?, ?, ?, ?)"),
           {optionalId(r.runId), nowOr(r.createdAt), r.passed ? 1 : 0, history::compactJson(r.result)});
    return lastId(c);
}

std::vector<RestoreRecord> restoreResults(const HistoryStore &store, int64_t runId)
{
    QSqlQuery q = store.connection().exec(QStringLiteral("SELECT id, run_id, created_at, passed, result_json FROM restore_results WHERE run_id = ? ORDER BY id"), {qlonglong(runId)});
    std::vector<RestoreRecord> out;
    while (q.next())
        out.push_back({q.value(0).toLongLong(), readId(q.value(1)), history::parseIsoUtc(q.value(2).toString()), q.value(3).toInt() != 0,
                       history::parseJsonObject(q.value(4).toString())});
    return out;
}

int64_t addCatalogSnapshot(HistoryStore &store, const CatalogSnapshot &s)
{
    checkRun(store, s.runId);
    const auto &c = store.connection();
    c.exec(QStringLiteral("INSERT INTO catalog_snapshots (run_id, taken_at, catalog_date, catalog_json) VALUES (?, ?, ?, ?)"),
           {optionalId(s.runId), nowOr(s.takenAt), history::sqlText(s.catalogDate), history::compactJson(s.catalog)});
    return lastId(c);
}

CatalogSnapshot catalogSnapshot(const HistoryStore &store, int64_t id)
{
    QSqlQuery q = store.connection().exec(QStringLiteral("SELECT id, run_id, taken_at, catalog_date, catalog_json FROM catalog_snapshots WHERE id = ?"), {qlonglong(id)});
    if (!q.next())
        throw InvalidInputError("catalog snapshot " + std::to_string(id), "no such snapshot in " + store.path().toStdString());
    return {q.value(0).toLongLong(), readId(q.value(1)), history::parseIsoUtc(q.value(2).toString()), q.value(3).toString(), history::parseJsonObject(q.value(4).toString())};
}

int64_t createPlan(HistoryStore &store, const QString &name, const QStringList &stages)
{
    if (name.trimmed().isEmpty())
        throw InvalidInputError("plan.name", "a pilot plan needs a name");
    const auto &c = store.connection();
    c.exec(QStringLiteral("BEGIN IMMEDIATE"));
    try {
        c.exec(QStringLiteral("INSERT INTO pilot_plans (name, created_at) VALUES (?, ?)"), {name, nowOr({})});
        const int64_t id = lastId(c);
        for (const QString &stage : stages)
            c.exec(QStringLiteral("INSERT INTO plan_stages (plan_id, stage) VALUES (?, ?)"), {qlonglong(id), history::sqlText(stage)});
        c.exec(QStringLiteral("COMMIT"));
        return id;
    } catch (...) {
        QSqlQuery(c.db()).exec(QStringLiteral("ROLLBACK"));
        throw;
    }
}

void setPlanStageRun(HistoryStore &store, int64_t planId, const QString &stage, int64_t runId)
{
    const PilotPlan p = plan(store, planId);
    if (!p.stageRuns.count(stage))
        throw InvalidInputError("plan " + std::to_string(planId), "has no stage '" + stage.toStdString() + "'");
    store.run(runId);
    const auto &c = store.connection();
    c.exec(QStringLiteral("UPDATE plan_stages SET run_id = ? WHERE plan_id = ? AND stage = ?"), {qlonglong(runId), qlonglong(planId), stage});
    c.exec(QStringLiteral("UPDATE runs SET plan_id = ? WHERE id = ?"), {qlonglong(planId), qlonglong(runId)});
}

PilotPlan plan(const HistoryStore &store, int64_t planId)
{
    const auto &c = store.connection();
    QSqlQuery q = c.exec(QStringLiteral("SELECT id, name, created_at FROM pilot_plans WHERE id = ?"), {qlonglong(planId)});
    if (!q.next())
        throw InvalidInputError("plan " + std::to_string(planId), "no such pilot plan in " + store.path().toStdString());
    PilotPlan p {q.value(0).toLongLong(), q.value(1).toString(), history::parseIsoUtc(q.value(2).toString()), {}};
    QSqlQuery stages = c.exec(QStringLiteral("SELECT stage, run_id FROM plan_stages WHERE plan_id = ?"), {qlonglong(planId)});
    while (stages.next())
        p.stageRuns[stages.value(0).toString()] = readId(stages.value(1));
    return p;
}

namespace history {

void insertCalibrationRecord(const Connection &c, const CalibrationRecord &r)
{
    c.exec(QStringLiteral("INSERT INTO calibration_residuals (run_id, created_at, backend, torch_version, device, config_hash, predicted_peak_bytes,"
                          " measured_peak_bytes, framework_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
           {optionalId(r.runId), nowOr(r.createdAt), sqlText(r.backend), sqlText(r.torchVersion), sqlText(r.device),
            sqlText(QString::fromStdString(r.configHash)), qlonglong(r.predictedPeakBytes), qlonglong(r.measuredPeakBytes), optionalId(r.frameworkBytes)});
}

} // namespace history
} // namespace pb
