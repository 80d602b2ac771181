#include "app/cli/PilotCommon.h"

#include "app/cli/CliSupport.h"
#include "engine/DevicePeak.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QRegularExpression>
#include <spdlog/spdlog.h>

namespace pb::cli {

void addPilotOptions(QCommandLineParser &parser)
{
    parser.addOptions({
        {QStringLiteral("config"), QStringLiteral("Run config: a JSON file or preset:NAME."), QStringLiteral("file")},
        {QStringLiteral("set"), QStringLiteral("Override a config field (repeatable), e.g. train.seq_len=512."), QStringLiteral("path=value")},
        {QStringLiteral("device"), QStringLiteral("cpu or cuda:N (default cpu)."), QStringLiteral("device"), QStringLiteral("cpu")},
        {QStringLiteral("steps"), QStringLiteral("Measured steps (default 20)."), QStringLiteral("n"), QStringLiteral("20")},
        {QStringLiteral("warmup"), QStringLiteral("Warm-up steps, not counted (default 3)."), QStringLiteral("n"), QStringLiteral("3")},
        {QStringLiteral("memory-limit"),
         QStringLiteral("CPU tensor memory budget, e.g. 512M or 2GB (beyond it: does-not-fit). K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024; "
                        "KB, MB, GB, TB powers of 1000."),
         QStringLiteral("size")},
        {QStringLiteral("threads"), QStringLiteral("CPU threads for LibTorch (default: its own)."), QStringLiteral("n")},
        {QStringLiteral("checkpoint-dir"), QStringLiteral("Write checkpoints here on the config's schedule."), QStringLiteral("dir")},
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder)."), QStringLiteral("file")},
        {QStringLiteral("jsonl"), QStringLiteral("One JSON object per line as the run goes.")},
        {QStringLiteral("checkpoint-at-end"), QStringLiteral("Also write a checkpoint after the last step (needs --checkpoint-dir).")},
        {QStringLiteral("resume-from"), QStringLiteral("Restore this checkpoint (a step folder or a --checkpoint-dir) before training."), QStringLiteral("dir")},
        {QStringLiteral("param-checksum"), QStringLiteral("Report a SHA-256 of every parameter at the end.")},
        {QStringLiteral("param-dump"), QStringLiteral("Write the trainable parameters at the end as float32 here (the restore proof's distance)."), QStringLiteral("file")},
        {QStringLiteral("drop-state"), QStringLiteral("Proof tests: leave this piece unrestored (model, optimizer, schedule, rng, data_position, loss_scale)."), QStringLiteral("piece")},
    });
    QCommandLineOption jitter(QStringLiteral("test-jitter-ulps"), QStringLiteral("Proof tests: move every trainable value by up to N ulps after each step, unseeded."),
                              QStringLiteral("n"));
    jitter.setFlags(QCommandLineOption::HiddenFromHelp);
    parser.addOption(jitter);
}

PilotOptions pilotOptionsFrom(const QCommandLineParser &parser)
{
    PilotOptions options;
    options.device = parser.value(QStringLiteral("device")).toStdString();
    // Checked here too, so a mistyped device never leaves a half-recorded run in the history.
    static const QRegularExpression devicePattern(QStringLiteral("^(cpu|cuda(:[0-9]+)?)$"));
    if (!devicePattern.match(QString::fromStdString(options.device)).hasMatch())
        throw InvalidInputError("--device", "'" + options.device + "' is not a device (use cpu or cuda:N)");
    options.steps = int64OptionAtLeast(parser, QStringLiteral("steps"), 1);
    options.warmupSteps = int64OptionAtLeast(parser, QStringLiteral("warmup"), 0);
    if (parser.isSet(QStringLiteral("memory-limit")))
        options.memoryLimitBytes = parseByteSize(parser.value(QStringLiteral("memory-limit")), QStringLiteral("--memory-limit"));
    if (parser.isSet(QStringLiteral("threads")))
        options.cpuThreads = intOptionAtLeast(parser, QStringLiteral("threads"), 1);
    options.checkpointDir = parser.value(QStringLiteral("checkpoint-dir")).toStdString();
    options.checkpointAtEnd = parser.isSet(QStringLiteral("checkpoint-at-end"));
    if (options.checkpointAtEnd && options.checkpointDir.empty())
        throw InvalidInputError("--checkpoint-at-end", "needs --checkpoint-dir");
    options.resumeFrom = parser.value(QStringLiteral("resume-from")).toStdString();
    options.parameterChecksum = parser.isSet(QStringLiteral("param-checksum"));
    options.dropStateOnResume = parser.value(QStringLiteral("drop-state")).toStdString();
    options.parameterDumpPath = parser.value(QStringLiteral("param-dump")).toStdString();
    refuseHistoryFile(parser.value(QStringLiteral("param-dump")), "--param-dump");
    if (parser.isSet(QStringLiteral("test-jitter-ulps"))) {
        bool ok = false;
        options.testJitterUlps = parser.value(QStringLiteral("test-jitter-ulps")).toInt(&ok);
        if (!ok || options.testJitterUlps < 0)
            throw InvalidInputError("--test-jitter-ulps", "must be a whole number >= 0");
    }
    options.devicePeakFlops = catalogPeakFlops(options.device);
    checkPilotOptions(options);
    return options;
}

QString databaseFrom(const QCommandLineParser &parser)
{
    return parser.isSet(QStringLiteral("db")) ? parser.value(QStringLiteral("db")) : defaultDatabasePath();
}


} // namespace pb::cli
