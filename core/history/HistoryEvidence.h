#pragma once
// The other evidence a decision rests on, kept beside the runs: memory estimates with their
// breakdowns, the measured-vs-predicted residuals that calibrate the estimator, restore proofs,
// the catalog snapshot a decision priced against, and pilot plans linking each stage to its run.
// Free functions over a HistoryStore (same thread rule as the store).
#include <QDateTime>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;
namespace history { class Connection; }

struct EstimateRecord {
    int64_t id = 0;
    std::optional<int64_t> runId;
    QDateTime createdAt;             // invalid: now
    std::string configHash;
    QString card;
    int gpus = 1;
    QString strategy;                // "single", "ddp", "fsdp", ...
    QJsonObject breakdown;           // the estimator's per-component bytes
    int64_t totalBytes = 0;
};

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

struct RestoreRecord {
    int64_t id = 0;
    std::optional<int64_t> runId;
    QDateTime createdAt;
    bool passed = false;
    QJsonObject result;
};

struct CatalogSnapshot {
    int64_t id = 0;
    std::optional<int64_t> runId;    // the decision that used it
    QDateTime takenAt;
    QString catalogDate;             // the catalog's own date
    QJsonObject catalog;
};

struct PilotPlan {
    int64_t id = 0;
    QString name;
    QDateTime createdAt;
    std::map<QString, std::optional<int64_t>> stageRuns; // stage -> the run that satisfies it (none yet)
};

int64_t addEstimate(HistoryStore &store, const EstimateRecord &estimate);
// Empty configHash: all, newest first.
std::vector<EstimateRecord> estimates(const HistoryStore &store, const std::string &configHash = {});

int64_t addCalibrationResidual(HistoryStore &store, const CalibrationRecord &residual);
// Empty filters match all; oldest first (the order they were measured).
std::vector<CalibrationRecord> calibrationResiduals(const HistoryStore &store, const QString &backend = {}, const QString &device = {});

int64_t addRestoreResult(HistoryStore &store, const RestoreRecord &record);
std::vector<RestoreRecord> restoreResults(const HistoryStore &store, int64_t runId);

int64_t addCatalogSnapshot(HistoryStore &store, const CatalogSnapshot &snapshot);
// Throws InvalidInputError for an unknown id.
CatalogSnapshot catalogSnapshot(const HistoryStore &store, int64_t id);

int64_t createPlan(HistoryStore &store, const QString &name, const QStringList &stages);
// Throws InvalidInputError for an unknown plan, stage or run.
void setPlanStageRun(HistoryStore &store, int64_t planId, const QString &stage, int64_t runId);
PilotPlan plan(const HistoryStore &store, int64_t planId);

namespace history {
// The insert behind addCalibrationResidual, for the writer thread's own connection (no run check).
void insertCalibrationRecord(const Connection &connection, const CalibrationRecord &residual);
} // namespace history

} // namespace pb
