#pragma once
// Evidence kept beside the runs: the measured-vs-predicted residuals that calibrate the estimator.
// (Restore proofs and decisions are runs with their summaries.) Free functions over a HistoryStore
// (same thread rule as the store).
#include <QDateTime>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;
namespace history { class Connection; }

// One pilot's residual as stored; the estimator's own pb::CalibrationResidual is built from it.
struct CalibrationRecord {
    int64_t id = 0;
    std::optional<int64_t> runId;
    QDateTime createdAt;
    QString backend;                 // "cuda", "rocm", "cpu"
    QString torchVersion;
    QString device;
    std::string configHash;
    int64_t predictedPeakBytes = 0;
    int64_t measuredPeakBytes = 0;
    std::optional<int64_t> frameworkBytes; // peak device used minus peak reserved; unset: unknown
};

int64_t addCalibrationResidual(HistoryStore &store, const CalibrationRecord &residual);
// Empty filters match all; oldest first (the order they were measured).
std::vector<CalibrationRecord> calibrationResiduals(const HistoryStore &store, const QString &backend = {}, const QString &device = {});

namespace history {
// The insert behind addCalibrationResidual, for the writer thread's own connection (no run check).
void insertCalibrationRecord(const Connection &connection, const CalibrationRecord &residual);
} // namespace history

} // namespace pb
