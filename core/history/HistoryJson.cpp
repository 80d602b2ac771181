#include "history/HistoryJson.h"

#include <QJsonDocument>

namespace pb::history {

QString isoUtc(const QDateTime &time)
{
    return time.isValid() ? time.toUTC().toString(Qt::ISODateWithMs) : QString();
}

QDateTime parseIsoUtc(const QString &text)
{
    if (text.isEmpty())
        return {};
    QDateTime time = QDateTime::fromString(text, Qt::ISODateWithMs);
    if (!time.isValid())
        time = QDateTime::fromString(text, Qt::ISODate);
    return time.isValid() ? time.toUTC() : QDateTime();
}

QString compactJson(const QJsonObject &object)
{
    return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

QJsonObject parseJsonObject(const QString &text)
{
    return QJsonDocument::fromJson(text.toUtf8()).object();
}

QString sqlText(const QString &text)
{
    return text.isNull() ? QString(QLatin1String("")) : text;
}

std::optional<Phase> phaseFromString(const QString &text)
{
    for (Phase p : {Phase::Setup, Phase::Warmup, Phase::Train, Phase::Validation, Phase::Checkpoint, Phase::Done})
        if (text == QLatin1String(toString(p)))
            return p;
    return std::nullopt;
}

namespace {
QJsonObject byPhase(const std::map<std::string, int64_t> &values)
{
    QJsonObject o;
    for (const auto &[phase, bytes] : values)
        o.insert(QString::fromStdString(phase), qint64(bytes));
    return o;
}
} // namespace

QJsonObject toJson(const PilotSummary &s)
{
    QJsonObject o {
        {QStringLiteral("verdict"), QLatin1String(toString(s.verdict))},
        {QStringLiteral("message"), QString::fromStdString(s.message)},
        {QStringLiteral("failed_phase"), QString::fromStdString(s.failedPhase)},
        {QStringLiteral("failed_step"), qint64(s.failedStep)},
        {QStringLiteral("measured_steps"), qint64(s.measuredSteps)},
        {QStringLiteral("step_time_mean_ms"), s.stepTimeMeanMs},
        {QStringLiteral("step_time_p50_ms"), s.stepTimeP50Ms},
        {QStringLiteral("step_time_p90_ms"), s.stepTimeP90Ms},
        {QStringLiteral("step_time_p99_ms"), s.stepTimeP99Ms},
        {QStringLiteral("step_time_cv"), s.stepTimeCv},
        {QStringLiteral("tokens_per_second"), s.tokensPerSecond},
        {QStringLiteral("mfu"), s.mfu ? QJsonValue(*s.mfu) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("flops_per_step"), s.flopsPerStep},
        {QStringLiteral("peak_allocated_bytes"), qint64(s.peakAllocatedBytes)},
        {QStringLiteral("peak_reserved_bytes"), qint64(s.peakReservedBytes)},
        {QStringLiteral("peak_device_used_bytes"), qint64(s.peakDeviceUsedBytes)},
        {QStringLiteral("peak_allocated_by_phase"), byPhase(s.peakAllocatedByPhase)},
        {QStringLiteral("peak_device_used_by_phase"), byPhase(s.peakDeviceUsedByPhase)},
        {QStringLiteral("data_stall_fraction"), s.dataStallFraction},
        {QStringLiteral("validation_ms"), s.validationMs},
        {QStringLiteral("checkpoint_write_ms"), s.checkpointWriteMs},
        {QStringLiteral("checkpoint_bytes"), qint64(s.checkpointBytes)},
        {QStringLiteral("setup_ms"), s.setupMs},
        {QStringLiteral("total_ms"), s.totalMs},
        {QStringLiteral("final_loss"), s.finalLoss},
    };
    return o;
}

QJsonObject toJson(const PhaseMark &m)
{
    return {{QStringLiteral("phase"), QLatin1String(toString(m.phase))}, {QStringLiteral("step"), qint64(m.step)},
            {QStringLiteral("start_ms"), m.startMs}, {QStringLiteral("duration_ms"), m.durationMs},
            {QStringLiteral("peak_allocated_bytes"), qint64(m.peakAllocatedBytes)},
            {QStringLiteral("peak_device_used_bytes"), qint64(m.peakDeviceUsedBytes)}};
}

QJsonObject toJson(const ValidationResult &v)
{
    return {{QStringLiteral("step"), qint64(v.step)}, {QStringLiteral("loss"), v.loss},
            {QStringLiteral("batches"), qint64(v.batches)}, {QStringLiteral("duration_ms"), v.durationMs}};
}

QJsonObject toJson(const CheckpointWrite &w)
{
    return {{QStringLiteral("step"), qint64(w.step)}, {QStringLiteral("path"), QString::fromStdString(w.path)},
            {QStringLiteral("bytes"), qint64(w.bytes)}, {QStringLiteral("write_ms"), w.writeMs}};
}

QJsonObject toJson(const RunRecord &r)
{
    auto optionalId = [](const std::optional<int64_t> &id) { return id ? QJsonValue(qint64(*id)) : QJsonValue(QJsonValue::Null); };
    return {
        {QStringLiteral("id"), qint64(r.id)},
        {QStringLiteral("uuid"), r.uuid},
        {QStringLiteral("kind"), r.kind},
        {QStringLiteral("status"), r.status},
        {QStringLiteral("verdict"), r.verdict},
        {QStringLiteral("started_at"), isoUtc(r.startedAt)},
        {QStringLiteral("finished_at"), r.finishedAt.isValid() ? QJsonValue(isoUtc(r.finishedAt)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("name"), r.name},
        {QStringLiteral("model"), r.model},
        {QStringLiteral("device"), r.device},
        {QStringLiteral("card"), r.card},
        {QStringLiteral("config_hash"), QString::fromStdString(r.configHash)},
        {QStringLiteral("config"), r.config},
        {QStringLiteral("environment"), r.environment},
        {QStringLiteral("summary"), r.summary},
        {QStringLiteral("tags"), QJsonArray::fromStringList(r.tags)},
        {QStringLiteral("notes"), r.notes},
        {QStringLiteral("pinned_baseline"), r.pinnedBaseline},
        {QStringLiteral("plan_id"), optionalId(r.planId)},
        {QStringLiteral("parent_run_id"), optionalId(r.parentRunId)},
        {QStringLiteral("origin_host"), r.originHost},
        {QStringLiteral("origin_run_id"), optionalId(r.originRunId)},
        {QStringLiteral("sample_count"), qint64(r.sampleCount)},
    };
}

const QStringList &sampleColumnNames()
{
    static const QStringList names {
        QStringLiteral("step"), QStringLiteral("phase"), QStringLiteral("step_time_ms"), QStringLiteral("forward_ms"),
        QStringLiteral("backward_ms"), QStringLiteral("optimizer_ms"), QStringLiteral("data_wait_ms"),
        QStringLiteral("allocated_bytes"), QStringLiteral("reserved_bytes"), QStringLiteral("peak_allocated_bytes"),
        QStringLiteral("device_used_bytes"), QStringLiteral("tokens"), QStringLiteral("loss"), QStringLiteral("lr"),
        QStringLiteral("grad_norm")};
    return names;
}

QJsonObject samplesToJson(const std::vector<StepSample> &samples)
{
    std::vector<QJsonArray> cols(15);
    for (const StepSample &s : samples) {
        cols[0].append(qint64(s.step));
        cols[1].append(QLatin1String(toString(s.phase)));
        cols[2].append(s.stepTimeMs);
        cols[3].append(s.forwardMs);
        cols[4].append(s.backwardMs);
        cols[5].append(s.optimizerMs);
        cols[6].append(s.dataWaitMs);
        cols[7].append(qint64(s.allocatedBytes));
        cols[8].append(qint64(s.reservedBytes));
        cols[9].append(qint64(s.peakAllocatedBytes));
        cols[10].append(qint64(s.deviceUsedBytes));
        cols[11].append(qint64(s.tokens));
        cols[12].append(s.loss);
        cols[13].append(s.learningRate);
        cols[14].append(s.gradNorm);
    }
    QJsonObject o;
    for (int i = 0; i < 15; ++i)
        o.insert(sampleColumnNames()[i], cols[size_t(i)]);
    return o;
}

} // namespace pb::history

namespace pb {

const QStringList &historyRunKinds()
{
    static const QStringList kinds {QStringLiteral("pilot"), QStringLiteral("estimate"), QStringLiteral("restore-check"),
                                    QStringLiteral("scale"), QStringLiteral("compare"), QStringLiteral("decision")};
    return kinds;
}

} // namespace pb
