#include "history/HistoryJson.h"

#include <QJsonDocument>
#include <QJsonArray>

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
                                    QStringLiteral("scale"), QStringLiteral("compare"), QStringLiteral("decision"), QStringLiteral("watch")};
    return kinds;
}

} // namespace pb
