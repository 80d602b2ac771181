// pilotbench-cli pilot: the single-device pilot, recorded in the history.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "checkpoint/CheckpointManifest.h"
#include "config/RunConfigJson.h"

#include <QJsonDocument>
#include "util/FileRules.h"
#include "util/Units.h"
#include "workflow/MemorySnapshot.h"
#include "workflow/PilotMemoryCheck.h"
#include "workflow/PilotRecorder.h"
#include "workflow/RunRecording.h"

namespace pb::cli {
namespace {

int runPilot(CliContext &ctx)
{
    QCommandLineParser parser;
    addPilotOptions(parser);
    parser.addOption({QStringLiteral("memory-snapshot"),
                      QStringLiteral("Write where the memory was at the peak (one warm-up step's allocations by part and site, beside the estimate) to this JSON file."),
                      QStringLiteral("file")});
    if (!parseArgs(parser, ctx, QStringLiteral("Run a staged pilot: warm-up, then measured training steps with memory and timing probes.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    const RunConfig config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    PilotOptions options = pilotOptionsFrom(parser);
    if (!options.resumeFrom.empty()) { // a bad checkpoint is bad input, refused before a run is recorded
        options.resumeFrom = verifyResumePoint(QString::fromStdString(options.resumeFrom), configHash(config)).path.toStdString();
        options.resumeVerified = true;
    }
    const QString database = databaseFrom(parser);
    const QString snapshotPath = parser.value(QStringLiteral("memory-snapshot"));
    if (parser.isSet(QStringLiteral("memory-snapshot")))
        checkOutputPath(snapshotPath, databasePaths(database) << ProtectedPath {parser.value(QStringLiteral("config")), QStringLiteral("the config")}, "--memory-snapshot");
    const bool jsonl = parser.isSet(QStringLiteral("jsonl"));
    // A run that cannot fit allocates until the device (or the host, on CPU) refuses: say so first.
    const PilotMemoryCheck memory = checkPilotMemory(config, options);
    if (memory.exceeds()) {
        ctx.err << "warning: the estimated peak of this run is " << formatBytes(*memory.estimateBytes) << " but " << QString::fromStdString(options.device) << " has "
                << formatBytes(memory.capacityBytes) << (memory.fromMemoryLimit ? " (--memory-limit)" : options.device == "cpu" ? " available" : "")
                << ": it will most likely run out of memory\n";
        ctx.err.flush(); // said now, not when a model of many GiB has been built
    }
    keepToHostMemory(options, memory);

    installInterruptHandler();
    options.cancel = &interruptFlag();
    HistoryWriter writer(database);
    PilotPrinter printer(ctx.out, ctx.err, jsonl, options.warmupSteps + options.steps);
    PilotRecorder recorder(writer, &printer, &interruptFlag());
    recorder.setRecordsCalibration(true);
    const int64_t runId = recorder.begin(config, options);
    printer.setRunId(runId);
    PilotEngine engine;
    PilotRun run = guardRun(writer, runId, [&] { return engine.run(config, options, &recorder); });
    if (!recorder.historyError().empty()) {
        run.summary.verdict = Verdict::Failed;
        run.summary.message = recorder.historyError();
    }
    recorder.finish(run);
    printer.printSummary(run, runId, database, recorder.settleUnrecorded(run, database));
    if (!snapshotPath.isEmpty()) {
        if (!run.summary.memoryAttribution) {
            ctx.err << "--memory-snapshot: nothing written: the pilot stopped before the step whose peak it attributes\n";
            return run.summary.verdict == Verdict::Fits ? 1 : exitCodeFor(run.summary.verdict);
        }
        const QJsonObject snapshot = memorySnapshotJson(config, run.environment, *run.summary.memoryAttribution, run.summary.peakAllocatedByPhase);
        writeFileAtomically(snapshotPath, QJsonDocument(snapshot).toJson());
        if (!jsonl)
            printer.printMemorySnapshot(snapshot, snapshotPath);
    }
    if (run.summary.verdict != Verdict::Fits && !jsonl)
        ctx.err << "pilot " << toString(run.summary.verdict) << ": " << QString::fromStdString(run.summary.message) << '\n';
    return exitCodeFor(run.summary.verdict);
}

const CliRegistration registration({QStringLiteral("pilot"), QStringLiteral("Run a single-device pilot (warm-up, measured steps, probes)"), &runPilot});

} // namespace
} // namespace pb::cli
