#include "workflow/RestoreCheck.h"

#include "checkpoint/CheckpointManifest.h"
#include "config/RunConfigJson.h"
#include "dist/WorkerLauncher.h"
#include "workflow/ScaleWorkers.h"
#include "util/Errors.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QTemporaryDir>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <limits>

namespace pb {
namespace {

QJsonObject lastSummary(const QByteArray &output)
{
    const auto lines = output.split('\n');
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const auto doc = QJsonDocument::fromJson(*it);
        if (doc.isObject() && doc.object().value(QStringLiteral("event")).toString() == QLatin1String("summary"))
            return doc.object();
    }
    return {};
}


// What one rank (or the one process) left: the uninterrupted run's last M losses and final
// parameters, the checkpoint's state digest, and the fresh process's summary.
struct RankEvidence {
    std::vector<double> uninterruptedLosses;
    std::string uninterruptedChecksum;
    std::map<std::string, std::string> checkpointDigest;
    QJsonObject resumed;
};

// The verdict over every rank: each piece of restored state, the continuation's losses and the
// final parameters must come back identical; what differs is named once, whichever rank it was.
void judge(RestoreCheckResult &result, const std::vector<RankEvidence> &ranks)
{
    auto differs = [&result](const std::string &piece) {
        if (std::find(result.differing.begin(), result.differing.end(), piece) == result.differing.end())
            result.differing.push_back(piece);
    };
    bool lossesEqual = true, parametersEqual = true;
    for (size_t rank = 0; rank < ranks.size(); ++rank) {
        const RankEvidence &e = ranks[rank];
        std::vector<double> resumed;
        // JSON has no NaN: a non-finite loss arrives as null and must not read as 0.
        for (const auto &v : e.resumed.value(QStringLiteral("losses")).toArray())
            resumed.push_back(v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN());
        const std::string resumedChecksum = e.resumed.value(QStringLiteral("parameter_checksum")).toString().toStdString();
        if (rank == 0) {
            result.uninterruptedLosses = e.uninterruptedLosses;
            result.resumedLosses = resumed;
            result.uninterruptedChecksum = e.uninterruptedChecksum;
            result.resumedChecksum = resumedChecksum;
        }
        const QJsonObject restored = e.resumed.value(QStringLiteral("resume_digest")).toObject();
        for (const auto &[piece, value] : e.checkpointDigest) {
            if (rank == 0)
                result.checked.push_back(piece);
            if (restored.value(QString::fromStdString(piece)).toString().toStdString() != value)
                differs(piece);
        }
        lossesEqual = lossesEqual && resumed.size() == e.uninterruptedLosses.size();
        for (size_t i = 0; i < std::min(resumed.size(), e.uninterruptedLosses.size()); ++i) {
            const double diff = std::abs(resumed[i] - e.uninterruptedLosses[i]);
            result.maxAbsLossDiff = std::max(result.maxAbsLossDiff, diff);
            lossesEqual = lossesEqual && resumed[i] == e.uninterruptedLosses[i];
        }
        parametersEqual = parametersEqual && resumedChecksum == e.uninterruptedChecksum && !resumedChecksum.empty();
    }
    if (!parametersEqual)
        differs("final_parameters");
    if (!lossesEqual)
        differs("continuation_losses");
    result.checked.push_back("final_parameters");
    result.checked.push_back("continuation_losses");
    result.bitwise = lossesEqual && parametersEqual;
    result.pass = result.bitwise && result.differing.empty();
    if (result.pass) {
        result.message = ranks.size() > 1 ? "restored exactly: " + std::to_string(ranks.size()) + " fresh processes continued bit for bit"
                                          : "restored exactly: the fresh process continued bit for bit";
    } else {
        std::string list;
        for (const auto &d : result.differing)
            list += (list.empty() ? "" : ", ") + d;
        result.message = "restore differs in: " + list;
    }
}

} // namespace

void checkRestoreCheckOptions(const RestoreCheckOptions &options)
{
    if (options.stepsBefore < 1 || options.stepsAfter < 1)
        throw InvalidInputError("--steps-before/--steps-after", "both must be at least 1");
    if (options.gpus < 1 || options.gpus > 64)
        throw InvalidInputError("--gpus", "must be between 1 and 64");
    if (options.gpus > 1) {
        if (options.strategy != "ddp" && options.strategy != "zero2" && options.strategy != "fsdp")
            throw InvalidInputError("--strategy", "'" + options.strategy + "' is not a strategy (use ddp, zero2 or fsdp)");
        if (options.device != "cpu" && options.device != "cuda")
            throw InvalidInputError("--device", "with --gpus above 1 the device is cpu or cuda (rank r runs on cuda:r), not '" + options.device + "'");
        if (options.threadsPerRank < 0)
            throw InvalidInputError("--threads", "must be at least 0");
        if (options.timeoutSeconds < 1)
            throw InvalidInputError("--timeout", "must be at least 1 second");
    }
    PilotOptions pilot;
    pilot.device = options.gpus > 1 && options.device == "cuda" ? "cuda:0" : options.device;
    pilot.dropStateOnResume = options.dropState;
    pilot.checkpointDir = options.checkpointDir.toStdString();
    checkPilotOptions(pilot);
}

namespace {

std::map<std::string, std::string> digestFromJson(const QJsonObject &o)
{
    std::map<std::string, std::string> digest;
    for (auto it = o.begin(); it != o.end(); ++it)
        digest[it.key().toStdString()] = it.value().toString().toStdString();
    return digest;
}

// The same proof over N ranks of `scale-worker`: N processes run K+M steps uninterrupted, N run K
// and write one sharded checkpoint, and N fresh ones restore it (each rank its own shards, RNG and
// data position) and run M more. Every rank's state, losses and final parameters are compared.
RestoreCheckResult runShardedRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options)
{
    RestoreCheckResult result;
    const QString root = QDir(options.checkpointDir).filePath(QStringLiteral("restore-check"));
    QDir(root).removeRecursively();
    // Private (0700): the ranks meet through a file in it.
    QTemporaryDir work(QDir::temp().filePath(QStringLiteral("pilotbench-restore-XXXXXX")));
    if (!work.isValid())
        throw PilotBenchError(ExitCode::Failure, "cannot create a folder for the workers: " + work.errorString().toStdString());
    ScaleWorkerPlan plan;
    plan.program = options.cliPath;
    plan.configPath = QDir(work.path()).filePath(QStringLiteral("config.json"));
    saveRunConfig(config, plan.configPath);
    plan.device = options.device;
    plan.strategy = options.strategy;
    plan.worldSize = options.gpus;
    plan.timeoutSeconds = options.timeoutSeconds;
    plan.threadsPerRank = options.threadsPerRank;
    plan.workDir = work.path();
    auto launch = [&](const QString &suffix, int64_t steps, const QStringList &extra) {
        plan.suffix = suffix;
        plan.steps = steps;
        plan.extraArguments = extra;
        const auto specs = scaleWorkerSpecs(plan);
        WorkerLauncher launcher(specs);
        launcher.start();
        const WorkerOutcome outcome = launcher.wait(std::chrono::seconds(options.timeoutSeconds), options.cancel);
        if (outcome.kind != WorkerOutcome::Kind::Finished) {
            work.setAutoRemove(false); // every rank's log stays for the post-mortem
            const int rank = std::max(outcome.failedRank, 0);
            throw PilotBenchError(outcome.kind == WorkerOutcome::Kind::Cancelled ? ExitCode::Cancelled : ExitCode::Failure,
                                  "the " + suffix.mid(1).toStdString() + " ranks did not complete: " + outcome.message + "\nlast lines of rank " +
                                      std::to_string(rank) + "'s log:\n" + tailOfFile(specs[static_cast<size_t>(rank)].logPath, 6) +
                                      "\nworker logs: " + work.path().toStdString());
        }
        std::vector<QJsonObject> results;
        for (int rank = 0; rank < plan.worldSize; ++rank) {
            const QString path = scaleWorkerResultPath(plan, rank);
            QFile file(path);
            const QJsonDocument doc = file.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(file.readAll()) : QJsonDocument();
            if (!doc.isObject())
                throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": rank " + std::to_string(rank) + " left no result");
            results.push_back(doc.object());
        }
        return results;
    };
    const auto uninterrupted = launch(QStringLiteral("-uninterrupted"), options.stepsBefore + options.stepsAfter, {});
    const auto interrupted = launch(QStringLiteral("-interrupted"), options.stepsBefore, {QStringLiteral("--checkpoint-dir"), root, QStringLiteral("--checkpoint-at-end")});
    result.checkpointWriteMs = interrupted.front().value(QStringLiteral("checkpoint_write_ms")).toDouble();
    result.checkpointBytes = static_cast<int64_t>(interrupted.front().value(QStringLiteral("checkpoint_bytes")).toDouble());
    result.checkpointPath = resolveCheckpointFolder(root);
    result.verifyMs = verifyCheckpoint(result.checkpointPath).verifyMs;

    // The fresh processes read the config the checkpoint carries.
    plan.configPath = QDir(result.checkpointPath).filePath(QStringLiteral("config.json"));
    QStringList resume {QStringLiteral("--resume-from"), result.checkpointPath};
    if (!options.dropState.empty())
        resume << QStringLiteral("--drop-state") << QString::fromStdString(options.dropState);
    QElapsedTimer timer;
    timer.start();
    const auto resumed = launch(QStringLiteral("-resumed"), options.stepsAfter, resume);
    result.freshProcessMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    std::vector<RankEvidence> ranks;
    for (int rank = 0; rank < plan.worldSize; ++rank) {
        const auto r = static_cast<size_t>(rank);
        result.restoreMs = std::max(result.restoreMs, resumed[r].value(QStringLiteral("restore_ms")).toDouble());
        RankEvidence e;
        const QJsonArray losses = uninterrupted[r].value(QStringLiteral("losses")).toArray();
        for (qsizetype i = options.stepsBefore; i < losses.size(); ++i)
            e.uninterruptedLosses.push_back(losses.at(i).isDouble() ? losses.at(i).toDouble() : std::numeric_limits<double>::quiet_NaN());
        e.uninterruptedChecksum = uninterrupted[r].value(QStringLiteral("parameter_checksum")).toString().toStdString();
        e.checkpointDigest = digestFromJson(interrupted[r].value(QStringLiteral("checkpoint_digest")).toObject());
        if (e.checkpointDigest.empty())
            throw PilotBenchError(ExitCode::Failure, "rank " + std::to_string(rank) + " of the interrupted run wrote no checkpoint");
        e.resumed = resumed[r];
        ranks.push_back(std::move(e));
    }
    result.gpus = options.gpus;
    result.strategy = options.strategy;
    judge(result, ranks);
    return result;
}

} // namespace

RestoreCheckResult runRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options)
{
    checkRestoreCheckOptions(options);
    if (options.cliPath.isEmpty() || !QFileInfo::exists(options.cliPath))
        throw PilotBenchError(ExitCode::Failure, "pilotbench-cli not found at '" + options.cliPath.toStdString() + "' for the fresh-process restore");
    if (options.gpus > 1)
        return runShardedRestoreCheck(config, options);
    RestoreCheckResult result;
    PilotEngine engine;

    PilotOptions a;
    a.device = options.device;
    a.warmupSteps = 0;
    a.steps = options.stepsBefore + options.stepsAfter;
    a.parameterChecksum = true;
    a.cancel = options.cancel;
    const PilotRun runA = engine.run(config, a);
    if (runA.summary.verdict != Verdict::Fits)
        throw PilotBenchError(runA.summary.verdict == Verdict::Cancelled ? ExitCode::Cancelled : ExitCode::Failure,
                              "the uninterrupted run did not complete: " + runA.summary.message);

    const QString root = QDir(options.checkpointDir).filePath(QStringLiteral("restore-check"));
    QDir(root).removeRecursively();
    PilotOptions b = a;
    b.steps = options.stepsBefore;
    b.parameterChecksum = false;
    b.checkpointDir = root.toStdString();
    b.checkpointAtEnd = true;
    const PilotRun runB = engine.run(config, b);
    if (runB.summary.verdict != Verdict::Fits || runB.checkpointDigest.empty())
        throw PilotBenchError(ExitCode::Failure, "the interrupted run did not write its checkpoint: " + runB.summary.message);
    result.checkpointWriteMs = runB.summary.checkpointWriteMs;
    result.checkpointBytes = runB.summary.checkpointBytes;
    result.checkpointPath = resolveCheckpointFolder(root);
    result.verifyMs = verifyCheckpoint(result.checkpointPath).verifyMs;

    // The fresh process reads the config the checkpoint carries, so nothing from this process leaks in.
    QStringList args {QStringLiteral("pilot"), QStringLiteral("--config"), QDir(result.checkpointPath).filePath(QStringLiteral("config.json")),
                      QStringLiteral("--device"), QString::fromStdString(options.device), QStringLiteral("--steps"), QString::number(options.stepsAfter),
                      QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--resume-from"), result.checkpointPath,
                      QStringLiteral("--param-checksum"), QStringLiteral("--jsonl"), QStringLiteral("--db"), QDir(root).filePath(QStringLiteral("fresh-process.sqlite"))};
    if (!options.dropState.empty())
        args << QStringLiteral("--drop-state") << QString::fromStdString(options.dropState);
    QProcess fresh;
    fresh.setProcessChannelMode(QProcess::SeparateChannels);
    QElapsedTimer timer;
    timer.start();
    fresh.start(options.cliPath, args);
    if (!fresh.waitForStarted(30000) || !fresh.waitForFinished(options.processTimeoutMs)) {
        fresh.kill();
        fresh.waitForFinished(5000);
        throw PilotBenchError(ExitCode::Failure, "the fresh restore process did not finish: " + fresh.errorString().toStdString());
    }
    result.freshProcessMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    const QJsonObject c = lastSummary(fresh.readAllStandardOutput());
    if (fresh.exitCode() != 0 || c.isEmpty())
        throw PilotBenchError(ExitCode::Failure, "the fresh restore process failed (exit " + std::to_string(fresh.exitCode()) + "): " +
                                                     QString::fromLocal8Bit(fresh.readAllStandardError()).trimmed().toStdString());
    result.restoreMs = c.value(QStringLiteral("restore_ms")).toDouble();

    RankEvidence evidence;
    evidence.uninterruptedLosses.assign(runA.losses.begin() + options.stepsBefore, runA.losses.end());
    evidence.uninterruptedChecksum = runA.parameterChecksum;
    evidence.checkpointDigest = runB.checkpointDigest;
    evidence.resumed = c;
    judge(result, {evidence});
    return result;
}

QJsonObject toJson(const RestoreCheckResult &r)
{
    auto strings = [](const std::vector<std::string> &v) {
        QJsonArray a;
        for (const auto &s : v)
            a.append(QString::fromStdString(s));
        return a;
    };
    auto numbers = [](const std::vector<double> &v) {
        QJsonArray a;
        for (double d : v)
            a.append(d);
        return a;
    };
    return QJsonObject {
        {QStringLiteral("verdict"), r.pass ? QStringLiteral("pass") : QStringLiteral("fail")},
        {QStringLiteral("bitwise"), r.bitwise},
        {QStringLiteral("checked"), strings(r.checked)},
        {QStringLiteral("differing"), strings(r.differing)},
        {QStringLiteral("max_abs_loss_diff"), r.maxAbsLossDiff},
        {QStringLiteral("uninterrupted_losses"), numbers(r.uninterruptedLosses)},
        {QStringLiteral("resumed_losses"), numbers(r.resumedLosses)},
        {QStringLiteral("uninterrupted_checksum"), QString::fromStdString(r.uninterruptedChecksum)},
        {QStringLiteral("resumed_checksum"), QString::fromStdString(r.resumedChecksum)},
        {QStringLiteral("checkpoint_write_ms"), r.checkpointWriteMs},
        {QStringLiteral("verify_ms"), r.verifyMs},
        {QStringLiteral("restore_ms"), r.restoreMs},
        {QStringLiteral("fresh_process_ms"), r.freshProcessMs},
        {QStringLiteral("checkpoint_bytes"), static_cast<double>(r.checkpointBytes)},
        {QStringLiteral("checkpoint_path"), r.checkpointPath},
        {QStringLiteral("gpus"), r.gpus},
        {QStringLiteral("strategy"), QString::fromStdString(r.strategy)},
        {QStringLiteral("message"), QString::fromStdString(r.message)},
    };
}

} // namespace pb
