#include "workflow/RestoreCheck.h"

#include "checkpoint/CheckpointManifest.h"
#include "util/Errors.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>

#include <cmath>
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

} // namespace

void checkRestoreCheckOptions(const RestoreCheckOptions &options)
{
    if (options.stepsBefore < 1 || options.stepsAfter < 1)
        throw InvalidInputError("--steps-before/--steps-after", "both must be at least 1");
    PilotOptions pilot;
    pilot.device = options.device;
    pilot.dropStateOnResume = options.dropState;
    pilot.checkpointDir = options.checkpointDir.toStdString();
    checkPilotOptions(pilot);
}

RestoreCheckResult runRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options)
{
    checkRestoreCheckOptions(options);
    if (options.cliPath.isEmpty() || !QFileInfo::exists(options.cliPath))
        throw PilotBenchError(ExitCode::Failure, "pilotbench-cli not found at '" + options.cliPath.toStdString() + "' for the fresh-process restore");
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

    result.uninterruptedLosses.assign(runA.losses.begin() + options.stepsBefore, runA.losses.end());
    // JSON has no NaN: a non-finite loss arrives as null and must not read as 0.
    for (const auto &v : c.value(QStringLiteral("losses")).toArray())
        result.resumedLosses.push_back(v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN());
    result.uninterruptedChecksum = runA.parameterChecksum;
    result.resumedChecksum = c.value(QStringLiteral("parameter_checksum")).toString().toStdString();

    const QJsonObject restored = c.value(QStringLiteral("resume_digest")).toObject();
    for (const auto &[piece, value] : runB.checkpointDigest) {
        result.checked.push_back(piece);
        if (restored.value(QString::fromStdString(piece)).toString().toStdString() != value)
            result.differing.push_back(piece);
    }
    bool lossesEqual = result.resumedLosses.size() == result.uninterruptedLosses.size();
    for (size_t i = 0; i < std::min(result.resumedLosses.size(), result.uninterruptedLosses.size()); ++i) {
        const double diff = std::abs(result.resumedLosses[i] - result.uninterruptedLosses[i]);
        result.maxAbsLossDiff = std::max(result.maxAbsLossDiff, diff);
        lossesEqual = lossesEqual && result.resumedLosses[i] == result.uninterruptedLosses[i];
    }
    const bool parametersEqual = result.resumedChecksum == result.uninterruptedChecksum;
    if (!parametersEqual)
        result.differing.push_back("final_parameters");
    if (!lossesEqual)
        result.differing.push_back("continuation_losses");
    result.checked.push_back("final_parameters");
    result.checked.push_back("continuation_losses");
    result.bitwise = lossesEqual && parametersEqual;
    result.pass = result.bitwise && result.differing.empty();
    if (result.pass) {
        result.message = "restored exactly: the fresh process continued bit for bit";
    } else {
        std::string list;
        for (const auto &d : result.differing)
            list += (list.empty() ? "" : ", ") + d;
        result.message = "restore differs in: " + list;
    }
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
        {QStringLiteral("message"), QString::fromStdString(r.message)},
    };
}

} // namespace pb
