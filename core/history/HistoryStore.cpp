#include "history/HistoryStore.h"

#include "history/ConfigDiff.h"
#include "history/HistoryDatabase.h"
#include "history/HistoryJson.h"
#include "history/HistorySchema.h"
#include "history/SampleChunk.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <limits>

namespace pb {
namespace {

const QString kRunColumns = QStringLiteral(
    "r.id, r.run_uuid, r.kind, r.status, r.verdict, r.started_at, r.finished_at, r.name, r.model, r.device, r.card,"
    " r.config_json, r.config_hash, r.environment_json, r.summary_json, r.tags, r.notes, r.pinned_baseline, r.plan_id,"
    " r.parent_run_id, r.origin_host, r.origin_run_id,"
    " (SELECT COALESCE(SUM(sample_count), 0) FROM sample_chunks c WHERE c.run_id = r.id)");

// SQLite stores a NaN as NULL: a figure the run did not report (a watched job's validation without
// a loss) reads back as NaN, never as 0.
double figure(const QVariant &v) { return v.isNull() ? std::numeric_limits<double>::quiet_NaN() : v.toDouble(); }

std::optional<int64_t> optionalId(const QVariant &v)
{
    return v.isNull() ? std::nullopt : std::optional<int64_t>(v.toLongLong());
}

RunRecord readRun(const QSqlQuery &q)
{
    RunRecord r;
    r.id = q.value(0).toLongLong();
    r.uuid = q.value(1).toString();
    r.kind = q.value(2).toString();
    r.status = q.value(3).toString();
    r.verdict = q.value(4).toString();
    r.startedAt = history::parseIsoUtc(q.value(5).toString());
    r.finishedAt = history::parseIsoUtc(q.value(6).toString());
    r.name = q.value(7).toString();
    r.model = q.value(8).toString();
    r.device = q.value(9).toString();
    r.card = q.value(10).toString();
    r.config = history::parseJsonObject(q.value(11).toString());
    r.configHash = q.value(12).toString().toStdString();
    r.environment = history::parseJsonObject(q.value(13).toString());
    r.summary = history::parseJsonObject(q.value(14).toString());
    for (const QJsonValue &tag : QJsonDocument::fromJson(q.value(15).toString().toUtf8()).array())
        r.tags << tag.toString();
    r.notes = q.value(16).toString();
    r.pinnedBaseline = q.value(17).toInt() != 0;
    r.planId = optionalId(q.value(18));
    r.parentRunId = optionalId(q.value(19));
    r.originHost = q.value(20).toString();
    r.originRunId = optionalId(q.value(21));
    r.sampleCount = q.value(22).toLongLong();
    return r;
}

template <typename Sink>
void readChunks(const history::Connection &c, int64_t runId, Sink &sink)
{
    QSqlQuery q = c.exec(QStringLiteral("SELECT data FROM sample_chunks WHERE run_id = ? ORDER BY seq"), {qlonglong(runId)});
    const QString where = QStringLiteral("%1, run %2").arg(c.path()).arg(runId);
    while (q.next())
        history::appendChunk(q.value(0).toByteArray(), sink, where);
}

} // namespace

void SampleSeries::reserve(size_t n)
{
    for (auto *v : {&step, &stepTimeMs, &forwardMs, &backwardMs, &optimizerMs, &dataWaitMs, &allocatedBytes, &reservedBytes,
                    &peakAllocatedBytes, &deviceUsedBytes, &tokens, &loss, &learningRate, &gradNorm})
        v->reserve(n);
    phase.reserve(n);
}

HistoryStore::HistoryStore(const QString &path, Access access)
    : m_connection(access == Access::ReadWrite ? history::openHistory(path) : history::openHistoryForReading(path))
{
}
HistoryStore::~HistoryStore() = default;

int HistoryStore::schemaVersion() { return history::kSchemaVersion; }
const QString &HistoryStore::path() const { return m_connection->path(); }
bool HistoryStore::readOnly() const { return m_connection->readOnly(); }

void HistoryStore::requireWritable() const
{
    if (m_connection->readOnly())
        throw PilotBenchError(ExitCode::Failure, "history database '" + path().toStdString() + "' is read-only here (no write permission on it or its folder); nothing was changed");
}
history::Connection &HistoryStore::connection() const { return *m_connection; }

std::vector<RunRecord> HistoryStore::listRuns(const RunFilter &f) const
{
    QString sql = QStringLiteral("SELECT ") + kRunColumns + QStringLiteral(" FROM runs r WHERE 1");
    QVariantList values;
    auto equal = [&](const char *column, const QString &value) {
        if (!value.isEmpty()) {
            sql += QStringLiteral(" AND r.%1 = ?").arg(QLatin1String(column));
            values << value;
        }
    };
    equal("kind", f.kind);
    equal("verdict", f.verdict);
    equal("model", f.model);
    equal("card", f.card);
    equal("device", f.device);
    equal("status", f.status);
    if (!f.tag.isEmpty()) {
        sql += QStringLiteral(" AND EXISTS (SELECT 1 FROM json_each(r.tags) WHERE json_each.value = ?)");
        values << f.tag;
    }
    if (f.startedFrom.isValid()) {
        sql += QStringLiteral(" AND r.started_at >= ?");
        values << history::isoUtc(f.startedFrom);
    }
    if (f.startedTo.isValid()) {
        sql += QStringLiteral(" AND r.started_at <= ?");
        values << history::isoUtc(f.startedTo);
    }
    sql += QStringLiteral(" ORDER BY r.started_at DESC, r.id DESC");
    if (f.limit > 0)
        sql += QStringLiteral(" LIMIT %1").arg(f.limit);
    QSqlQuery q = m_connection->prepare(sql);
    for (const QVariant &v : values)
        q.addBindValue(v);
    m_connection->execPrepared(q);
    std::vector<RunRecord> runs;
    while (q.next())
        runs.push_back(readRun(q));
    return runs;
}

std::optional<RunRecord> HistoryStore::findRun(int64_t id) const
{
    QSqlQuery q = m_connection->exec(QStringLiteral("SELECT ") + kRunColumns + QStringLiteral(" FROM runs r WHERE r.id = ?"), {qlonglong(id)});
    if (!q.next())
        return std::nullopt;
    return readRun(q);
}

RunRecord HistoryStore::run(int64_t id) const
{
    auto r = findRun(id);
    if (!r)
        throw InvalidInputError("run " + std::to_string(id), "no such run in " + path().toStdString() + " (see 'pilotbench-cli history')");
    return *r;
}

SampleSeries HistoryStore::samples(int64_t runId) const
{
    SampleSeries series;
    series.runId = runId;
    series.reserve(static_cast<size_t>(sampleCount(runId)));
    readChunks(*m_connection, runId, series);
    return series;
}

std::vector<StepSample> HistoryStore::sampleList(int64_t runId) const
{
    std::vector<StepSample> list;
    list.reserve(static_cast<size_t>(sampleCount(runId)));
    readChunks(*m_connection, runId, list);
    return list;
}

int64_t HistoryStore::sampleCount(int64_t runId) const
{
    return m_connection->scalar(QStringLiteral("SELECT COALESCE(SUM(sample_count), 0) FROM sample_chunks WHERE run_id = ?"), {qlonglong(runId)}).toLongLong();
}

std::vector<SampleSeries> HistoryStore::curves(const std::vector<int64_t> &runIds) const
{
    std::vector<SampleSeries> all;
    for (int64_t id : runIds) {
        run(id); // an unknown id is an error, not an empty curve
        all.push_back(samples(id));
    }
    return all;
}

std::vector<PhaseMark> HistoryStore::phases(int64_t runId) const
{
    QSqlQuery q = m_connection->exec(QStringLiteral(
        "SELECT phase, step, start_ms, duration_ms, peak_allocated_bytes, peak_device_used_bytes FROM phase_marks"
        " WHERE run_id = ? ORDER BY rowid"), {qlonglong(runId)});
    std::vector<PhaseMark> marks;
    while (q.next()) {
        PhaseMark m;
        m.phase = history::phaseFromString(q.value(0).toString()).value_or(Phase::Train);
        m.step = q.value(1).toLongLong();
        m.startMs = q.value(2).toDouble();
        m.durationMs = q.value(3).toDouble();
        m.peakAllocatedBytes = q.value(4).toLongLong();
        m.peakDeviceUsedBytes = q.value(5).toLongLong();
        marks.push_back(m);
    }
    return marks;
}

std::vector<ValidationResult> HistoryStore::validations(int64_t runId) const
{
    QSqlQuery q = m_connection->exec(QStringLiteral("SELECT step, loss, batches, duration_ms FROM validations WHERE run_id = ? ORDER BY rowid"), {qlonglong(runId)});
    std::vector<ValidationResult> results;
    while (q.next())
        results.push_back({q.value(0).toLongLong(), figure(q.value(1)), q.value(2).toLongLong(), figure(q.value(3))});
    return results;
}

std::vector<CheckpointWrite> HistoryStore::checkpoints(int64_t runId) const
{
    QSqlQuery q = m_connection->exec(QStringLiteral("SELECT step, path, bytes, write_ms FROM checkpoints WHERE run_id = ? ORDER BY rowid"), {qlonglong(runId)});
    std::vector<CheckpointWrite> writes;
    while (q.next())
        writes.push_back({q.value(0).toLongLong(), q.value(1).toString().toStdString(), q.value(2).toLongLong(), figure(q.value(3))});
    return writes;
}

std::vector<ConfigDifference> HistoryStore::diffConfigs(int64_t leftRunId, int64_t rightRunId) const
{
    return diffJson(run(leftRunId).config, run(rightRunId).config);
}

void HistoryStore::pinBaseline(int64_t runId)
{
    requireWritable();
    const RunRecord r = run(runId);
    m_connection->exec(QStringLiteral("BEGIN IMMEDIATE"));
    try {
        m_connection->exec(QStringLiteral("UPDATE runs SET pinned_baseline = 0 WHERE model = ? AND id <> ?"), {r.model, qlonglong(runId)});
        m_connection->exec(QStringLiteral("UPDATE runs SET pinned_baseline = 1 WHERE id = ?"), {qlonglong(runId)});
        m_connection->exec(QStringLiteral("COMMIT"));
    } catch (...) {
        QSqlQuery(m_connection->db()).exec(QStringLiteral("ROLLBACK"));
        throw;
    }
}

void HistoryStore::unpinBaseline(int64_t runId)
{
    requireWritable();
    run(runId);
    m_connection->exec(QStringLiteral("UPDATE runs SET pinned_baseline = 0 WHERE id = ?"), {qlonglong(runId)});
}

std::optional<int64_t> HistoryStore::pinnedBaseline(const QString &model) const
{
    const QVariant id = m_connection->scalar(QStringLiteral("SELECT id FROM runs WHERE pinned_baseline = 1 AND model = ? ORDER BY id DESC LIMIT 1"), {model});
    return id.isValid() && !id.isNull() ? std::optional<int64_t>(id.toLongLong()) : std::nullopt;
}

void HistoryStore::setTags(int64_t runId, const QStringList &tags)
{
    requireWritable();
    run(runId);
    QStringList clean;
    for (const QString &tag : tags) {
        const QString t = tag.trimmed();
        if (t.isEmpty())
            throw InvalidInputError("tag", "a tag must not be empty");
        if (!clean.contains(t))
            clean << t;
    }
    const QString json = QString::fromUtf8(QJsonDocument(QJsonArray::fromStringList(clean)).toJson(QJsonDocument::Compact));
    m_connection->exec(QStringLiteral("UPDATE runs SET tags = ? WHERE id = ?"), {json, qlonglong(runId)});
}

void HistoryStore::addTag(int64_t runId, const QString &tag)
{
    setTags(runId, run(runId).tags << tag);
}

void HistoryStore::setNotes(int64_t runId, const QString &notes)
{
    requireWritable();
    run(runId);
    m_connection->exec(QStringLiteral("UPDATE runs SET notes = ? WHERE id = ?"), {history::sqlText(notes), qlonglong(runId)});
}

} // namespace pb
