// `pilotbench-cli watch -- COMMAND ARGS...`: the user's own training command run and measured like
// our pilot (core/workflow/WatchRun): its output passed through, its steps from the probe or its
// log lines, the devices sampled, the run recorded with kind "watch".
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "result/ResultJson.h"
#include "util/Errors.h"
#include "workflow/WatchRun.h"

#include <QFileInfo>
#include <QJsonArray>

#include <cmath>
#include <cstdio>

namespace pb::cli {
namespace {

const QString kUsage = QStringLiteral(
    "Run your own training command and measure it like a pilot: step times, tokens/s, memory per device\n"
    "and per process tree, validation and checkpoint times, out-of-memory as a verdict. Put the command\n"
    "after --, e.g.\n"
    "  pilotbench-cli watch --config run.json -- torchrun --nproc_per_node 8 train.py --bf16\n\n"
    "Steps come from the probe when the job uses it (import pilotbench_probe: a Trainer or Lightning\n"
    "callback, or `with pilotbench_probe.step(tokens=n):`; watch puts it on PYTHONPATH), otherwise from\n"
    "the Trainer's logged dicts and tqdm progress lines it prints. Devices: NVML or ROCm SMI, loaded at\n"
    "run time; without them the process tree's memory from /proc.\n\n"
    "Exit codes: 0 it ran to the end (or to --max-steps/--max-seconds, then stopped on purpose), 1 the\n"
    "command failed, 2 invalid input (a missing program), 3 it ran out of memory, 4 cancelled.\n");

// The command's output goes on to the terminal (stderr under --jsonl, whose stdout is ours).
class WatchPrinter final : public watch::WatchObserver {
public:
    WatchPrinter(CliContext &ctx, bool jsonl) : m_ctx(ctx), m_jsonl(jsonl), m_printer(ctx.out, ctx.err, jsonl, 0) {}
    void started(qint64 pid, const QString &source) override
    {
        m_printer.event(QStringLiteral("started"), {{QStringLiteral("pid"), static_cast<double>(pid)}, {QStringLiteral("device_source"), source}});
    }
    void output(bool isStderr, const QByteArray &bytes) override
    {
        // Raw bytes, unchanged: progress bars keep their carriage returns.
        std::FILE *stream = m_jsonl || isStderr ? stderr : stdout;
        std::fwrite(bytes.constData(), 1, static_cast<size_t>(bytes.size()), stream);
        std::fflush(stream);
    }
    void notice(const QString &text) override
    {
        if (m_jsonl) {
            m_printer.event(QStringLiteral("notice"), {{QStringLiteral("message"), text}});
            return;
        }
        m_ctx.err << "pilotbench: " << text << '\n';
        m_ctx.err.flush();
    }
    void stepFinished(const StepSample &s) override
    {
        if (m_jsonl)
            m_printer.event(QStringLiteral("step"), toJson(s));
    }
    void trainerLoss(const watch::LoggedLoss &l) override
    {
        if (!m_jsonl)
            return;
        QJsonObject o {{QStringLiteral("log"), static_cast<double>(l.ordinal)}};
        if (std::isfinite(l.loss))
            o.insert(QStringLiteral("loss"), l.loss);
        if (l.learningRate)
            o.insert(QStringLiteral("learning_rate"), *l.learningRate);
        if (l.epoch)
            o.insert(QStringLiteral("epoch"), *l.epoch);
        m_printer.event(QStringLiteral("trainer_loss"), o);
    }
    void validationFinished(const ValidationResult &v) override { m_printer.validationFinished(v); }
    void checkpointWritten(const CheckpointWrite &c) override { m_printer.checkpointWritten(c); }
    void summary(const QJsonObject &json) { m_printer.event(QStringLiteral("summary"), json); }
    void setRunId(int64_t runId) { m_printer.setRunId(runId); }

private:
    CliContext &m_ctx;
    bool m_jsonl;
    PilotPrinter m_printer;
};

// Seconds above 0 and at most `most` (which keeps a duration in milliseconds inside an int and
// refuses inf, nan and 1e12 by name).
double seconds(const QCommandLineParser &parser, const QString &name, double most)
{
    bool ok = false;
    const double v = parser.value(name).toDouble(&ok);
    if (!ok || !(v > 0) || !(v <= most))
        throw InvalidInputError("--" + name.toStdString(), "'" + parser.value(name).toStdString() + "' must be a number of seconds above 0 and at most "
                                                               + QString::number(most, 'f', 0).toStdString());
    return v;
}

int runWatch(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("config"), QStringLiteral("The job's run config (a JSON file or preset:NAME): FLOPs, tokens per step and the estimate beside the measurement."), QStringLiteral("FILE")},
        {QStringLiteral("set"), QStringLiteral("Override a config field: PATH=VALUE (repeatable)."), QStringLiteral("PATH=VALUE")},
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder's)."), QStringLiteral("FILE")},
        {QStringLiteral("jsonl"), QStringLiteral("Print events as JSON lines on stdout (the command's output goes to stderr).")},
        {QStringLiteral("max-steps"), QStringLiteral("Stop the command on purpose after this many steps."), QStringLiteral("N")},
        {QStringLiteral("log-every"), QStringLiteral("Each Trainer log with a loss stands for N steps (its logging_steps): times steps where no progress bar counts them."), QStringLiteral("N")},
        {QStringLiteral("max-seconds"), QStringLiteral("Stop the command on purpose after this long."), QStringLiteral("S")},
        {QStringLiteral("warmup"), QStringLiteral("Steps left out of the figures (default 2)."), QStringLiteral("N"), QStringLiteral("2")},
        {QStringLiteral("grace"), QStringLiteral("Seconds between SIGTERM and SIGKILL when stopping it (default 10)."), QStringLiteral("S"), QStringLiteral("10")},
        {QStringLiteral("cwd"), QStringLiteral("Working folder for the command (default: this one)."), QStringLiteral("DIR")},
        {QStringLiteral("env"), QStringLiteral("Add NAME=VALUE to the command's environment (repeatable)."), QStringLiteral("NAME=VALUE")},
        {QStringLiteral("run-dir"), QStringLiteral("Keep the command's log and probe events here (default: a new folder in the data folder)."), QStringLiteral("DIR")},
        {QStringLiteral("no-devices"), QStringLiteral("Do not load NVML / ROCm SMI (the process tree's memory only).")},
    });
    parser.addPositionalArgument(QStringLiteral("COMMAND"), QStringLiteral("The command and its arguments, after --."), QStringLiteral("-- COMMAND [ARGS...]"));
    if (!parseArgs(parser, ctx, kUsage))
        return parser.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);

    WatchRunRequest request;
    watch::WatchOptions &o = request.options;
    o.command = parser.positionalArguments();
    if (o.command.isEmpty())
        throw InvalidInputError("COMMAND", "no command given: put it after --, e.g. pilotbench-cli watch -- python3 train.py");
    if (parser.isSet(QStringLiteral("config")))
        request.config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    auto wholeNumber = [&parser](const QString &name) -> std::optional<int64_t> {
        if (!parser.isSet(name))
            return std::nullopt;
        bool ok = false;
        const qlonglong n = parser.value(name).toLongLong(&ok);
        if (!ok || n < 1)
            throw InvalidInputError("--" + name.toStdString(), "'" + parser.value(name).toStdString() + "' must be a whole number of at least 1");
        return n;
    };
    o.maxSteps = wholeNumber(QStringLiteral("max-steps"));
    o.logEvery = wholeNumber(QStringLiteral("log-every"));
    if (parser.isSet(QStringLiteral("max-seconds")))
        o.maxSeconds = seconds(parser, QStringLiteral("max-seconds"), 30 * 86400.0);
    bool ok = false;
    o.warmupSteps = parser.value(QStringLiteral("warmup")).toInt(&ok);
    if (!ok || o.warmupSteps < 0)
        throw InvalidInputError("--warmup", "must be a whole number >= 0");
    o.graceMs = static_cast<int>(std::lround(seconds(parser, QStringLiteral("grace"), 3600) * 1000));
    o.workingDir = parser.value(QStringLiteral("cwd"));
    if (!o.workingDir.isEmpty() && !QFileInfo(o.workingDir).isDir())
        throw InvalidInputError("--cwd", "'" + o.workingDir.toStdString() + "' is not a folder");
    o.environment = parser.values(QStringLiteral("env"));
    o.runDir = parser.value(QStringLiteral("run-dir"));
    o.sampleDevices = !parser.isSet(QStringLiteral("no-devices"));
    request.database = databaseFrom(parser);

    installInterruptHandler(3);
    o.cancel = &interruptFlag();
    o.stopNow = &secondInterruptFlag();
    const bool jsonl = parser.isSet(QStringLiteral("jsonl"));
    WatchPrinter printer(ctx, jsonl);
    request.runBegun = [&printer](int64_t runId) { printer.setRunId(runId); };
    const RecordedWatch recorded = runRecordedWatch(request, printer);
    const PilotSummary &s = recorded.result.summary;
    if (jsonl) {
        printer.summary(recorded.json);
    } else {
        ctx.out << "\nwatch: " << toString(s.verdict) << (s.message.empty() ? QString() : QStringLiteral(" (%1)").arg(QString::fromStdString(s.message)))
                << "\nsteps: " << recorded.result.samples.size() << " from " << QString::fromStdString(recorded.result.stepSource) << ", " << s.measuredSteps
                << " measured after " << o.warmupSteps << " warm-up\n";
        if (const auto &losses = recorded.result.loggedLosses; !losses.empty())
            ctx.out << "trainer losses: " << losses.size() << " logged, first " << QString::number(losses.front().loss, 'g', 5) << ", last "
                    << QString::number(losses.back().loss, 'g', 5)
                    << (recorded.result.loggingSteps ? QStringLiteral(" (every %1 steps)").arg(*recorded.result.loggingSteps) : QStringLiteral(" (steps between them unknown)")) << '\n';
        if (const auto &r = recorded.result; r.probeEventsRejected > 0)
            ctx.out << "probe: " << r.probeEventsRejected << " event" << (r.probeEventsRejected == 1 ? "" : "s") << " refused, not counted (first: "
                    << QString::fromStdString(r.probeFirstRejection) << ")\n";
        if (!recorded.result.probeFileRefused.empty())
            ctx.out << "probe: " << QString::fromStdString(recorded.result.probeFileRefused) << '\n';
        if (s.measuredSteps == 0)
            ctx.out << "step time: unknown\n";
        if (s.measuredSteps > 0)
            ctx.out << "step time: mean " << QString::number(s.stepTimeMeanMs, 'f', 1) << " ms, p50 " << QString::number(s.stepTimeP50Ms, 'f', 1) << " ms, p90 "
                    << QString::number(s.stepTimeP90Ms, 'f', 1) << " ms, cv " << QString::number(s.stepTimeCv, 'f', 3) << "\ntokens/s: "
                    << (s.tokensPerSecond > 0 ? QString::number(s.tokensPerSecond, 'f', 0) : QStringLiteral("unknown (no token counts and no --config)")) << '\n';
        ctx.out << "memory: peak allocated " << (s.peakAllocatedBytes > 0 ? formatBytes(s.peakAllocatedBytes) : QStringLiteral("not reported"))
                << ", peak " << (recorded.result.deviceSource == "proc" ? "process tree RSS " : "device used ") << formatBytes(s.peakDeviceUsedBytes)
                << " (" << QString::fromStdString(recorded.result.deviceSource) << ")\nlog: " << recorded.result.logPath << "\nrecorded as run " << recorded.runId << " in "
                << request.database << '\n';
    }
    return exitCodeFor(s.verdict);
}

const CliRegistration registration({QStringLiteral("watch"), QStringLiteral("Run and measure your own training command (-- COMMAND ARGS...)"), &runWatch});

} // namespace
} // namespace pb::cli
