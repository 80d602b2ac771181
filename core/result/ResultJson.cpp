#include "result/ResultJson.h"

namespace pb {
namespace {

QString str(const std::string &s) { return QString::fromStdString(s); }
double num(int64_t v) { return static_cast<double>(v); }

} // namespace

QJsonObject toJson(const StepSample &s)
{
    return QJsonObject {
        {QStringLiteral("step"), num(s.step)},
        {QStringLiteral("phase"), QString::fromLatin1(toString(s.phase))},
        {QStringLiteral("step_time_ms"), s.stepTimeMs},
        {QStringLiteral("forward_ms"), s.forwardMs},
        {QStringLiteral("backward_ms"), s.backwardMs},
        {QStringLiteral("optimizer_ms"), s.optimizerMs},
        {QStringLiteral("data_wait_ms"), s.dataWaitMs},
        {QStringLiteral("allocated_bytes"), num(s.allocatedBytes)},
        {QStringLiteral("reserved_bytes"), num(s.reservedBytes)},
        {QStringLiteral("peak_allocated_bytes"), num(s.peakAllocatedBytes)},
        {QStringLiteral("device_used_bytes"), num(s.deviceUsedBytes)},
        {QStringLiteral("tokens"), num(s.tokens)},
        {QStringLiteral("loss"), s.loss},
        {QStringLiteral("lr"), s.learningRate},
        {QStringLiteral("grad_norm"), s.gradNorm},
    };
}

QJsonObject toJson(const PhaseMark &m)
{
    return QJsonObject {
        {QStringLiteral("phase"), QString::fromLatin1(toString(m.phase))},
        {QStringLiteral("step"), num(m.step)},
        {QStringLiteral("start_ms"), m.startMs},
        {QStringLiteral("duration_ms"), m.durationMs},
        {QStringLiteral("peak_allocated_bytes"), num(m.peakAllocatedBytes)},
        {QStringLiteral("peak_device_used_bytes"), num(m.peakDeviceUsedBytes)},
    };
}

QJsonObject toJson(const ValidationResult &v)
{
    return QJsonObject {{QStringLiteral("step"), num(v.step)}, {QStringLiteral("loss"), v.loss}, {QStringLiteral("batches"), num(v.batches)},
                        {QStringLiteral("duration_ms"), v.durationMs}};
}

QJsonObject toJson(const CheckpointWrite &c)
{
    return QJsonObject {{QStringLiteral("step"), num(c.step)}, {QStringLiteral("path"), str(c.path)}, {QStringLiteral("bytes"), num(c.bytes)},
                        {QStringLiteral("write_ms"), c.writeMs}};
}

QJsonObject toJson(const PilotSummary &s)
{
    QJsonObject byPhase, usedByPhase;
    for (const auto &[phase, bytes] : s.peakAllocatedByPhase)
        byPhase.insert(str(phase), num(bytes));
    for (const auto &[phase, bytes] : s.peakDeviceUsedByPhase)
        usedByPhase.insert(str(phase), num(bytes));
    return QJsonObject {
        {QStringLiteral("verdict"), QString::fromLatin1(toString(s.verdict))},
        {QStringLiteral("message"), str(s.message)},
        {QStringLiteral("failed_phase"), str(s.failedPhase)},
        {QStringLiteral("failed_step"), num(s.failedStep)},
        {QStringLiteral("measured_steps"), num(s.measuredSteps)},
        {QStringLiteral("step_time_mean_ms"), s.stepTimeMeanMs},
        {QStringLiteral("step_time_p50_ms"), s.stepTimeP50Ms},
        {QStringLiteral("step_time_p90_ms"), s.stepTimeP90Ms},
        {QStringLiteral("step_time_p99_ms"), s.stepTimeP99Ms},
        {QStringLiteral("step_time_cv"), s.stepTimeCv},
        {QStringLiteral("tokens_per_s"), s.tokensPerSecond},
        {QStringLiteral("mfu"), s.mfu ? QJsonValue(*s.mfu) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("flops_per_step"), s.flopsPerStep},
        {QStringLiteral("peak_allocated_bytes"), num(s.peakAllocatedBytes)},
        {QStringLiteral("peak_reserved_bytes"), num(s.peakReservedBytes)},
        {QStringLiteral("peak_device_used_bytes"), num(s.peakDeviceUsedBytes)},
        {QStringLiteral("peak_allocated_by_phase"), byPhase},
        {QStringLiteral("peak_device_used_by_phase"), usedByPhase},
        {QStringLiteral("data_stall_fraction"), s.dataStallFraction},
        {QStringLiteral("validation_ms"), s.validationMs},
        {QStringLiteral("checkpoint_write_ms"), s.checkpointWriteMs},
        {QStringLiteral("checkpoint_bytes"), num(s.checkpointBytes)},
        {QStringLiteral("setup_ms"), s.setupMs},
        {QStringLiteral("total_ms"), s.totalMs},
        {QStringLiteral("final_loss"), s.finalLoss},
        // The run summary keeps the largest sites; pilot --memory-snapshot writes them all.
        {QStringLiteral("memory_attribution"), s.memoryAttribution ? QJsonValue(toJson(*s.memoryAttribution, 16)) : QJsonValue(QJsonValue::Null)},
    };
}

std::optional<Phase> phaseFromString(const QString &text)
{
    for (Phase p : {Phase::Setup, Phase::Warmup, Phase::Train, Phase::Validation, Phase::Checkpoint, Phase::Done})
        if (text == QLatin1String(toString(p)))
            return p;
    return std::nullopt;
}

std::optional<Verdict> verdictFromString(const QString &text)
{
    for (Verdict v : {Verdict::Fits, Verdict::DoesNotFit, Verdict::Failed, Verdict::Cancelled})
        if (text == QLatin1String(toString(v)))
            return v;
    return std::nullopt;
}

} // namespace pb
