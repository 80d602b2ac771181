#include "workflow/RestoreCheckRun.h"

#include "config/RunConfigJson.h"
#include "engine/Environment.h"
#include "history/HistoryWriter.h"
#include "workflow/RunRecording.h"
#include "util/Errors.h"

namespace pb {

RecordedRestoreCheck runRecordedRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options, const QString &databasePath)
{
    const Environment environment = captureEnvironment(options.device);
    requireRunsHere(config, environment); // as a pilot: before a run is recorded
    HistoryWriter writer(databasePath);
    RunStart start = runStartFor(config, QStringLiteral("restore-check"), options.device);
    start.environmentJson = toJson(environment);
    RecordedRestoreCheck out;
    out.runId = writer.beginRun(start);
    out.result = guardRun(writer, out.runId, [&] { return runRestoreCheck(config, options); });
    PilotSummary summary;
    summary.verdict = out.result.pass ? Verdict::Fits : Verdict::Failed;
    summary.message = out.result.message;
    summary.checkpointWriteMs = out.result.checkpointWriteMs;
    summary.checkpointBytes = out.result.checkpointBytes;
    out.json = toJson(out.result);
    out.json.insert(QStringLiteral("run_id"), static_cast<double>(out.runId));
    if (!writer.finishRun(out.runId, summary, out.json) || !writer.flush())
        throw PilotBenchError(ExitCode::Failure, "the restore check ran but could not be recorded: " + writer.lastError());
    return out;
}

} // namespace pb
