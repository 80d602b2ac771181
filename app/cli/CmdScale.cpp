// pilotbench-cli scale: one scaling step (core/workflow/ScaleRun): the single-process baseline at the
// ranks' effective batch, then N worker processes of this same binary (`scale-worker`, one per GPU
// or CPU share); this file parses the options and prints what the step reports.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "dist/DistributedPilot.h"
#include "engine/DevicePeak.h"
#include "engine/Environment.h"
#include "util/Errors.h"
#include "workflow/ScaleRun.h"

#include <QCoreApplication>
#include <QThread>

namespace pb::cli {
namespace {

struct ScaleSetup {
    ScaleRunSetup run;
    bool jsonl = false;
};

ScaleSetup scaleSetupFrom(const QCommandLineParser &parser)
{
    ScaleSetup out;
    ScaleRunSetup &s = out.run;
    s.config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    if (!parser.isSet(QStringLiteral("gpus")))
        throw InvalidInputError("--gpus", "is required: the number of ranks (GPUs, or CPU shares with --device cpu)");
    s.gpus = intOptionAtLeast(parser, QStringLiteral("gpus"), 1);
    const QString strategy = parser.value(QStringLiteral("strategy"));
    if (strategy == QLatin1String("zero3"))
        throw InvalidInputError("--strategy", "zero3 is fsdp here (parameters, gradients and optimizer state sharded, gathered per block): use --strategy fsdp");
    s.strategy = strategy.toStdString();
    checkStrategy(s.strategy, s.config);
    s.options = pilotOptionsFrom(parser);
    s.device = s.options.device;
    if (s.device != "cpu" && s.device != "cuda")
        throw InvalidInputError("--device", "'" + s.device + "': scale places rank r on cuda:r itself; use --device cuda or --device cpu");
    if (s.device == "cuda") {
        const int available = cudaDeviceCount();
        if (s.gpus > available)
            throw InvalidInputError("--gpus", std::to_string(s.gpus) + " ranks asked for, but this host has " + std::to_string(available) + " CUDA device(s)");
        s.options.device = "cuda:0";
        s.options.devicePeakFlops = catalogPeakFlops(s.options.device);
    } else {
        s.threadsPerRank = s.options.cpuThreads > 0 ? s.options.cpuThreads : std::max(1, QThread::idealThreadCount() / s.gpus);
        s.options.cpuThreads = s.threadsPerRank; // the baseline is one rank's share of the host
    }
    s.timeoutSeconds = intOptionAtLeast(parser, QStringLiteral("timeout"), 1);
    s.bind = !parser.isSet(QStringLiteral("no-bind"));
    s.overlap = !parser.isSet(QStringLiteral("no-overlap"));
    s.bucketMb = intOptionAtLeast(parser, QStringLiteral("bucket-mb"), 1);
    s.dumpDir = parser.value(QStringLiteral("dump-dir"));
    if (parser.isSet(QStringLiteral("baseline-run")))
        s.baselineRun = intOptionAtLeast(parser, QStringLiteral("baseline-run"), 1);
    s.database = databaseFrom(parser);
    s.workerProgram = QCoreApplication::applicationFilePath();
    out.jsonl = parser.isSet(QStringLiteral("jsonl"));
    return out;
}

// Milestones as JSON lines (--jsonl) or as lines on stderr; the baseline's steps as a progress bar.
class ScalePrinter final : public ScaleRunObserver {
public:
    ScalePrinter(CliContext &ctx, bool jsonl, int64_t baselineSteps) : m_ctx(ctx), m_jsonl(jsonl), m_printer(ctx.out, ctx.err, jsonl, baselineSteps) {}
    void note(const QString &name, const QJsonObject &fields, const QString &text) override
    {
        if (m_jsonl)
            m_printer.event(name, fields);
        // Errors reach stderr in both modes: the JSON line is for programs, the line for people.
        if ((!m_jsonl || name == QLatin1String("error")) && !text.isEmpty())
            m_ctx.err << text << '\n';
    }
    PilotObserver *baselineObserver() override { return &m_printer; }
    void runBegun(int64_t runId) override { m_printer.setRunId(runId); }

private:
    CliContext &m_ctx;
    bool m_jsonl;
    PilotPrinter m_printer;
};

QString formatPeaks(const std::vector<int64_t> &peaks)
{
    QString out;
    for (int64_t p : peaks)
        out += (out.isEmpty() ? QString() : QStringLiteral(", ")) + formatBytes(p);
    return out;
}

int runScale(CliContext &ctx)
{
    QCommandLineParser parser;
    addPilotOptions(parser);
    parser.addOptions({
        {QStringLiteral("gpus"), QStringLiteral("Ranks to run: GPUs with --device cuda, CPU shares with --device cpu."), QStringLiteral("n")},
        {QStringLiteral("strategy"), QStringLiteral("ddp (default), zero2 (optimizer state and gradients divided among the ranks) or fsdp (parameters too, gathered per block)."), QStringLiteral("name"),
         QStringLiteral("ddp")},
        {QStringLiteral("timeout"), QStringLiteral("End the step when the workers take longer, in seconds (default 900)."), QStringLiteral("s"), QStringLiteral("900")},
        {QStringLiteral("baseline-run"), QStringLiteral("Reuse this recorded baseline run (same config at the ranks' effective batch) instead of running one."),
         QStringLiteral("id")},
        {QStringLiteral("no-overlap"), QStringLiteral("ddp: all-reduce the gradients after the backward pass instead of bucket by bucket during it.")},
        {QStringLiteral("bucket-mb"),
         QStringLiteral("Gradient buckets of about this many MiB (default 25, DDP's bucket_cap_mb): ddp all-reduces each, zero2 reduces each to the rank that owns it."),
         QStringLiteral("MiB"), QStringLiteral("25")},
        {QStringLiteral("no-bind"), QStringLiteral("Leave the ranks on every CPU (default: CPU ranks on their own cores, CUDA ranks on their GPU's NUMA-local cores).")},
        {QStringLiteral("dump-dir"), QStringLiteral("Write the final parameters of the baseline and of every rank here (float32)."), QStringLiteral("dir")},
    });
    if (!parseArgs(parser, ctx, QStringLiteral("One scaling step: the single-process baseline against N data-parallel ranks at the same effective batch.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    ScaleSetup setup = scaleSetupFrom(parser);
    // Before anything runs, so a Ctrl-C or SIGTERM at any moment is recorded as cancelled.
    installInterruptHandler();
    setup.run.options.cancel = &interruptFlag();
    // A history write failure stops the step too (the baseline then records it as failed).
    setup.run.stop = &interruptFlag();
    ScalePrinter printer(ctx, setup.jsonl, setup.run.options.warmupSteps + setup.run.options.steps);
    const ScaleRunResult r = runScaleStep(setup.run, printer);
    if (r.verdict != Verdict::Fits && r.summary.gpus == 0)
        return exitCodeFor(r.verdict);
    if (setup.jsonl) {
        printer.note(QStringLiteral("summary"), r.json, {});
    } else {
        const ScaleSummary &s = r.summary;
        ctx.out << "strategy: " << QString::fromStdString(setup.run.strategy) << " over " << QString::fromStdString(r.collective) << ", " << s.gpus << " ranks on "
                << QString::fromStdString(setup.run.device) << "\nbaseline: " << QString::number(s.baselineTokensPerSecond, 'f', 0) << " tokens/s (run " << r.baselineRunId
                << ", grad_accum " << r.gradAccumOfBaseline << ")\nscaled: " << QString::number(s.tokensPerSecond, 'f', 0) << " tokens/s, speed-up "
                << QString::number(s.speedup, 'f', 2) << "x, scaling efficiency " << QString::number(s.scalingEfficiency * 100, 'f', 1)
                << "%\ncommunication: " << QString::number(s.commMsPerStep, 'f', 2) << " ms/step of " << QString::number(s.stepTimeMs, 'f', 2)
                << " ms\npeak allocated per rank: " << formatPeaks(s.perRankPeakAllocatedBytes) << "\nrecorded as run " << r.runId << " in " << setup.run.database << '\n';
        ctx.out.flush();
    }
    return r.parametersAgree ? 0 : static_cast<int>(ExitCode::Failure);
}

const CliRegistration scaleRegistration({QStringLiteral("scale"), QStringLiteral("One scaling step: 1 against N ranks with DDP over c10d"), &runScale});

} // namespace
} // namespace pb::cli
