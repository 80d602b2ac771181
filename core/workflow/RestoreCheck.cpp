#include "workflow/RestoreCheck.h"

#include "checkpoint/CheckpointManifest.h"
#include "checkpoint/ParameterDump.h"
#include "config/RunConfigJson.h"
#include "dist/WorkerLauncher.h"
#include "result/StepStatistics.h"
#include "workflow/ScaleWorkers.h"
#include "util/Errors.h"
#include "util/JobTree.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
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
// parameters, the reference runs' likewise, the checkpoint's state digest, the fresh process's
// summary, and the distances of the references' and the continuation's parameters from A's.
struct RankEvidence {
    std::vector<double> uninterruptedLosses;
    std::string uninterruptedChecksum;
    std::vector<std::vector<double>> referenceLosses;
    std::vector<std::string> referenceChecksums;
    std::vector<double> referenceDistances;     // relative: each reference from A, then each pair of references
    double resumedDistance = -1;                // relative
    std::map<std::string, std::string> checkpointDigest;
    QJsonObject resumed;
};

std::vector<double> lossesFrom(const QJsonArray &array, qsizetype from = 0)
{
    std::vector<double> losses;
    // JSON has no NaN: a non-finite loss arrives as null and must not read as 0.
    for (qsizetype i = from; i < array.size(); ++i)
        losses.push_back(array.at(i).isDouble() ? array.at(i).toDouble() : std::numeric_limits<double>::quiet_NaN());
    return losses;
}

// The largest |a_i - b_i|; infinite where a loss is not finite or the counts differ.
double maxLossDiff(const std::vector<double> &a, const std::vector<double> &b)
{
    if (a.size() != b.size())
        return std::numeric_limits<double>::infinity();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::abs(a[i] - b[i]);
        worst = std::isfinite(d) ? std::max(worst, d) : std::numeric_limits<double>::infinity();
    }
    return worst;
}

bool bitwiseEqual(const std::vector<double> &a, const std::vector<double> &b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) { return x == y; });
}

std::string figure(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return text;
}

// The verdict over every rank: each piece of restored state must come back identical; the
// continuation must too where the references reproduced A bit for bit, else it must stay inside
// their variation times the margin. What differs is named once, whichever rank it was.
void judge(RestoreCheckResult &result, const std::vector<RankEvidence> &ranks, double margin)
{
    auto differs = [&result](const std::string &piece) {
        if (std::find(result.differing.begin(), result.differing.end(), piece) == result.differing.end())
            result.differing.push_back(piece);
    };
    bool lossesEqual = true, parametersEqual = true, referencesReproduce = true;
    double resumedDistance = 0;
    bool distanceMeasured = true;
    for (size_t rank = 0; rank < ranks.size(); ++rank) {
        const RankEvidence &e = ranks[rank];
        const std::vector<double> resumed = lossesFrom(e.resumed.value(QStringLiteral("losses")).toArray());
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
        result.maxAbsLossDiff = std::max(result.maxAbsLossDiff, maxLossDiff(resumed, e.uninterruptedLosses));
        lossesEqual = lossesEqual && bitwiseEqual(resumed, e.uninterruptedLosses);
        parametersEqual = parametersEqual && resumedChecksum == e.uninterruptedChecksum && !resumedChecksum.empty();
        // The spread of every pair of uninterrupted runs (A and the references): one pair alone is a
        // single draw of the variation, and a small draw made the envelope too tight to pass honestly.
        for (size_t j = 0; j < e.referenceLosses.size(); ++j) {
            result.referenceMaxAbsLossDiff = std::max(result.referenceMaxAbsLossDiff, maxLossDiff(e.referenceLosses[j], e.uninterruptedLosses));
            for (size_t i = 0; i < j; ++i)
                result.referenceMaxAbsLossDiff = std::max(result.referenceMaxAbsLossDiff, maxLossDiff(e.referenceLosses[j], e.referenceLosses[i]));
            referencesReproduce = referencesReproduce && bitwiseEqual(e.referenceLosses[j], e.uninterruptedLosses)
                                  && j < e.referenceChecksums.size() && e.referenceChecksums[j] == e.uninterruptedChecksum;
        }
        for (double d : e.referenceDistances)
            result.referenceParameterDistance = std::max(result.referenceParameterDistance, d);
        distanceMeasured = distanceMeasured && e.resumedDistance >= 0;
        resumedDistance = std::max(resumedDistance, e.resumedDistance);
    }
    result.parameterDistance = distanceMeasured ? resumedDistance : -1;
    result.envelopeMargin = margin;
    result.checked.push_back("final_parameters");
    result.checked.push_back("continuation_losses");
    result.bitwise = lossesEqual && parametersEqual;
    result.kind = referencesReproduce ? "bitwise" : "envelope";
    const bool stateExact = result.differing.empty();
    const std::string references = std::to_string(result.referenceRuns) + " uninterrupted run" + (result.referenceRuns == 1 ? "" : "s");
    const std::string spread = result.referenceRuns == 1 ? "the resumed run vs 1 uninterrupted run, each against the first"
                                                         : "the resumed run against the first vs the widest pair of " + std::to_string(result.referenceRuns + 1)
                                                               + " uninterrupted runs";
    std::string why;
    if (!result.bitwise && result.kind == "bitwise") {
        if (!parametersEqual)
            differs("final_parameters");
        if (!lossesEqual)
            differs("continuation_losses");
        why = " (the continuation differs while " + references + " beside it reproduced bit for bit: max |loss difference| " + figure(result.maxAbsLossDiff) + ")";
    } else if (!result.bitwise) {
        // Inside the envelope: no farther from A than margin times the widest pair. A loss is
        // a float32 and moves in whole units of its last place, so a reference may show none where
        // the parameters did move: the loss's own unit is the least variation it can show. A
        // parameter distance the references left at exactly 0 allows only 0.
        const double lossLimit = margin * std::max(result.referenceMaxAbsLossDiff, float32Resolution(result.uninterruptedLosses));
        const double distanceLimit = margin * result.referenceParameterDistance;
        const bool lossesInside = std::isfinite(result.maxAbsLossDiff) && result.maxAbsLossDiff <= lossLimit;
        const bool parametersInside = distanceMeasured && std::isfinite(resumedDistance) && resumedDistance <= distanceLimit;
        if (!parametersInside)
            differs("final_parameters");
        if (!lossesInside)
            differs("continuation_losses");
        const std::string figures = "max |loss difference| " + figure(result.maxAbsLossDiff) + " vs " + figure(result.referenceMaxAbsLossDiff)
                                    + ", parameter distance " + (distanceMeasured ? figure(resumedDistance) : std::string("unmeasured")) + " vs "
                                    + figure(result.referenceParameterDistance) + ": " + spread;
        why = lossesInside && parametersInside ? figures : " (outside " + figure(margin) + "x the kernels' run-to-run variation; " + figures + ")";
    }
    result.pass = stateExact && result.differing.empty();
    if (result.pass && result.bitwise) {
        result.message = ranks.size() > 1 ? "restored exactly: " + std::to_string(ranks.size()) + " fresh processes continued bit for bit"
                                          : "restored exactly: the fresh process continued bit for bit";
        if (result.kind == "envelope")
            result.message += " (the kernels vary run to run, this time they did not)";
    } else if (result.pass) {
        result.message = "restored exactly; continuation within the kernels' run-to-run variation (" + why + ")";
    } else {
        std::string list;
        for (const auto &d : result.differing)
            list += (list.empty() ? "" : ", ") + d;
        result.message = "restore differs in: " + list + why;
    }
}

} // namespace

void checkRestoreCheckOptions(const RestoreCheckOptions &options)
{
    if (options.stepsBefore < 1 || options.stepsAfter < 1)
        throw InvalidInputError("--steps-before/--steps-after", "both must be at least 1");
    if (options.gpus < 1 || options.gpus > 64)
        throw InvalidInputError("--gpus", "must be between 1 and 64");
    if (options.referenceRuns < 1 || options.referenceRuns > 10)
        throw InvalidInputError("--reference-runs", "must be between 1 and 10");
    if (!(options.envelopeMargin >= 1) || !std::isfinite(options.envelopeMargin))
        throw InvalidInputError("--envelope-margin", "must be a number of at least 1");
    if (options.testJitterUlps < 0)
        throw InvalidInputError("--test-jitter-ulps", "must be at least 0");
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

// One rank of two uninterrupted runs ended alike: every loss and the parameters' checksum.
bool sameRun(const QJsonObject &a, const QJsonObject &b)
{
    const QString checksum = a.value(QStringLiteral("parameter_checksum")).toString();
    return !checksum.isEmpty() && checksum == b.value(QStringLiteral("parameter_checksum")).toString()
           && bitwiseEqual(lossesFrom(a.value(QStringLiteral("losses")).toArray()), lossesFrom(b.value(QStringLiteral("losses")).toArray()));
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
    auto dumpPath = [&work](const QString &suffix, int rank) { return QDir(work.path()).filePath(QStringLiteral("rank%1%2.f32").arg(rank).arg(suffix)); };
    auto launch = [&](const QString &suffix, int64_t steps, QStringList extra) {
        plan.suffix = suffix;
        plan.steps = steps;
        const int jitter = suffix == QLatin1String("-resumed") && options.testResumeJitterUlps >= 0 ? options.testResumeJitterUlps : options.testJitterUlps;
        if (jitter > 0)
            extra << QStringLiteral("--test-jitter-ulps") << QString::number(jitter);
        plan.extraArguments = extra;
        const auto specs = scaleWorkerSpecs(plan, [&](int rank) { return QStringList {QStringLiteral("--dump-parameters"), dumpPath(suffix, rank)}; });
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
    std::vector<std::vector<QJsonObject>> references;
    for (int j = 1; j <= options.referenceRuns; ++j) {
        references.push_back(launch(QStringLiteral("-reference%1").arg(j), options.stepsBefore + options.stepsAfter, {}));
        bool reproduces = true;
        for (size_t r = 0; r < uninterrupted.size(); ++r)
            reproduces = reproduces && sameRun(references.back()[r], uninterrupted[r]);
        if (reproduces)
            break; // deterministic kernels: the continuation must be bitwise, more references add nothing
    }
    const int referenceRuns = static_cast<int>(references.size());
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
        e.uninterruptedLosses = lossesFrom(uninterrupted[r].value(QStringLiteral("losses")).toArray(), options.stepsBefore);
        e.uninterruptedChecksum = uninterrupted[r].value(QStringLiteral("parameter_checksum")).toString().toStdString();
        const QString a = dumpPath(QStringLiteral("-uninterrupted"), rank);
        for (int j = 1; j <= referenceRuns; ++j) {
            const QJsonObject &ref = references[static_cast<size_t>(j - 1)][r];
            e.referenceLosses.push_back(lossesFrom(ref.value(QStringLiteral("losses")).toArray(), options.stepsBefore));
            e.referenceChecksums.push_back(ref.value(QStringLiteral("parameter_checksum")).toString().toStdString());
            e.referenceDistances.push_back(parameterDistance(a, dumpPath(QStringLiteral("-reference%1").arg(j), rank)).relative);
            for (int i = 1; i < j; ++i)
                e.referenceDistances.push_back(
                    parameterDistance(dumpPath(QStringLiteral("-reference%1").arg(i), rank), dumpPath(QStringLiteral("-reference%1").arg(j), rank)).relative);
        }
        e.resumedDistance = parameterDistance(a, dumpPath(QStringLiteral("-resumed"), rank)).relative;
        e.checkpointDigest = digestFromJson(interrupted[r].value(QStringLiteral("checkpoint_digest")).toObject());
        if (e.checkpointDigest.empty())
            throw PilotBenchError(ExitCode::Failure, "rank " + std::to_string(rank) + " of the interrupted run wrote no checkpoint");
        e.resumed = resumed[r];
        ranks.push_back(std::move(e));
    }
    result.gpus = options.gpus;
    result.strategy = options.strategy;
    result.referenceRuns = referenceRuns;
    judge(result, ranks, options.envelopeMargin);
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
    const QString root = QDir(options.checkpointDir).filePath(QStringLiteral("restore-check"));
    QDir(root).removeRecursively();
    if (!QDir().mkpath(root))
        throw PilotBenchError(ExitCode::Failure, "cannot create " + root.toStdString());
    // The parameter dumps go beside the checkpoint and are gone once measured.
    auto dumpPath = [&root](const QString &name) { return QDir(root).filePath(name + QStringLiteral(".f32")); };
    struct DumpCleanup {
        QString folder;
        ~DumpCleanup()
        {
            for (const QString &f : QDir(folder).entryList({QStringLiteral("*.f32")}, QDir::Files))
                QFile::remove(QDir(folder).filePath(f));
        }
    } cleanup {root};

    PilotOptions a;
    a.device = options.device;
    a.warmupSteps = 0;
    a.steps = options.stepsBefore + options.stepsAfter;
    a.parameterChecksum = true;
    a.testJitterUlps = options.testJitterUlps;
    a.cancel = options.cancel;
    auto uninterrupted = [&](const QString &name, const char *what) {
        a.parameterDumpPath = dumpPath(name).toStdString();
        PilotRun run = engine.run(config, a);
        if (run.summary.verdict != Verdict::Fits)
            throw PilotBenchError(run.summary.verdict == Verdict::Cancelled ? ExitCode::Cancelled : ExitCode::Failure,
                                  std::string(what) + " did not complete: " + run.summary.message);
        return run;
    };
    const PilotRun runA = uninterrupted(QStringLiteral("uninterrupted"), "the uninterrupted run");
    RankEvidence evidence;
    evidence.uninterruptedLosses.assign(runA.losses.begin() + options.stepsBefore, runA.losses.end());
    evidence.uninterruptedChecksum = runA.parameterChecksum;
    int referenceRuns = 0;
    while (referenceRuns < options.referenceRuns) {
        const QString name = QStringLiteral("reference%1").arg(++referenceRuns);
        const PilotRun ref = uninterrupted(name, "a reference run");
        evidence.referenceLosses.emplace_back(ref.losses.begin() + options.stepsBefore, ref.losses.end());
        evidence.referenceChecksums.push_back(ref.parameterChecksum);
        evidence.referenceDistances.push_back(parameterDistance(dumpPath(QStringLiteral("uninterrupted")), dumpPath(name)).relative);
        for (int i = 1; i < referenceRuns; ++i)
            evidence.referenceDistances.push_back(parameterDistance(dumpPath(QStringLiteral("reference%1").arg(i)), dumpPath(name)).relative);
        if (ref.parameterChecksum == runA.parameterChecksum && bitwiseEqual(ref.losses, runA.losses))
            break; // deterministic kernels: the continuation must be bitwise, more references add nothing
    }

    PilotOptions b = a;
    b.steps = options.stepsBefore;
    b.parameterChecksum = false;
    b.parameterDumpPath.clear();
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
                      QStringLiteral("--param-checksum"), QStringLiteral("--param-dump"), dumpPath(QStringLiteral("resumed")),
                      QStringLiteral("--jsonl"), QStringLiteral("--db"), QDir(root).filePath(QStringLiteral("fresh-process.sqlite"))};
    if (!options.dropState.empty())
        args << QStringLiteral("--drop-state") << QString::fromStdString(options.dropState);
    const int resumeJitter = options.testResumeJitterUlps >= 0 ? options.testResumeJitterUlps : options.testJitterUlps;
    if (resumeJitter > 0)
        args << QStringLiteral("--test-jitter-ulps") << QString::number(resumeJitter);
    QProcess fresh;
    fresh.setProcessChannelMode(QProcess::SeparateChannels);
    // The fresh process, and anything it starts, ends with this one.
    JobTree tree(5000);
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QLatin1String(JobTree::kVariable), tree.id());
    fresh.setProcessEnvironment(environment);
    fresh.setChildProcessModifier([] { JobTree::prepareChild(SIGKILL); });
    QElapsedTimer timer;
    timer.start();
    fresh.start(options.cliPath, args);
    const bool started = fresh.waitForStarted(30000);
    if (started)
        tree.add(fresh.processId());
    bool cancelled = false;
    while (started && fresh.state() != QProcess::NotRunning && timer.elapsed() < options.processTimeoutMs && !cancelled) {
        fresh.waitForFinished(100);
        cancelled = options.cancel && options.cancel->load();
    }
    if (!started || fresh.state() != QProcess::NotRunning) {
        tree.stop(cancelled ? 5000 : 0);
        fresh.waitForFinished(5000);
        if (cancelled)
            throw PilotBenchError(ExitCode::Cancelled, "cancelled while the fresh restore process ran; it was stopped");
        throw PilotBenchError(ExitCode::Failure, "the fresh restore process did not finish: " + fresh.errorString().toStdString());
    }
    tree.stop(0);
    result.freshProcessMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    const QJsonObject c = lastSummary(fresh.readAllStandardOutput());
    if (fresh.exitCode() != 0 || c.isEmpty())
        throw PilotBenchError(ExitCode::Failure, "the fresh restore process failed (exit " + std::to_string(fresh.exitCode()) + "): " +
                                                     QString::fromLocal8Bit(fresh.readAllStandardError()).trimmed().toStdString());
    result.restoreMs = c.value(QStringLiteral("restore_ms")).toDouble();

    evidence.resumedDistance = parameterDistance(dumpPath(QStringLiteral("uninterrupted")), dumpPath(QStringLiteral("resumed"))).relative;
    evidence.checkpointDigest = runB.checkpointDigest;
    evidence.resumed = c;
    result.referenceRuns = referenceRuns;
    judge(result, {evidence}, options.envelopeMargin);
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
        {QStringLiteral("kind"), QString::fromStdString(r.kind)},
        {QStringLiteral("reference_runs"), r.referenceRuns},
        {QStringLiteral("reference_max_abs_loss_diff"), r.referenceMaxAbsLossDiff},
        {QStringLiteral("reference_parameter_distance"), r.referenceParameterDistance},
        {QStringLiteral("parameter_distance"), r.parameterDistance},
        {QStringLiteral("envelope_margin"), r.envelopeMargin},
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
