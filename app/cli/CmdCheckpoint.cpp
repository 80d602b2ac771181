// pilotbench-cli restore-check and checkpoint verify: the restoration proof and the manifest check.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "checkpoint/CheckpointManifest.h"
#include "history/HistoryStore.h"
#include "workflow/RestoreCheckRun.h"
#include "workflow/WatchedEvidence.h"
#include "config/RunConfigJson.h"
#include "util/AppPaths.h"
#include "util/Errors.h"

#include <QCoreApplication>
#include <QDir>
#include <QJsonArray>
#include <QThread>

#include <algorithm>

namespace pb::cli {
namespace {

// The proof from the user's own job: two watched runs already in the history.
int watchedRestoreCheck(CliContext &ctx, const QCommandLineParser &parser)
{
    auto id = [&](const QString &name) {
        bool ok = false;
        const qlonglong v = parser.value(name).toLongLong(&ok);
        if (!parser.isSet(name) || !ok || v < 1)
            throw InvalidInputError("--" + name.toStdString(), "needs a run id (both --uninterrupted-run and --resumed-run; see 'history --kind watch')");
        return static_cast<int64_t>(v);
    };
    bool ok = false;
    const double tolerance = parser.value(QStringLiteral("loss-tolerance")).toDouble(&ok);
    if (!ok)
        throw InvalidInputError("--loss-tolerance", "must be a number >= 0");
    const QString database = databaseFrom(parser);
    std::vector<int64_t> references;
    for (const QString &v : parser.values(QStringLiteral("reference-run"))) {
        const qlonglong ref = v.toLongLong(&ok);
        if (!ok || ref < 1)
            throw InvalidInputError("--reference-run", "'" + v.toStdString() + "' is not a run id");
        references.push_back(ref);
    }
    const double margin = parser.value(QStringLiteral("envelope-margin")).toDouble(&ok);
    if (!ok)
        throw InvalidInputError("--envelope-margin", "'" + parser.value(QStringLiteral("envelope-margin")).toStdString() + "' is not a number");
    const WatchedRestore w = compareWatchedRestore(HistoryStore(database), id(QStringLiteral("uninterrupted-run")), id(QStringLiteral("resumed-run")), tolerance,
                                                   references, margin);
    const int64_t runId = recordWatchedRestore(database, w);
    QJsonObject json = w.toJson();
    json.insert(QStringLiteral("run_id"), static_cast<double>(runId));
    if (parser.isSet(QStringLiteral("jsonl"))) {
        printEvent(ctx.out, QStringLiteral("summary"), json);
    } else {
        ctx.out << "restore check (watched runs): " << (w.pass ? "PASS" : "FAIL") << " (" << QString::fromStdString(w.message) << ")\nrecorded as run " << runId
                << " in " << database << '\n';
    }
    return w.pass ? 0 : static_cast<int>(ExitCode::Failure);
}

int runRestoreCheckCommand(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("config"), QStringLiteral("Run config: a JSON file or preset:NAME."), QStringLiteral("file")},
        {QStringLiteral("set"), QStringLiteral("Override a config field (repeatable)."), QStringLiteral("path=value")},
        {QStringLiteral("device"), QStringLiteral("cpu or cuda:N (default cpu); with --gpus above 1, cpu or cuda."), QStringLiteral("device"), QStringLiteral("cpu")},
        {QStringLiteral("gpus"), QStringLiteral("Ranks (default 1). Above 1: a sharded checkpoint of --strategy, restored in as many fresh processes."), QStringLiteral("n"),
         QStringLiteral("1")},
        {QStringLiteral("strategy"), QStringLiteral("With --gpus: ddp (default), zero2 or fsdp."), QStringLiteral("name"), QStringLiteral("ddp")},
        {QStringLiteral("threads"), QStringLiteral("With --gpus on cpu: threads per rank (default: the cores shared out)."), QStringLiteral("n")},
        {QStringLiteral("timeout"), QStringLiteral("With --gpus: seconds each launch of the ranks may take (default 1800)."), QStringLiteral("s"), QStringLiteral("1800")},
        {QStringLiteral("steps-before"), QStringLiteral("Steps before the checkpoint, K (default 4)."), QStringLiteral("k"), QStringLiteral("4")},
        {QStringLiteral("steps-after"), QStringLiteral("Steps after the restore, M (default 4)."), QStringLiteral("m"), QStringLiteral("4")},
        {QStringLiteral("checkpoint-dir"), QStringLiteral("Working folder for the checkpoint (default: the data folder)."), QStringLiteral("dir")},
        {QStringLiteral("db"), QStringLiteral("History database."), QStringLiteral("file")},
        {QStringLiteral("jsonl"), QStringLiteral("Print the summary event as one JSON line.")},
        {QStringLiteral("drop-state"), QStringLiteral("Proof of the proof: the fresh process leaves this piece unrestored."), QStringLiteral("piece")},
        {QStringLiteral("uninterrupted-run"), QStringLiteral("Your own job instead: a watched run that ran uninterrupted..."), QStringLiteral("id")},
        {QStringLiteral("resumed-run"), QStringLiteral("...and a watched run of it that resumed from its own checkpoint; their losses are compared."), QStringLiteral("id")},
        {QStringLiteral("loss-tolerance"), QStringLiteral("With the watched runs: the largest |loss difference| that passes (default 0: bitwise)."), QStringLiteral("x"), QStringLiteral("0")},
        {QStringLiteral("reference-runs"), QStringLiteral("At most this many more uninterrupted runs, which measure the kernels' run-to-run variation (default 2; the first that reproduces the run bit for bit ends them)."), QStringLiteral("n")},
        {QStringLiteral("reference-run"), QStringLiteral("With the watched runs: another uninterrupted watched run of the job (repeatable), the kernels' run-to-run variation."),
         QStringLiteral("id")},
        {QStringLiteral("envelope-margin"), QStringLiteral("Where the kernels vary run to run: the continuation passes within this many times their variation (default 4)."),
         QStringLiteral("x"), QStringLiteral("4")},
    });
    for (const char *name : {"test-jitter-ulps", "test-resume-jitter-ulps"}) {
        QCommandLineOption o(QString::fromLatin1(name), QStringLiteral("Proof tests: every run (or the fresh process) moves by up to N ulps per step."), QStringLiteral("n"));
        o.setFlags(QCommandLineOption::HiddenFromHelp);
        parser.addOption(o);
    }
    if (!parseArgs(parser, ctx, QStringLiteral("Prove that a checkpoint restores exactly in a fresh process.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    if (parser.isSet(QStringLiteral("uninterrupted-run")) || parser.isSet(QStringLiteral("resumed-run")))
        return watchedRestoreCheck(ctx, parser);
    const RunConfig config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    RestoreCheckOptions options;
    options.device = parser.value(QStringLiteral("device")).toStdString();
    bool okK = false, okM = false;
    options.stepsBefore = parser.value(QStringLiteral("steps-before")).toLongLong(&okK);
    options.stepsAfter = parser.value(QStringLiteral("steps-after")).toLongLong(&okM);
    if (!okK || options.stepsBefore < 1)
        throw InvalidInputError("--steps-before", "must be an integer >= 1");
    if (!okM || options.stepsAfter < 1)
        throw InvalidInputError("--steps-after", "must be an integer >= 1");
    auto integer = [&parser](const QString &name, int minimum) {
        bool ok = false;
        const int value = parser.value(name).toInt(&ok);
        if (!ok || value < minimum)
            throw InvalidInputError("--" + name.toStdString(), "'" + parser.value(name).toStdString() + "' must be an integer >= " + std::to_string(minimum));
        return value;
    };
    options.gpus = integer(QStringLiteral("gpus"), 1);
    options.strategy = parser.value(QStringLiteral("strategy")).toStdString();
    options.timeoutSeconds = integer(QStringLiteral("timeout"), 1);
    options.threadsPerRank = parser.isSet(QStringLiteral("threads")) ? integer(QStringLiteral("threads"), 1)
                                                                     : std::max(1, QThread::idealThreadCount() / std::max(options.gpus, 1));
    options.checkpointDir = parser.isSet(QStringLiteral("checkpoint-dir")) ? parser.value(QStringLiteral("checkpoint-dir"))
                                                                            : appDataDir() + QStringLiteral("/checkpoints");
    options.cliPath = QCoreApplication::applicationFilePath();
    options.dropState = parser.value(QStringLiteral("drop-state")).toStdString();
    if (parser.isSet(QStringLiteral("reference-runs")))
        options.referenceRuns = integer(QStringLiteral("reference-runs"), 1);
    bool okMargin = false;
    options.envelopeMargin = parser.value(QStringLiteral("envelope-margin")).toDouble(&okMargin);
    if (!okMargin)
        throw InvalidInputError("--envelope-margin", "'" + parser.value(QStringLiteral("envelope-margin")).toStdString() + "' is not a number");
    if (parser.isSet(QStringLiteral("test-jitter-ulps")))
        options.testJitterUlps = integer(QStringLiteral("test-jitter-ulps"), 0);
    if (parser.isSet(QStringLiteral("test-resume-jitter-ulps")))
        options.testResumeJitterUlps = integer(QStringLiteral("test-resume-jitter-ulps"), 0);
    checkRestoreCheckOptions(options);
    installInterruptHandler();
    options.cancel = &interruptFlag();

    const QString database = databaseFrom(parser);
    const RecordedRestoreCheck recorded = runRecordedRestoreCheck(config, options, database);
    const RestoreCheckResult &result = recorded.result;
    const int64_t runId = recorded.runId;
    QJsonObject json = recorded.json;

    if (parser.isSet(QStringLiteral("jsonl"))) {
        printEvent(ctx.out, QStringLiteral("summary"), json);
    } else {
        ctx.out << "restore check: " << (result.pass ? "PASS" : "FAIL") << " (" << QString::fromStdString(result.message) << ")\n"
                << "checked: ";
        for (size_t i = 0; i < result.checked.size(); ++i)
            ctx.out << (i ? ", " : "") << QString::fromStdString(result.checked[i]);
        ctx.out << "\nmax |loss difference|: " << result.maxAbsLossDiff;
        if (result.kind == "envelope")
            ctx.out << " (the kernels vary run to run: the widest pair of " << result.referenceRuns + 1 << " uninterrupted runs differed by up to "
                    << result.referenceMaxAbsLossDiff << " in loss and " << result.referenceParameterDistance << " in parameters; the continuation's parameter distance "
                    << result.parameterDistance << ", allowed " << result.envelopeMargin << "x)";
        else
            ctx.out << " (the kernels reproduce bit for bit: " << result.referenceRuns << " uninterrupted run(s) beside the first were identical)";
        ctx.out << "\ncheckpoint: " << formatBytes(result.checkpointBytes)
                << ", write " << QString::number(result.checkpointWriteMs, 'f', 1) << " ms, verify " << QString::number(result.verifyMs, 'f', 1)
                << " ms, restore " << QString::number(result.restoreMs, 'f', 1) << " ms, fresh process " << QString::number(result.freshProcessMs, 'f', 0)
                << " ms" << (result.gpus > 1 ? QStringLiteral(" (%1 ranks, %2)").arg(result.gpus).arg(QString::fromStdString(result.strategy)) : QString())
                << "\nrecorded as run " << runId << " in " << database << '\n';
    }
    return result.pass ? 0 : static_cast<int>(ExitCode::Failure);
}

int runCheckpointCommand(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addPositionalArgument(QStringLiteral("verify"), QStringLiteral("verify DIR: check a checkpoint's manifest (sizes and SHA-256) and its files to the letter of the format, against its config."));
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (!parseArgs(parser, ctx, QStringLiteral("Checkpoint tools.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    const QStringList args = parser.positionalArguments();
    if (args.size() != 2 || args[0] != QLatin1String("verify"))
        throw InvalidInputError("checkpoint", "usage: pilotbench-cli checkpoint verify DIR");
    const CheckpointInfo info = verifyCheckpoint(resolveCheckpointFolder(args[1]));
    if (parser.isSet(QStringLiteral("json"))) {
        QJsonArray files;
        for (const auto &f : info.files)
            files.append(QJsonObject {{QStringLiteral("file"), QString::fromStdString(f.file)}, {QStringLiteral("bytes"), static_cast<double>(f.bytes)},
                                      {QStringLiteral("sha256"), QString::fromStdString(f.sha256)}});
        printJson(ctx, QJsonObject {{QStringLiteral("path"), info.path}, {QStringLiteral("step"), static_cast<double>(info.step)},
                                    {QStringLiteral("valid"), true}, {QStringLiteral("total_bytes"), static_cast<double>(info.totalBytes)},
                                    {QStringLiteral("verify_ms"), info.verifyMs}, {QStringLiteral("files"), files}});
    } else {
        ctx.out << "valid: " << info.path << " (step " << info.step << ", " << info.files.size() << " files, " << formatBytes(info.totalBytes)
                << ", verified in " << QString::number(info.verifyMs, 'f', 1) << " ms)\n";
    }
    return 0;
}

const CliRegistration restoreRegistration({QStringLiteral("restore-check"), QStringLiteral("Prove a checkpoint restores exactly in a fresh process"), &runRestoreCheckCommand});
const CliRegistration checkpointRegistration({QStringLiteral("checkpoint"), QStringLiteral("Verify a checkpoint folder against its manifest"), &runCheckpointCommand});

} // namespace
} // namespace pb::cli
