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
