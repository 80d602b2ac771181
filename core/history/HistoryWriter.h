#pragma once
// Records a running pilot without ever making it wait on the disk: the engine's calls only append to
// an in-memory queue; a thread with its own connection drains it in one transaction per batch, at
// most every batchIntervalMs (so a crash loses at most that much) or sooner when many items wait.
// A lock held by another process is waited for, within Options::lockWaitMs, and reported in the log.
// A write failure (a full disk, a lock held past that bound) stops the writer: later appends are refused, and the
// message goes to the error callback and lastError() so the engine can stop the run cleanly.
#include "result/PilotTypes.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryTypes.h"

#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace pb {

// 60 s, or $PILOTBENCH_HISTORY_LOCK_WAIT_S (whole seconds, 0 to 86400) when set; an invalid value is
// logged and the default used.
int defaultHistoryLockWaitMs();

class HistoryWriter final {
public:
    struct Options {
        int batchIntervalMs = 150;
        size_t batchMaxItems = 65536;   // wake the thread early once this many wait
        int64_t maxPageCount = 0;       // > 0: PRAGMA max_page_count (tests simulate a full disk with it)
        // How long a batch waits, in all, for a lock another process holds on the history before the
        // writer fails (each attempt waits out the busy timeout first). The wait and its end are logged.
        // Default: $PILOTBENCH_HISTORY_LOCK_WAIT_S seconds when set, else 60 s.
        int lockWaitMs = defaultHistoryLockWaitMs();
    };
    using ErrorCallback = std::function<void(const std::string &message)>;

    // Opens `path` on the writer thread (same checks and migration as HistoryStore) and waits for the
    // outcome: throws InvalidInputError / PilotBenchError when the file cannot be used.
    explicit HistoryWriter(const QString &path);
    HistoryWriter(const QString &path, Options options);
    // Drains everything queued, commits and joins the thread.
    ~HistoryWriter();
    Q_DISABLE_COPY_MOVE(HistoryWriter)

    // Inserts the run row and returns its id. Blocks until the writer has committed it together with
    // whatever was queued before (a batch, milliseconds). Throws PilotBenchError when the writer failed
    // and InvalidInputError for an unknown kind.
    int64_t beginRun(const RunStart &start);
    // Never block on the disk. Return false once the writer has failed (nothing more is recorded).
    bool appendSample(int64_t runId, const StepSample &sample);
    bool appendPhase(int64_t runId, const PhaseMark &mark);
    bool appendValidation(int64_t runId, const ValidationResult &result);
    bool appendCheckpoint(int64_t runId, const CheckpointWrite &write);
    // Marks the run done with its verdict; `summaryJson` empty: the summary's own JSON is stored.
    // Once the writer has failed, returns false after one attempt on a fresh connection to mark the
    // run failed with the writer's error (history::finishRunLate), so no run is left running that a
    // command reported as not recorded.
    bool finishRun(int64_t runId, const PilotSummary &summary, const QJsonObject &summaryJson = {});
    // A finished pilot's residual against its estimate; written after the batch's run rows, so it may
    // follow finishRun for the same run.
    bool appendCalibration(const CalibrationRecord &record);
    // Waits until everything queued so far is committed. False when the writer has failed.
    bool flush();

    bool failed() const;
    std::string lastError() const;
    // Called once, on the writer thread, when a write fails.
    void setErrorCallback(ErrorCallback callback);

    struct Impl;

private:
    std::unique_ptr<Impl> d;
};

} // namespace pb
