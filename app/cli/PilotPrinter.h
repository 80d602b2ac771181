#pragma once
// How `pilot` (and the commands built on it) show a run: one JSON object per line with --jsonl,
// otherwise a progress bar on stderr and a readable summary.
#include "engine/PilotEngine.h"
#include "util/Units.h" // formatBytes, for the commands that print a run

#include <QJsonObject>
#include <QTextStream>

#include <atomic>

namespace pb::cli {

// One JSON line: `fields` with "event": name, "time" (ISO 8601 UTC, milliseconds) and, when
// runId > 0 and `fields` name none, "run_id".
void printEvent(QTextStream &out, const QString &name, QJsonObject fields, int64_t runId = 0);

class PilotPrinter final : public PilotObserver {
public:
    PilotPrinter(QTextStream &out, QTextStream &err, bool jsonl, int64_t totalSteps);
    // The history run the events that follow belong to, once it is recorded (0: none yet).
    void setRunId(int64_t runId) { m_runId = runId; }
    void event(const QString &name, QJsonObject fields);
    void phaseStarted(Phase phase, int64_t step) override;
    void stepFinished(const StepSample &sample) override;
    void validationFinished(const ValidationResult &result) override;
    void checkpointWritten(const CheckpointWrite &write) override;
    void printSummary(const PilotRun &run, int64_t runId, const QString &database);
    // The --memory-snapshot file's comparison, part by part (workflow/MemorySnapshot).
    void printMemorySnapshot(const QJsonObject &snapshot, const QString &path);

private:
    QTextStream &m_out;
    QTextStream &m_err;
    bool m_jsonl;
    int64_t m_total;
    int64_t m_done = 0;
    int64_t m_runId = 0;
};

// Ctrl-C sets this flag (the engine stops within one micro-batch); a second Ctrl-C kills.
std::atomic<bool> &interruptFlag();
void installInterruptHandler();
int exitCodeFor(Verdict verdict);

} // namespace pb::cli
