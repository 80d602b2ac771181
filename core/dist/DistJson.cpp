#include "dist/DistributedPilot.h"

#include "engine/PilotJson.h"

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
    o.insert(QStringLiteral("broadcast_ms"), result.broadcastMs);
    o.insert(QStringLiteral("gradient_bytes_per_step"), static_cast<double>(result.gradientBytesPerStep));
    o.insert(QStringLiteral("optimizer_parameters"), static_cast<double>(result.optimizerParameters));
    o.insert(QStringLiteral("parameter_sum"), result.parameterSum);
    o.insert(QStringLiteral("parameter_abs_sum"), result.parameterAbsSum);
    o.insert(QStringLiteral("parameter_count"), static_cast<double>(result.parameterCount));
    o.insert(QStringLiteral("parameter_checksum"), QString::fromStdString(result.run.parameterChecksum));
    o.insert(QStringLiteral("cpu_affinity"), QString::fromStdString(result.cpuAffinity));
    o.insert(QStringLiteral("pid"), static_cast<double>(result.pid));
    return o;
}

} // namespace pb
