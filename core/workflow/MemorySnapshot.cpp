#include "workflow/MemorySnapshot.h"

#include "config/RunConfigJson.h"
#include "estimate/MemoryBreakdownJson.h"
#include "workflow/PilotCalibration.h"

#include <QJsonArray>

namespace pb {

QJsonObject memorySnapshotJson(const RunConfig &config, const Environment &env, const MemoryAttribution &measured)
{
    QJsonObject out {{QStringLiteral("config_hash"), QString::fromStdString(configHash(config))},
                     {QStringLiteral("device_name"), QString::fromStdString(env.deviceName)},
                     {QStringLiteral("torch_version"), QString::fromStdString(env.torchVersion)},
                     {QStringLiteral("measured"), toJson(measured)}};
    try {
        const MemoryEstimate e = localTensorEstimate(config, env.device, env);
        const MemoryBreakdown m = measuredBreakdown(measured);
        QJsonArray rows;
        auto row = [&](const char *part, int64_t predicted, int64_t got) {
            rows.append(QJsonObject {{QStringLiteral("part"), QLatin1String(part)},
                                     {QStringLiteral("estimated_bytes"), static_cast<double>(predicted)},
                                     {QStringLiteral("measured_bytes"), static_cast<double>(got)},
                                     {QStringLiteral("difference_bytes"), static_cast<double>(predicted - got)}});
        };
        const MemoryBreakdown &b = e.breakdown;
        row("frozen_weights", b.frozenWeights, m.frozenWeights);
        row("trainable_weights", b.trainableWeights, m.trainableWeights);
        row("gradients", b.gradients, m.gradients);
        row("optimizer", b.optimizer, m.optimizer);
        row("activations", b.activations, m.activations);
        row("logits", b.logits, m.logits);
        row("blas_workspaces_and_other", b.blasWorkspaces, m.blasWorkspaces);
        row("peak_allocated", e.peakAllocatedBytes, measured.peakAllocatedBytes);
        out.insert(QStringLiteral("estimate"), QJsonObject {{QStringLiteral("peak_allocated_bytes"), static_cast<double>(e.peakAllocatedBytes)},
                                                            {QStringLiteral("peak_phase"), QString::fromStdString(e.peakPhase)},
                                                            {QStringLiteral("breakdown"), toJson(e.breakdown)}});
        out.insert(QStringLiteral("comparison"), rows);
    } catch (const std::exception &error) {
        out.insert(QStringLiteral("estimate_error"), QString::fromUtf8(error.what()));
    }
    return out;
}

} // namespace pb
