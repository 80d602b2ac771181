#include "workflow/CheckpointThroughput.h"

#include "history/HistoryStore.h"

#include <cmath>

namespace pb {

double bytesPerSecond(double bytes, double ms)
{
    if (!std::isfinite(bytes) || !std::isfinite(ms) || bytes <= 0 || ms <= 0)
        return 0.0;
    return bytes / (ms / 1000.0);
}

double checkpointWriteBytesPerSecond(const std::vector<CheckpointWrite> &writes)
{
    double bytes = 0, ms = 0;
    for (const auto &w : writes) {
        // A row without a size or a time says nothing about the rate; it must not dilute the others.
        if (w.bytes > 0 && w.writeMs > 0) {
            bytes += static_cast<double>(w.bytes);
            ms += w.writeMs;
        }
    }
    return bytesPerSecond(bytes, ms);
}

RestoreCheckThroughput restoreCheckThroughput(const RunRecord &run)
{
    const QJsonObject &s = run.summary;
    RestoreCheckThroughput t;
    t.runId = run.id;
    t.checkpointBytes = static_cast<int64_t>(s.value(QStringLiteral("checkpoint_bytes")).toDouble());
    const double bytes = static_cast<double>(t.checkpointBytes);
    t.writeBytesPerSecond = bytesPerSecond(bytes, s.value(QStringLiteral("checkpoint_write_ms")).toDouble());
    t.verifyBytesPerSecond = bytesPerSecond(bytes, s.value(QStringLiteral("verify_ms")).toDouble());
    t.restoreBytesPerSecond = bytesPerSecond(bytes, s.value(QStringLiteral("restore_ms")).toDouble());
    return t;
}

std::optional<RestoreCheckThroughput> newestRestoreCheckThroughput(const HistoryStore &store, const std::string &configHash)
{
    RunFilter filter;
    filter.kind = QStringLiteral("restore-check");
    filter.status = QStringLiteral("done");
    for (const auto &run : store.listRuns(filter)) { // newest first
        if (run.configHash != configHash)
            continue;
        const RestoreCheckThroughput t = restoreCheckThroughput(run);
        if (t.verifyBytesPerSecond > 0 || t.restoreBytesPerSecond > 0)
            return t;
    }
    return std::nullopt;
}

} // namespace pb
