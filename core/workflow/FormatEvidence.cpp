#include "workflow/FormatEvidence.h"

#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"

#include <vector>

namespace pb {
namespace {

std::string deviceNameOf(const RunRecord &run)
{
    const QJsonObject env = run.summary.value(QStringLiteral("environment")).toObject(run.environment);
    const QString name = env.value(QStringLiteral("device_name")).toString();
    return (name.isEmpty() ? run.device : name).toStdString();
}

// Of finished, fitting pilots with a measured throughput (newest first), those of `hash`.
std::vector<const RunRecord *> pilotsOf(const std::vector<RunRecord> &pilots, const std::string &hash)
{
    std::vector<const RunRecord *> out;
    for (const RunRecord &run : pilots)
        if (run.configHash == hash)
            out.push_back(&run);
    return out;
}

} // namespace

std::string FormatSpeedup::source() const
{
    return "pilots " + std::to_string(fp8RunId) + " (" + toString(fp8) + ") and " + std::to_string(bf16RunId) + " (bf16-mixed) on " + deviceName;
}

QJsonObject FormatSpeedup::toJson() const
{
    return {{QStringLiteral("precision"), QString::fromLatin1(toString(fp8))},
            {QStringLiteral("ratio"), ratio},
            {QStringLiteral("fp8_run_id"), static_cast<double>(fp8RunId)},
            {QStringLiteral("bf16_run_id"), static_cast<double>(bf16RunId)},
            {QStringLiteral("device"), QString::fromStdString(deviceName)},
            {QStringLiteral("fp8_tokens_per_s"), fp8TokensPerSecond},
            {QStringLiteral("bf16_tokens_per_s"), bf16TokensPerSecond}};
}

std::string runPrecision(const RunRecord &run)
{
    const QString p = run.config.value(QStringLiteral("train")).toObject().value(QStringLiteral("precision")).toString();
    return p.isEmpty() ? std::string(toString(Precision::Bf16Mixed)) : p.toStdString();
}

std::optional<FormatSpeedup> measuredFp8Speedup(const HistoryStore &store, const RunConfig &config, const std::string &deviceName)
{
    // One read of the history for both precisions.
    RunFilter filter;
    filter.kind = QStringLiteral("pilot");
    filter.verdict = QStringLiteral("fits");
    std::vector<RunRecord> pilots;
    for (auto &run : store.listRuns(filter))
        if (run.status == QLatin1String("done") && run.summary.value(QStringLiteral("tokens_per_s")).toDouble() > 0)
            pilots.push_back(std::move(run));
    RunConfig bf16 = config;
    bf16.train.precision = Precision::Bf16Mixed;
    const std::vector<const RunRecord *> bf16Runs = pilotsOf(pilots, configHash(bf16));
    if (bf16Runs.empty())
        return std::nullopt;
    const std::vector<Precision> kinds = isFp8(config.train.precision) ? std::vector<Precision> {config.train.precision}
                                                                       : std::vector<Precision> {Precision::Fp8Rowwise, Precision::Fp8Tensorwise};
    for (Precision kind : kinds) {
        RunConfig fp8 = config;
        fp8.train.precision = kind;
        for (const RunRecord *f : pilotsOf(pilots, configHash(fp8))) {
            const std::string device = deviceNameOf(*f);
            if (!deviceName.empty() && device != deviceName)
                continue;
            for (const RunRecord *b : bf16Runs) {
                if (deviceNameOf(*b) != device)
                    continue;
                FormatSpeedup s;
                s.fp8 = kind;
                s.fp8RunId = f->id;
                s.bf16RunId = b->id;
                s.deviceName = device;
                s.fp8TokensPerSecond = f->summary.value(QStringLiteral("tokens_per_s")).toDouble();
                s.bf16TokensPerSecond = b->summary.value(QStringLiteral("tokens_per_s")).toDouble();
                s.ratio = s.fp8TokensPerSecond / s.bf16TokensPerSecond;
                return s;
            }
        }
    }
    return std::nullopt;
}

} // namespace pb
