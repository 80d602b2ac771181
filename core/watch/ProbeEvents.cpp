#include "watch/ProbeEvents.h"

#include <QJsonDocument>
#include <QJsonParseError>

#include <limits>

namespace pb::watch {
namespace {

int64_t whole(const QJsonObject &o, const char *key) { return static_cast<int64_t>(o.value(QLatin1String(key)).toDouble()); }
double number(const QJsonObject &o, const char *key) { return o.value(QLatin1String(key)).toDouble(); }
// A loss, learning rate or norm the job did not report (null or absent) is NaN, not 0: a resumed
// job's losses are compared only where both runs reported one.
double reported(const QJsonObject &o, const char *key)
{
    const QJsonValue v = o.value(QLatin1String(key));
    return v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN();
}

} // namespace

std::optional<ProbeEvent> parseProbeLine(const QByteArray &line)
{
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(line, &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject())
        return std::nullopt;
    const QJsonObject o = doc.object();
    const QJsonValue event = o.value(QStringLiteral("event"));
    if (!event.isString())
        return std::nullopt;
    ProbeEvent e;
    const QString name = event.toString();
    e.kind = name == QLatin1String("hello")        ? ProbeEvent::Kind::Hello
             : name == QLatin1String("step")       ? ProbeEvent::Kind::Step
             : name == QLatin1String("validation") ? ProbeEvent::Kind::Validation
             : name == QLatin1String("checkpoint") ? ProbeEvent::Kind::Checkpoint
             : name == QLatin1String("log")        ? ProbeEvent::Kind::Log
             : name == QLatin1String("end")        ? ProbeEvent::Kind::End
                                                   : ProbeEvent::Kind::Unknown;
    e.rank = o.value(QStringLiteral("rank")).toInt(0);
    e.t = number(o, "t");
    e.fields = o;
    return e;
}

StepSample stepSampleFromProbe(const QJsonObject &o)
{
    StepSample s;
    s.step = whole(o, "step");
    s.phase = Phase::Train;
    s.stepTimeMs = number(o, "step_time_ms");
    s.forwardMs = number(o, "forward_ms");
    s.backwardMs = number(o, "backward_ms");
    s.optimizerMs = number(o, "optimizer_ms");
    s.dataWaitMs = number(o, "data_wait_ms");
    s.peakAllocatedBytes = whole(o, "peak_allocated_bytes");
    s.reservedBytes = whole(o, "peak_reserved_bytes");
    s.allocatedBytes = whole(o, "allocated_bytes");
    s.tokens = whole(o, "tokens");
    s.loss = reported(o, "loss");
    s.learningRate = reported(o, "lr");
    s.gradNorm = reported(o, "grad_norm");
    // The Trainer and Lightning callbacks time forward and backward together.
    if (s.forwardMs == 0 && s.backwardMs == 0)
        s.forwardMs = number(o, "forward_backward_ms");
    return s;
}

ValidationResult validationFromProbe(const QJsonObject &o)
{
    return {whole(o, "step"), number(o, "loss"), whole(o, "batches"), number(o, "duration_ms")};
}

CheckpointWrite checkpointFromProbe(const QJsonObject &o)
{
    return {whole(o, "step"), o.value(QStringLiteral("path")).toString().toStdString(), whole(o, "bytes"), number(o, "duration_ms")};
}

} // namespace pb::watch
