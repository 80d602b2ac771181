#include "history/HistoryExport.h"

#include "config/RunConfigParse.h"
#include "config/JsonText.h"
#include "config/RunConfigValidation.h"
#include "history/HistoryDatabase.h"
#include "history/HistoryJson.h"
#include "history/HistoryStore.h"
#include "history/SampleChunk.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSysInfo>

#include <cmath>
#include <limits>
#include <map>

namespace pb {
namespace {

QByteArray number(double v) { return QByteArray::number(v, 'g', QLocale::FloatingPointShortest); }

// Reads an export, naming the field of the first thing wrong.
class ExportReader {
public:
    explicit ExportReader(QString file) : m_file(std::move(file)) {}

    [[noreturn]] void bad(const QString &field, const std::string &rule) const
    {
        throw InvalidInputError(m_file.toStdString(), field.toStdString() + ": " + rule);
    }
    QJsonValue need(const QJsonObject &o, const QString &field, const char *key) const
    {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined())
            bad(field + QLatin1Char('.') + QLatin1String(key), "is missing");
        return v;
    }
    QString text(const QJsonObject &o, const QString &field, const char *key, bool required = true) const
    {
        const QJsonValue v = required ? need(o, field, key) : o.value(QLatin1String(key));
        if (v.isUndefined() || v.isNull())
            return {};
        if (!v.isString())
            bad(field + QLatin1Char('.') + QLatin1String(key), "must be a string");
        return v.toString();
    }
    int64_t integer(const QJsonValue &v, const QString &field) const
    {
        const double d = v.toDouble(std::nan(""));
        if (!v.isDouble() || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15)
            bad(field, "must be an integer");
        return v.toInteger();
    }
    // Steps, bytes, tokens and counts: never negative.
    int64_t count(const QJsonValue &v, const QString &field) const
    {
        const int64_t n = integer(v, field);
        if (n < 0)
            bad(field, "must not be negative");
        return n;
    }
    double real(const QJsonValue &v, const QString &field) const
    {
        if (!v.isDouble())
            bad(field, "must be a number");
        return v.toDouble();
    }
    // A measured figure the run did not report (a watched job's probe without grad_norm, a diverged
    // loss): stored as NaN, which JSON writes as null; null reads back as NaN.
    double figure(const QJsonValue &v, const QString &field) const
    {
        if (v.isNull())
            return std::numeric_limits<double>::quiet_NaN();
        if (!v.isDouble())
            bad(field, "must be a number or null (not reported)");
        return v.toDouble();
    }
    std::optional<int64_t> optionalId(const QJsonObject &o, const QString &field, const char *key) const
    {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined() || v.isNull())
            return std::nullopt;
        return integer(v, field + QLatin1Char('.') + QLatin1String(key));
    }
    QJsonObject object(const QJsonObject &o, const QString &field, const char *key) const
    {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined() || v.isNull())
            return {};
        if (!v.isObject())
            bad(field + QLatin1Char('.') + QLatin1String(key), "must be an object");
        return v.toObject();
    }
    QJsonArray array(const QJsonObject &o, const QString &field, const char *key, bool required = false) const
    {
        const QJsonValue v = required ? need(o, field, key) : o.value(QLatin1String(key));
        if (v.isUndefined() || v.isNull())
            return {};
        if (!v.isArray())
            bad(field + QLatin1Char('.') + QLatin1String(key), "must be an array");
        return v.toArray();
    }

private:
    QString m_file;
};

std::vector<StepSample> readSamples(const ExportReader &r, const QJsonObject &cols, const QString &field)
{
    const QStringList &names = history::sampleColumnNames();
    std::vector<QJsonArray> arrays;
    for (const QString &name : names)
        arrays.push_back(r.array(cols, field, name.toLatin1().constData(), !cols.isEmpty()));
    const qsizetype n = arrays[0].size();
    for (size_t c = 1; c < arrays.size(); ++c)
        if (arrays[c].size() != n)
            r.bad(field + QLatin1Char('.') + names[int(c)], "has " + std::to_string(arrays[c].size()) + " values, the step column "
                  + std::to_string(n) + "; all sample columns must have the same length");
    std::vector<StepSample> samples(static_cast<size_t>(n));
    for (qsizetype i = 0; i < n; ++i) {
        auto at = [&](int c) { return field + QLatin1Char('.') + names[c] + QStringLiteral("[%1]").arg(i); };
        StepSample &s = samples[size_t(i)];
        s.step = r.count(arrays[0][i], at(0));
        const auto phase = history::phaseFromString(arrays[1][i].toString());
        if (!phase)
            r.bad(at(1), "must be one of setup, warmup, train, validation, checkpoint, done");
        s.phase = *phase;
        s.stepTimeMs = r.figure(arrays[2][i], at(2));
        s.forwardMs = r.figure(arrays[3][i], at(3));
        s.backwardMs = r.figure(arrays[4][i], at(4));
        s.optimizerMs = r.figure(arrays[5][i], at(5));
        s.dataWaitMs = r.figure(arrays[6][i], at(6));
        s.allocatedBytes = r.count(arrays[7][i], at(7));
        s.reservedBytes = r.count(arrays[8][i], at(8));
        s.peakAllocatedBytes = r.count(arrays[9][i], at(9));
        s.deviceUsedBytes = r.count(arrays[10][i], at(10));
        s.tokens = r.count(arrays[11][i], at(11));
        s.loss = r.figure(arrays[12][i], at(12));
        s.learningRate = r.figure(arrays[13][i], at(13));
        s.gradNorm = r.figure(arrays[14][i], at(14));
    }
    return samples;
}

ExportedRun readRun(const ExportReader &r, const QJsonObject &o, const QString &field, const QString &host)
{
    ExportedRun in;
    RunRecord &run = in.run;
    run.uuid = r.text(o, field, "uuid");
    if (run.uuid.isEmpty())
        r.bad(field + QStringLiteral(".uuid"), "must not be empty");
    run.kind = r.text(o, field, "kind");
    if (!historyRunKinds().contains(run.kind))
        r.bad(field + QStringLiteral(".kind"), "'" + run.kind.toStdString() + "' is not a run kind");
    run.status = r.text(o, field, "status");
    if (run.status != QLatin1String("running") && run.status != QLatin1String("done") && run.status != QLatin1String("interrupted"))
        r.bad(field + QStringLiteral(".status"), "must be running, done or interrupted");
    run.verdict = r.text(o, field, "verdict", false);
    run.startedAt = history::parseIsoUtc(r.text(o, field, "started_at"));
    if (!run.startedAt.isValid())
        r.bad(field + QStringLiteral(".started_at"), "must be an ISO 8601 date and time");
    run.finishedAt = history::parseIsoUtc(r.text(o, field, "finished_at", false));
    run.name = r.text(o, field, "name", false);
    run.model = r.text(o, field, "model", false);
    run.device = r.text(o, field, "device", false);
    run.card = r.text(o, field, "card", false);
    run.configHash = r.text(o, field, "config_hash", false).toStdString();
    run.config = r.object(o, field, "config");
    // A run whose definition this build would refuse cannot be compared, decided on or reported. A
    // config without a model shape is a summary kept as given (schema v1's runs, watched commands).
    if (run.config.value(QStringLiteral("model")).toObject().contains(QStringLiteral("layers"))) {
        const QString configField = field + QStringLiteral(".config");
        RunConfig config;
        try {
            config = parseRunConfigJson(run.config);
        } catch (const InvalidInputError &e) {
            r.bad(e.where().empty() ? configField : configField + QLatin1Char('.') + QString::fromStdString(e.where()), e.message());
        }
        const auto issues = validateRunConfig(config);
        if (!issues.empty())
            r.bad(configField + QLatin1Char('.') + QString::fromStdString(issues.front().field), issues.front().message);
    }
    run.environment = r.object(o, field, "environment");
    run.summary = r.object(o, field, "summary");
    const QJsonArray tags = r.array(o, field, "tags");
    for (qsizetype i = 0; i < tags.size(); ++i) {
        if (!tags[i].isString())
            r.bad(field + QStringLiteral(".tags[%1]").arg(i), "must be a string");
        run.tags << tags[i].toString();
    }
    run.notes = r.text(o, field, "notes", false);
    run.parentRunId = r.optionalId(o, field, "parent_run_id");
    // A run imported before keeps its first origin; otherwise it came from the exporting host.
    const QString origin = r.text(o, field, "origin_host", false);
    run.originHost = origin.isEmpty() ? host : origin;
    run.originRunId = origin.isEmpty() ? std::optional<int64_t>(r.integer(r.need(o, field, "id"), field + QStringLiteral(".id")))
                                       : r.optionalId(o, field, "origin_run_id");
    in.samples = readSamples(r, r.object(o, field, "samples"), field + QStringLiteral(".samples"));
    const QJsonArray phases = r.array(o, field, "phases");
    for (qsizetype i = 0; i < phases.size(); ++i) {
        const QString f = field + QStringLiteral(".phases[%1]").arg(i);
        const QJsonObject p = phases[i].toObject();
        PhaseMark m;
        const auto phase = history::phaseFromString(r.text(p, f, "phase"));
        if (!phase)
            r.bad(f + QStringLiteral(".phase"), "is not a phase");
        m.phase = *phase;
        m.step = r.count(r.need(p, f, "step"), f + QStringLiteral(".step"));
        m.startMs = r.real(r.need(p, f, "start_ms"), f + QStringLiteral(".start_ms"));
        m.durationMs = r.real(r.need(p, f, "duration_ms"), f + QStringLiteral(".duration_ms"));
        m.peakAllocatedBytes = r.integer(r.need(p, f, "peak_allocated_bytes"), f + QStringLiteral(".peak_allocated_bytes"));
        m.peakDeviceUsedBytes = r.integer(r.need(p, f, "peak_device_used_bytes"), f + QStringLiteral(".peak_device_used_bytes"));
        in.phases.push_back(m);
    }
    const QJsonArray validations = r.array(o, field, "validations");
    for (qsizetype i = 0; i < validations.size(); ++i) {
        const QString f = field + QStringLiteral(".validations[%1]").arg(i);
        const QJsonObject v = validations[i].toObject();
        in.validations.push_back({r.count(r.need(v, f, "step"), f + QStringLiteral(".step")), r.figure(r.need(v, f, "loss"), f + QStringLiteral(".loss")),
                                  r.integer(r.need(v, f, "batches"), f + QStringLiteral(".batches")),
                                  r.figure(r.need(v, f, "duration_ms"), f + QStringLiteral(".duration_ms"))});
    }
    const QJsonArray checkpoints = r.array(o, field, "checkpoints");
    for (qsizetype i = 0; i < checkpoints.size(); ++i) {
        const QString f = field + QStringLiteral(".checkpoints[%1]").arg(i);
        const QJsonObject c = checkpoints[i].toObject();
        in.checkpoints.push_back({r.count(r.need(c, f, "step"), f + QStringLiteral(".step")), r.text(c, f, "path").toStdString(),
                                  r.count(r.need(c, f, "bytes"), f + QStringLiteral(".bytes")),
                                  r.figure(r.need(c, f, "write_ms"), f + QStringLiteral(".write_ms"))});
    }
    return in;
}

int64_t insertRun(const history::Connection &c, const ExportedRun &in)
{
    const RunRecord &r = in.run;
    auto opt = [](const std::optional<int64_t> &v) { return v ? QVariant(qlonglong(*v)) : QVariant(); };
    c.exec(QStringLiteral(
        "INSERT INTO runs (run_uuid, kind, status, verdict, started_at, finished_at, name, model, device, card, config_json, config_hash,"
        " environment_json, summary_json, tags, notes, origin_host, origin_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        {r.uuid, r.kind, r.status, history::sqlText(r.verdict), history::isoUtc(r.startedAt), r.finishedAt.isValid() ? QVariant(history::isoUtc(r.finishedAt)) : QVariant(),
         history::sqlText(r.name), history::sqlText(r.model), history::sqlText(r.device), history::sqlText(r.card),
         history::compactJson(r.config), history::sqlText(QString::fromStdString(r.configHash)),
         history::compactJson(r.environment), history::compactJson(r.summary),
         QString::fromUtf8(QJsonDocument(QJsonArray::fromStringList(r.tags)).toJson(QJsonDocument::Compact)), history::sqlText(r.notes), history::sqlText(r.originHost), opt(r.originRunId)});
    const int64_t id = c.scalar(QStringLiteral("SELECT last_insert_rowid()")).toLongLong();
    QSqlQuery chunk = c.prepare(QStringLiteral("INSERT INTO sample_chunks (run_id, seq, first_step, last_step, sample_count, data) VALUES (?, ?, ?, ?, ?, ?)"));
    int64_t seq = 0;
    for (size_t first = 0; first < in.samples.size(); first += history::kChunkSamples) {
        const size_t n = std::min(history::kChunkSamples, in.samples.size() - first);
        const QVariantList values {qlonglong(id), qlonglong(seq++), qlonglong(in.samples[first].step), qlonglong(in.samples[first + n - 1].step),
                                   qlonglong(n), history::encodeChunk(&in.samples[first], n)};
        for (int i = 0; i < values.size(); ++i)
            chunk.bindValue(i, values[i]);
        c.execPrepared(chunk);
    }
    for (const PhaseMark &m : in.phases)
        c.exec(QStringLiteral("INSERT INTO phase_marks (run_id, phase, step, start_ms, duration_ms, peak_allocated_bytes, peak_device_used_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)"),
               {qlonglong(id), QLatin1String(toString(m.phase)), qlonglong(m.step), m.startMs, m.durationMs, qlonglong(m.peakAllocatedBytes), qlonglong(m.peakDeviceUsedBytes)});
    for (const ValidationResult &v : in.validations)
        c.exec(QStringLiteral("INSERT INTO validations (run_id, step, loss, batches, duration_ms) VALUES (?, ?, ?, ?, ?)"),
               {qlonglong(id), qlonglong(v.step), v.loss, qlonglong(v.batches), v.durationMs});
    for (const CheckpointWrite &w : in.checkpoints)
        c.exec(QStringLiteral("INSERT INTO checkpoints (run_id, step, path, bytes, write_ms) VALUES (?, ?, ?, ?, ?)"),
               {qlonglong(id), qlonglong(w.step), QString::fromStdString(w.path), qlonglong(w.bytes), w.writeMs});
    return id;
}

} // namespace

QJsonObject runJson(const HistoryStore &store, int64_t runId, bool withSamples)
{
    QJsonObject run = history::toJson(store.run(runId));
    QJsonArray phases, validations, checkpoints;
    for (const PhaseMark &m : store.phases(runId))
        phases.append(history::toJson(m));
    for (const ValidationResult &v : store.validations(runId))
        validations.append(history::toJson(v));
    for (const CheckpointWrite &w : store.checkpoints(runId))
        checkpoints.append(history::toJson(w));
    run.insert(QStringLiteral("phases"), phases);
    run.insert(QStringLiteral("validations"), validations);
    run.insert(QStringLiteral("checkpoints"), checkpoints);
    if (withSamples)
        run.insert(QStringLiteral("samples"), history::samplesToJson(store.sampleList(runId)));
    return run;
}

QJsonObject exportRunsJson(const HistoryStore &store, const std::vector<int64_t> &runIds)
{
    QJsonArray runs;
    for (int64_t id : runIds)
        runs.append(runJson(store, id, true));
    return {{QStringLiteral("format"), QStringLiteral("pilotbench-history-export")},
            {QStringLiteral("format_version"), kHistoryExportFormatVersion},
            {QStringLiteral("exported_at"), history::isoUtc(QDateTime::currentDateTimeUtc())},
            {QStringLiteral("host"), QSysInfo::machineHostName()},
            {QStringLiteral("runs"), runs}};
}

void writeRunsJson(const HistoryStore &store, const std::vector<int64_t> &runIds, const QString &file)
{
    writeFileAtomically(file, QJsonDocument(exportRunsJson(store, runIds)).toJson(QJsonDocument::Indented));
}

void writeSamplesCsv(const HistoryStore &store, const std::vector<int64_t> &runIds, const QString &file)
{
    QByteArray csv = "run_id," + history::sampleColumnNames().join(QLatin1Char(',')).toLatin1() + '\n';
    for (int64_t id : runIds) {
        store.run(id);
        const QByteArray runId = QByteArray::number(qlonglong(id));
        for (const StepSample &s : store.sampleList(id)) {
            csv += runId + ',' + QByteArray::number(qlonglong(s.step)) + ',' + toString(s.phase) + ',' + number(s.stepTimeMs) + ','
                + number(s.forwardMs) + ',' + number(s.backwardMs) + ',' + number(s.optimizerMs) + ',' + number(s.dataWaitMs) + ','
                + QByteArray::number(qlonglong(s.allocatedBytes)) + ',' + QByteArray::number(qlonglong(s.reservedBytes)) + ','
                + QByteArray::number(qlonglong(s.peakAllocatedBytes)) + ',' + QByteArray::number(qlonglong(s.deviceUsedBytes)) + ','
                + QByteArray::number(qlonglong(s.tokens)) + ',' + number(s.loss) + ',' + number(s.learningRate) + ',' + number(s.gradNorm) + '\n';
        }
    }
    writeFileAtomically(file, csv);
}

std::vector<ExportedRun> parseRunsExport(const QByteArray &json, const QString &file)
{
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &parseError);
    if (parseError.error == QJsonParseError::NoError)
        checkJsonText(json, file.toStdString());
    const ExportReader r(file);
    if (parseError.error != QJsonParseError::NoError)
        r.bad(QStringLiteral("offset %1").arg(parseError.offset), "not valid JSON (" + parseError.errorString().toStdString() + ")");
    if (!doc.isObject())
        r.bad(QStringLiteral("(top level)"), "must be a JSON object written by 'pilotbench-cli history export'");
    const QJsonObject root = doc.object();
    if (r.text(root, QString(), "format") != QLatin1String("pilotbench-history-export"))
        r.bad(QStringLiteral("format"), "must be \"pilotbench-history-export\"");
    const int64_t version = r.integer(r.need(root, QString(), "format_version"), QStringLiteral("format_version"));
    if (version > kHistoryExportFormatVersion)
        r.bad(QStringLiteral("format_version"), "is " + std::to_string(version) + ", newer than this build reads (" + std::to_string(kHistoryExportFormatVersion) + ")");
    const QString host = r.text(root, QString(), "host", false);
    const QJsonArray runs = r.array(root, QString(), "runs", true);
    std::vector<ExportedRun> parsed;
    for (qsizetype i = 0; i < runs.size(); ++i) {
        const QString field = QStringLiteral("runs[%1]").arg(i);
        if (!runs[i].isObject())
            r.bad(field, "must be an object");
        parsed.push_back(readRun(r, runs[i].toObject(), field, host));
        const QJsonValue id = runs[i].toObject().value(QStringLiteral("id"));
        parsed.back().exportedId = id.isDouble() ? id.toInteger() : -1;
    }
    return parsed;
}

ImportResult importRunsJson(HistoryStore &store, const QString &file)
{
    // An export carries its samples; 1 GiB is far beyond any history and far below what breaks.
    const std::vector<ExportedRun> parsed = parseRunsExport(readRegularFile(file, qint64(1) << 30), file);

    const history::Connection &c = store.connection();
    ImportResult result;
    std::map<int64_t, int64_t> localIdOf; // id in the export -> new local id
    c.exec(QStringLiteral("BEGIN IMMEDIATE"));
    try {
        for (size_t i = 0; i < parsed.size(); ++i) {
            const RunRecord &run = parsed[i].run;
            const QVariant existing = c.scalar(QStringLiteral("SELECT id FROM runs WHERE run_uuid = ?"), {run.uuid});
            if (existing.isValid() && !existing.isNull()) {
                result.skipped << QStringLiteral("run %1 (uuid %2) is already in this history as run %3; skipped")
                                      .arg(parsed[i].exportedId).arg(run.uuid).arg(existing.toLongLong());
                continue;
            }
            const int64_t id = insertRun(c, parsed[i]);
            localIdOf[parsed[i].exportedId] = id;
            result.importedRunIds.push_back(id);
        }
        // Links survive only between runs of the same export; other machines' ids mean nothing here.
        for (size_t i = 0; i < parsed.size(); ++i) {
            const auto parent = parsed[i].run.parentRunId;
            const auto self = localIdOf.find(parsed[i].exportedId);
            if (!parent || self == localIdOf.end())
                continue;
            const auto local = localIdOf.find(*parent);
            if (local != localIdOf.end())
                c.exec(QStringLiteral("UPDATE runs SET parent_run_id = ? WHERE id = ?"), {qlonglong(local->second), qlonglong(self->second)});
        }
        c.exec(QStringLiteral("COMMIT"));
    } catch (...) {
        QSqlQuery(c.db()).exec(QStringLiteral("ROLLBACK"));
        throw;
    }
    return result;
}

} // namespace pb
