// pilotbench-cli scale-worker: one rank of a data-parallel pilot. `scale` starts one per GPU (or
// CPU share); torchrun, srun wrappers or mpirun scripts can start it across machines with the
// usual MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK.
#include "engine/DevicePeak.h"
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "workflow/ScaleRun.h"
#include "dist/CpuBinding.h"
#include "dist/DistributedPilot.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QJsonDocument>

#include <sys/prctl.h>
#include <csignal>
#include <unistd.h>

namespace pb::cli {

namespace {

// A worker started by `scale` dies with its launcher (SIGKILL on the parent's death), so even a
// launcher killed with SIGKILL leaves no rank behind.
void bindLifetimeToLauncher()
{
    const QString launcher = qEnvironmentVariable(kScaleLauncherPidVariable);
    if (launcher.isEmpty())
        return;
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (QString::number(::getppid()) != launcher) // the launcher died before the line above
        std::_Exit(static_cast<int>(ExitCode::Failure));
}

void writeJsonFile(const QString &path, const QJsonObject &json)
{
    writeFileAtomically(path, QJsonDocument(json).toJson(QJsonDocument::Indented));
}

int runScaleWorker(CliContext &ctx)
{
    bindLifetimeToLauncher();
    QCommandLineParser parser;
    addPilotOptions(parser);
    parser.addOptions({
        {QStringLiteral("result"), QStringLiteral("Write this rank's result JSON here (default: stdout)."), QStringLiteral("file")},
        {QStringLiteral("strategy"), QStringLiteral("ddp (default), zero2 or fsdp."), QStringLiteral("name"), QStringLiteral("ddp")},
        {QStringLiteral("cpus"), QStringLiteral("Bind this rank to these CPUs, e.g. 0-7."), QStringLiteral("list")},
        {QStringLiteral("no-overlap"), QStringLiteral("ddp: all-reduce after the backward pass instead of during it.")},
        {QStringLiteral("bucket-mb"), QStringLiteral("Gradient buckets of about this many MiB (default 25)."), QStringLiteral("MiB"), QStringLiteral("25")},
        {QStringLiteral("dump-parameters"), QStringLiteral("Write the final parameters as float32 here."), QStringLiteral("file")},
        {QStringLiteral("timeout"), QStringLiteral("Rendezvous and collective timeout in seconds (default 600)."), QStringLiteral("s"), QStringLiteral("600")},
        {QStringLiteral("baseline-run"), QStringLiteral("Under torchrun/srun: the recorded one-process pilot of this config at the ranks' effective batch, for the scaling efficiency."),
         QStringLiteral("id")},
    });
    if (!parseArgs(parser, ctx, QStringLiteral("One rank of a data-parallel pilot. Reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK.\n"
                                               "Under torchrun or srun rank 0 records the step in the history (--db) as a scale run.\n"
                                               "Each rank logs to a file of its own beside the main log: pilotbench.rank<RANK>.log.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    if (parser.isSet(QStringLiteral("cpus"))) // before LibTorch starts its threads, which inherit it
        bindToCpus(parseCpuList(parser.value(QStringLiteral("cpus")).toStdString(), "--cpus"));
    const RunConfig config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    DistributedPilotOptions dist;
    dist.rendezvous = rendezvousFromEnvironment();
    dist.strategy = parser.value(QStringLiteral("strategy")).toStdString();
    dist.overlap = !parser.isSet(QStringLiteral("no-overlap"));
    dist.bucketBytes = static_cast<int64_t>(intOptionAtLeast(parser, QStringLiteral("bucket-mb"), 1)) << 20;
    dist.timeoutSeconds = intOptionAtLeast(parser, QStringLiteral("timeout"), 1);
    dist.parameterDumpPath = parser.value(QStringLiteral("dump-parameters")).toStdString();
    refuseHistoryFile(parser.value(QStringLiteral("dump-parameters")), "--dump-parameters");
    PilotOptions options = pilotOptionsFrom(parser);
    if (options.device == "cuda")
        options.device = "cuda:" + std::to_string(dist.rendezvous.localRank);
    options.devicePeakFlops = catalogPeakFlops(options.device);
    options.parameterChecksum = true;
    installInterruptHandler();
    options.cancel = &interruptFlag();

    // Started by `scale`, the launcher records; under torchrun or srun, rank 0 does.
    const bool launchedByScale = !qEnvironmentVariable(kScaleLauncherPidVariable).isEmpty();
    std::optional<int64_t> baselineRun;
    if (parser.isSet(QStringLiteral("baseline-run")))
        baselineRun = intOptionAtLeast(parser, QStringLiteral("baseline-run"), 1);
    const DistributedPilotResult result = launchedByScale ? runDistributedPilot(config, options, dist)
                                                          : runLaunchedRank(config, options, dist, databaseFrom(parser), baselineRun);
    const QJsonObject json = toJson(result);
    if (parser.isSet(QStringLiteral("result")))
        writeJsonFile(parser.value(QStringLiteral("result")), json);
    else
        printJson(ctx, json, true);
    if (result.run.summary.verdict != Verdict::Fits)
        ctx.err << "rank " << dist.rendezvous.rank << ' ' << toString(result.run.summary.verdict) << ": " << QString::fromStdString(result.run.summary.message) << '\n';
    return exitCodeFor(result.run.summary.verdict);
}

const CliRegistration workerRegistration({QStringLiteral("scale-worker"), QStringLiteral("(internal) one rank of scale; also runs under torchrun/srun"),
                                          &runScaleWorker});

} // namespace
} // namespace pb::cli
