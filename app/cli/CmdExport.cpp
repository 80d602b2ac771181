// pilotbench-cli export: move a run's artifacts off the rented machine (local NVMe is a working
// disk, not a backup): its checkpoints, its report and its history, to a folder (a mounted backup
// or network disk) and optionally on through a command such as rsync; every checkpoint copy is
// verified against its manifest, and the time it took is recorded with the run.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "app/cli/PilotPrinter.h"
#include "checkpoint/CheckpointManifest.h"
#include "history/HistoryExport.h"
#include "history/HistoryStore.h"
#include "report/ReportWriter.h"
#include "workflow/CatalogSource.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QProcess>

namespace pb::cli {
namespace {

// Copies exactly the files the verified source manifest lists, manifest last: nothing else in the
// folder (a stray file, a link planted beside the checkpoint) travels with it.
int64_t copyCheckpoint(const CheckpointInfo &source, const QString &to)
{
    int64_t bytes = 0;
    if (!QDir().mkpath(to))
        throw PilotBenchError(ExitCode::Failure, to.toStdString() + ": cannot be created");
    std::vector<std::string> names;
    for (const ManifestEntry &e : source.files)
        names.push_back(e.file);
    names.push_back("manifest.json");
    for (const std::string &name : names) {
        const QString from = QDir(source.path).filePath(QString::fromStdString(name));
        const QString target = QDir(to).filePath(QString::fromStdString(name));
        QFile::remove(target);
        if (!QFile::copy(from, target))
            throw PilotBenchError(ExitCode::Failure, target.toStdString() + ": the copy failed (disk full or not writable?)");
        fsyncFile(target);
        bytes += QFileInfo(target).size();
    }
    fsyncDirectory(to);
    return bytes;
}

int runExport(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("run"), QStringLiteral("The run to export."), QStringLiteral("id")},
        {QStringLiteral("to"), QStringLiteral("Destination folder (a mounted backup or network disk)."), QStringLiteral("dir")},
        {QStringLiteral("command"), QStringLiteral("Then run this with /bin/sh, {dir} standing for the exported folder (passed safely as \"$1\"; do not quote it), e.g. \"rsync -a {dir} host:/backup/\"."), QStringLiteral("cmd")},
        {QStringLiteral("db"), QStringLiteral("History database."), QStringLiteral("file")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    if (!parseArgs(parser, ctx, QStringLiteral("Copy a run's checkpoints, report and history off this machine, verified.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : 2;
    bool ok = false;
    const int64_t runId = parser.value(QStringLiteral("run")).toLongLong(&ok);
    if (!ok || runId < 1)
        throw InvalidInputError("--run", "a run id (see 'pilotbench-cli history') is required");
    if (parser.value(QStringLiteral("to")).isEmpty())
        throw InvalidInputError("--to", "a destination folder is required");
    const QString database = databaseFrom(parser);
    HistoryStore store(database, HistoryStore::Access::ReadOnlyWhereNeeded);
    if (!store.findRun(runId))
        throw InvalidInputError("--run", "there is no run " + std::to_string(runId) + " in " + database.toStdString());

    QElapsedTimer timer;
    timer.start();
    const QString folder = QDir(parser.value(QStringLiteral("to"))).filePath(QStringLiteral("pilotbench-run-%1").arg(runId));
    if (!QDir().mkpath(folder))
        throw InvalidInputError("--to", "cannot create '" + folder.toStdString() + "'");
    int64_t bytes = 0;
    QJsonArray checkpoints;
    for (const auto &write : store.checkpoints(runId)) {
        const QString source = QString::fromStdString(write.path);
        if (!QFileInfo::exists(source + QStringLiteral("/manifest.json"))) {
            checkpoints.append(QJsonObject {{QStringLiteral("path"), source}, {QStringLiteral("status"), QStringLiteral("missing on this machine")}});
            continue;
        }
        const QString target = QDir(folder).filePath(QStringLiteral("checkpoints/") + QFileInfo(source).fileName());
        bytes += copyCheckpoint(verifyCheckpoint(source), target);
        const CheckpointInfo info = verifyCheckpoint(target); // the copy, not the original
        checkpoints.append(QJsonObject {{QStringLiteral("path"), target}, {QStringLiteral("status"), QStringLiteral("verified")},
                                        {QStringLiteral("bytes"), static_cast<double>(info.totalBytes)}});
    }
    const QString historyFile = QDir(folder).filePath(QStringLiteral("history.json"));
    const QString samplesFile = QDir(folder).filePath(QStringLiteral("samples.csv"));
    const QString reportFile = QDir(folder).filePath(QStringLiteral("report.pdf"));
    for (const QString &file : {historyFile, samplesFile, reportFile})
        checkOutputPath(file, databasePaths(database), "--to");
    writeRunsJson(store, {runId}, historyFile);
    writeSamplesCsv(store, {runId}, samplesFile);
    report::writeRunReport(database, runId, reportFile, activeCatalog());
    bytes += QFileInfo(historyFile).size() + QFileInfo(reportFile).size();
    const double copyMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;

    QString commandResult;
    double commandMs = 0;
    if (parser.isSet(QStringLiteral("command"))) {
        // The folder reaches the shell as its first positional parameter, never as command text, so
        // no character in a destination's name ($(...), backquotes, ;) can run anything.
        QString command = parser.value(QStringLiteral("command"));
        command.replace(QStringLiteral("{dir}"), QStringLiteral("\"$1\""));
        QElapsedTimer commandTimer;
        commandTimer.start();
        QProcess process;
        process.start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), command, QStringLiteral("pilotbench-export"), folder});
        process.waitForFinished(-1);
        commandMs = static_cast<double>(commandTimer.nsecsElapsed()) / 1e6;
        if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0)
            throw PilotBenchError(ExitCode::Failure, "the export command failed (exit " + std::to_string(process.exitCode()) + "): " +
                                                         QString::fromLocal8Bit(process.readAllStandardError()).trimmed().toStdString());
        commandResult = QStringLiteral("ok");
    }
    const QString note = QStringLiteral("exported to %1 at %2: %3, %4 checkpoint(s) verified, %5 s%6")
                             .arg(folder, QDateTime::currentDateTimeUtc().toString(Qt::ISODate), formatBytes(static_cast<double>(bytes)))
                             .arg(checkpoints.size())
                             .arg((copyMs + commandMs) / 1000.0, 0, 'f', 2)
                             .arg(commandResult.isEmpty() ? QString() : QStringLiteral(", command ok"));
    const auto record = store.run(runId);
    // A history this user cannot write is still exported; only the note of the export is left out.
    if (store.readOnly())
        ctx.err << "note: " << database << " is read-only here; the export is not noted on run " << runId << '\n';
    else
        store.setNotes(runId, record.notes.isEmpty() ? note : record.notes + QLatin1Char('\n') + note);

    if (parser.isSet(QStringLiteral("json"))) {
        printJson(ctx, QJsonObject {{QStringLiteral("run_id"), static_cast<double>(runId)}, {QStringLiteral("folder"), folder},
                                    {QStringLiteral("bytes"), static_cast<double>(bytes)}, {QStringLiteral("checkpoints"), checkpoints},
                                    {QStringLiteral("copy_ms"), copyMs}, {QStringLiteral("command_ms"), commandMs},
                                    {QStringLiteral("command"), commandResult.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(commandResult)}});
    } else {
        ctx.out << note << '\n';
    }
    return 0;
}

const CliRegistration registration({QStringLiteral("export"), QStringLiteral("Copy a run's checkpoints, report and history off the machine, verified"), &runExport});

} // namespace
} // namespace pb::cli
