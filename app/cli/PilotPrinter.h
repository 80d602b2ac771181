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
    // `unrecorded`: printed instead of "recorded as run N" (PilotRecorder::settleUnrecorded).
    void printSummary(const PilotRun &run, int64_t runId, const QString &database, const QString &unrecorded = {});
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

// Ctrl-C (SIGINT, SIGTERM, SIGHUP) sets interruptFlag (the engine stops within one micro-batch, a
// watched job gets SIGTERM); the second sets secondInterruptFlag (watch kills the job's tree at
// once); the `exitAfter`-th exits with 130 at once. watch asks for 3, so that a second Ctrl-C
// still stops and records its job before it exits.
std::atomic<bool> &interruptFlag();
std::atomic<bool> &secondInterruptFlag();
void installInterruptHandler(int exitAfter = 2);
// The handler for `command` as main() installs it before anything else, so that a signal while a
// run command starts up cancels it instead of killing it; other commands keep the default.
void installEarlyInterruptHandler(const char *command);
int exitCodeFor(Verdict verdict);

} // namespace pb::cli
