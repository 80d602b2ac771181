#include "workflow/MemorySnapshot.h"

#include "config/RunConfigJson.h"
#include "estimate/MemoryBreakdownJson.h"
#include "workflow/PilotCalibration.h"

#include <QJsonArray>

namespace pb {

QJsonObject memorySnapshotJson(const RunConfig &config, const Environment &env, const MemoryAttribution &measured,
                               const std::map<std::string, int64_t> &measuredByPhase)
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
        QJsonArray savedPerBlock;
        for (const int64_t bytes : e.savedPerBlock)
            savedPerBlock.append(static_cast<double>(bytes));
        out.insert(QStringLiteral("estimate"), QJsonObject {{QStringLiteral("peak_allocated_bytes"), static_cast<double>(e.peakAllocatedBytes)},
                                                            {QStringLiteral("peak_phase"), QString::fromStdString(e.peakPhase)},
                                                            {QStringLiteral("breakdown"), toJson(e.breakdown)},
                                                            {QStringLiteral("saved_per_block"), savedPerBlock}});
        out.insert(QStringLiteral("comparison"), rows);

        // The run phase by phase: the pilot's phases (setup, warmup, train, validation, checkpoint)
        // against the estimator's (construction, the step's forward/backward/optimizer, ...).
        std::map<std::string, int64_t> estimated;
        for (const PhasePeak &p : e.phases) {
            const bool step = p.phase == "forward" || p.phase == "backward" || p.phase == "optimizer";
            int64_t &slot = estimated[step ? "training steps" : p.phase];
            slot = std::max(slot, p.breakdown.tensors());
        }
        std::map<std::string, int64_t> got;
        for (const auto &[phase, bytes] : measuredByPhase) {
            const std::string name = phase == "setup" ? "construction" : phase == "warmup" || phase == "train" ? "training steps" : phase;
            got[name] = std::max(got[name], bytes);
        }
        QJsonArray phases;
        int64_t runPeak = 0;
        for (const char *name : {"construction", "training steps", "validation", "checkpoint"}) {
            const auto est = estimated.find(name);
            const auto meas = got.find(name);
            if (est == estimated.end() && meas == got.end())
                continue;
            QJsonObject o {{QStringLiteral("phase"), QLatin1String(name)}};
            if (est != estimated.end())
                o.insert(QStringLiteral("estimated_bytes"), static_cast<double>(est->second));
            if (meas != got.end()) {
                o.insert(QStringLiteral("measured_bytes"), static_cast<double>(meas->second));
                runPeak = std::max(runPeak, meas->second);
            }
            if (est != estimated.end() && meas != got.end() && meas->second > 0)
                o.insert(QStringLiteral("difference_percent"), 100.0 * static_cast<double>(est->second - meas->second) / static_cast<double>(meas->second));
            phases.append(o);
        }
        out.insert(QStringLiteral("phases"), phases);
        if (runPeak > 0)
            out.insert(QStringLiteral("run_peak"), QJsonObject {{QStringLiteral("estimated_bytes"), static_cast<double>(e.peakAllocatedBytes)},
                                                                {QStringLiteral("measured_bytes"), static_cast<double>(runPeak)},
                                                                {QStringLiteral("difference_percent"), 100.0 * static_cast<double>(e.peakAllocatedBytes - runPeak) / static_cast<double>(runPeak)}});
    } catch (const std::exception &error) {
        out.insert(QStringLiteral("estimate_error"), QString::fromUtf8(error.what()));
    }
    return out;
}

} // namespace pb
