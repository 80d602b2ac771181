#include "watch/ProbeEvents.h"

#include <QJsonDocument>
#include <QJsonParseError>

#include <cmath>
#include <limits>
#include <string>

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

// The figures each kind carries and the bounds they must keep.
enum class Figure { Whole, Duration, Bytes, Finite, NonNegative, Rank, WorldSize, Text };

struct Rule {
    const char *key;
    Figure figure;
};

// Whole numbers in full (2^63 reads 9223372036854775808, not 9.2233720368547758e+18).
std::string shown(double v) { return (std::floor(v) == v && std::abs(v) < 1e21 ? QString::number(v, 'f', 0) : QString::number(v, 'g', 17)).toStdString(); }

// "" when the value fits the rule; else "key: why". Null and absent are "not reported".
std::string check(const QJsonObject &o, const Rule &rule)
{
    const QJsonValue v = o.value(QLatin1String(rule.key));
    if (v.isUndefined() || v.isNull())
        return {};
    const std::string key = rule.key;
    if (rule.figure == Figure::Text)
        return v.isString() ? std::string() : key + ": not a string";
    if (!v.isDouble())
        return key + ": " + (v.isString() ? "\"" + v.toString().left(40).toStdString() + "\" is a string, not a number" : std::string("not a number"));
    const double x = v.toDouble();
    if (!std::isfinite(x))
        return key + ": not a finite number";
    if (rule.figure == Figure::Finite)
        return {};
    if (x < 0)
        return key + ": " + shown(x) + " is negative";
    auto wholeBelow = [&](double limit, const char *limitName) -> std::string {
        if (std::floor(x) != x)
            return key + ": " + shown(x) + " is not a whole number";
        if (x >= limit)
            return key + ": " + shown(x) + " is not below " + limitName;
        return {};
    };
    switch (rule.figure) {
    case Figure::Whole:
        return wholeBelow(kMaxProbeStep, "2^40");
    case Figure::Bytes:
        return wholeBelow(kMaxProbeBytes, "1 PiB (2^50 bytes)");
    case Figure::Rank:
        return wholeBelow(kMaxProbeRanks, "2^20");
    case Figure::WorldSize:
        if (x < 1)
            return key + ": " + shown(x) + " is below 1";
        return wholeBelow(kMaxProbeRanks + 1.0, "2^20 + 1");
    case Figure::Duration:
        return x < kMaxProbeDurationMs ? std::string() : key + ": " + shown(x) + " ms is not below a day (86400000 ms)";
    default:
        return {};
    }
}

std::string checkFields(ProbeEvent::Kind kind, const QJsonObject &o)
{
    static const Rule common[] = {{"rank", Figure::Rank}, {"t", Figure::NonNegative}};
    static const Rule hello[] = {{"world_size", Figure::WorldSize}};
    // Tokens in one step and step numbers share the 2^40 bound.
    static const Rule step[] = {{"step", Figure::Whole},
                                {"tokens", Figure::Whole},
                                {"step_time_ms", Figure::Duration},
                                {"forward_ms", Figure::Duration},
                                {"backward_ms", Figure::Duration},
                                {"optimizer_ms", Figure::Duration},
                                {"data_wait_ms", Figure::Duration},
                                {"forward_backward_ms", Figure::Duration},
                                {"peak_allocated_bytes", Figure::Bytes},
                                {"peak_reserved_bytes", Figure::Bytes},
                                {"allocated_bytes", Figure::Bytes},
                                {"loss", Figure::Finite},
                                {"lr", Figure::NonNegative},
                                {"grad_norm", Figure::NonNegative}};
    static const Rule validation[] = {{"step", Figure::Whole}, {"loss", Figure::Finite}, {"batches", Figure::Whole}, {"duration_ms", Figure::Duration}};
    static const Rule checkpoint[] = {{"step", Figure::Whole}, {"bytes", Figure::Bytes}, {"duration_ms", Figure::Duration}, {"path", Figure::Text}};
    for (const Rule &r : common)
        if (std::string why = check(o, r); !why.empty())
            return why;
    auto all = [&](const auto &rules) -> std::string {
        for (const Rule &r : rules)
            if (std::string why = check(o, r); !why.empty())
                return why;
        return {};
    };
    switch (kind) {
    case ProbeEvent::Kind::Hello:
        return all(hello);
    case ProbeEvent::Kind::Step:
        return all(step);
    case ProbeEvent::Kind::Validation:
        return all(validation);
    case ProbeEvent::Kind::Checkpoint:
        return all(checkpoint);
    default:
        return {};
    }
}

} // namespace

ProbeLine readProbeLine(const QByteArray &line)
{
    ProbeLine out;
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(line, &error);
    if (error.error != QJsonParseError::NoError) {
        // Qt refuses a number it cannot hold (1e999) here too: the line is not read in part.
        out.rejection = "not JSON (" + error.errorString().toStdString() + " at byte " + std::to_string(error.offset) + ")";
        return out;
    }
    if (!doc.isObject()) {
        out.rejection = "not a JSON object";
        return out;
    }
    const QJsonObject o = doc.object();
    const QJsonValue event = o.value(QStringLiteral("event"));
    if (!event.isString()) {
        out.rejection = "event: missing or not a string";
        return out;
    }
    ProbeEvent e;
    const QString name = event.toString();
    e.kind = name == QLatin1String("hello")        ? ProbeEvent::Kind::Hello
             : name == QLatin1String("step")       ? ProbeEvent::Kind::Step
             : name == QLatin1String("validation") ? ProbeEvent::Kind::Validation
             : name == QLatin1String("checkpoint") ? ProbeEvent::Kind::Checkpoint
             : name == QLatin1String("log")        ? ProbeEvent::Kind::Log
             : name == QLatin1String("end")        ? ProbeEvent::Kind::End
                                                   : ProbeEvent::Kind::Unknown;
    if (const std::string why = checkFields(e.kind, o); !why.empty()) {
        out.rejection = name.left(40).toStdString() + " event: " + why;
        return out;
    }
    e.rank = static_cast<int>(o.value(QStringLiteral("rank")).toDouble(0));
    e.t = number(o, "t");
    e.fields = o;
    out.event = std::move(e);
    return out;
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
