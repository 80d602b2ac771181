#include "dist/DistributedPilot.h"

#include "engine/PilotJson.h"
#include "result/ResultJson.h"

#include <QJsonArray>

namespace pb {

QJsonObject toJson(const DistributedPilotResult &result)
{
    QJsonObject o = summaryJson(result.run);
    o.insert(QStringLiteral("strategy"), QString::fromStdString(result.strategy));
    o.insert(QStringLiteral("rank"), result.rendezvous.rank);
    o.insert(QStringLiteral("world_size"), result.rendezvous.worldSize);
    o.insert(QStringLiteral("local_rank"), result.rendezvous.localRank);
    o.insert(QStringLiteral("collective"), QString::fromStdString(result.collective));
    o.insert(QStringLiteral("collective_version"), QString::fromStdString(result.collectiveVersion));
    o.insert(QStringLiteral("comm_ms_per_step"), result.commMsPerStep);
    o.insert(QStringLiteral("overlap"), result.overlap);
    o.insert(QStringLiteral("broadcast_ms"), result.broadcastMs);
    o.insert(QStringLiteral("gradient_bytes_per_step"), static_cast<double>(result.gradientBytesPerStep));
    o.insert(QStringLiteral("optimizer_parameters"), static_cast<double>(result.optimizerParameters));
    o.insert(QStringLiteral("parameter_sum"), result.parameterSum);
    o.insert(QStringLiteral("parameter_abs_sum"), result.parameterAbsSum);
    o.insert(QStringLiteral("parameter_count"), static_cast<double>(result.parameterCount));
    o.insert(QStringLiteral("parameter_checksum"), QString::fromStdString(result.run.parameterChecksum));
    o.insert(QStringLiteral("cpu_affinity"), QString::fromStdString(result.cpuAffinity));
    o.insert(QStringLiteral("pid"), static_cast<double>(result.pid));
    QJsonArray steps;
    for (const auto &sample : result.samples)
        steps.append(toJson(sample));
    o.insert(QStringLiteral("steps"), steps);
    return o;
}

std::vector<StepSample> stepSamplesFromJson(const QJsonObject &result)
{
    std::vector<StepSample> samples;
    for (const auto &value : result.value(QStringLiteral("steps")).toArray()) {
        const QJsonObject o = value.toObject();
        auto number = [&o](const char *key) { return o.value(QLatin1String(key)).toDouble(); };
        auto bytes = [&number](const char *key) { return static_cast<int64_t>(number(key)); };
        StepSample s;
        s.step = bytes("step");
        s.phase = phaseFromString(o.value(QStringLiteral("phase")).toString()).value_or(Phase::Train);
        s.stepTimeMs = number("step_time_ms");
        s.forwardMs = number("forward_ms");
        s.backwardMs = number("backward_ms");
        s.optimizerMs = number("optimizer_ms");
        s.dataWaitMs = number("data_wait_ms");
        s.allocatedBytes = bytes("allocated_bytes");
        s.reservedBytes = bytes("reserved_bytes");
        s.peakAllocatedBytes = bytes("peak_allocated_bytes");
        s.deviceUsedBytes = bytes("device_used_bytes");
        s.tokens = bytes("tokens");
        s.loss = number("loss");
        s.learningRate = number("lr");
        s.gradNorm = number("grad_norm");
        samples.push_back(s);
    }
    return samples;
}

} // namespace pb
