#pragma once
// How `pilot` (and the commands built on it) show a run: one JSON object per line with --jsonl,
// otherwise a progress bar on stderr and a readable summary.
#include "engine/PilotEngine.h"

#include <QJsonObject>
#include <QTextStream>

#include <atomic>

namespace pb::cli {

class PilotPrinter final : public PilotObserver {
public:
    PilotPrinter(QTextStream &out, QTextStream &err, bool jsonl, int64_t totalSteps);
    void event(const QString &name, QJsonObject fields);
    void phaseStarted(Phase phase, int64_t step) override;
    void stepFinished(const StepSample &sample) override;
    void validationFinished(const ValidationResult &result) override;
    void checkpointWritten(const CheckpointWrite &write) override;
    void printSummary(const PilotRun &run, int64_t runId, const QString &database);

private:
    QTextStream &m_out;
    QTextStream &m_err;
    bool m_jsonl;
    int64_t m_total;
    int64_t m_done = 0;
};

// Ctrl-C sets this flag (the engine stops within one micro-batch); a second Ctrl-C kills.
std::atomic<bool> &interruptFlag();
void installInterruptHandler();
int exitCodeFor(Verdict verdict);
QString formatBytes(double bytes);

} // namespace pb::cli
