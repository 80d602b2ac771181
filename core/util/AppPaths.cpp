#include "util/AppPaths.h"

#include <QDir>
#include <QFile>
#include <QLockFile>
#include <QStandardPaths>
#include <spdlog/spdlog.h>

#include <mutex>
#include <vector>

namespace pb {
namespace {

const QString kFolder = QStringLiteral("/pilotbench");
const QString kDatabase = QStringLiteral("history.sqlite");

QString genericLocation(QStandardPaths::StandardLocation location, const QString &fallback)
{
    const QString base = QStandardPaths::writableLocation(location);
    return (base.isEmpty() ? QDir::homePath() + fallback : base) + kFolder;
}

// SQLite's files for one database: a hot journal or WAL belongs to its database and must travel
// with it, or the last commits are lost.
QStringList databaseFiles(const QString &database)
{
    return {database, database + QStringLiteral("-wal"), database + QStringLiteral("-shm"), database + QStringLiteral("-journal")};
}

// The history in `dir`, renamed there from the legacy folder first when only that one has one.
// Only the history moves: checkpoints and watched runs' folders stay where the recorded runs say
// they are. A move that fails leaves everything in the legacy folder, which stays in use.
QString adoptLegacyDatabase(const QString &dir)
{
    const QString from = legacyAppDataDir() + QLatin1Char('/') + kDatabase;
    const QString to = dir + QLatin1Char('/') + kDatabase;
    if (!QFile::exists(from))
        return to;
    // Ranks started together (torchrun) all get here on the first run: one moves, the others then
    // find the history in its new place.
    QLockFile lock(dir + QStringLiteral("/.history-move.lock"));
    if (!lock.tryLock(10000))
        return QFile::exists(to) ? to : from;
    const QStringList sources = databaseFiles(from), targets = databaseFiles(to);
    for (const QString &target : targets) {
        if (QFile::exists(target)) {
            // A history here already (or another process just moved it): never overwritten.
            spdlog::debug("history: {} is in use; {} is left as it is", to.toStdString(), from.toStdString());
            return to;
        }
    }
    std::vector<int> moved;
    for (int i = 0; i < sources.size(); ++i) {
        if (!QFile::exists(sources[i]))
            continue;
        // QFile::rename never replaces an existing file.
        if (!QFile::rename(sources[i], targets[i])) {
            // Put back what moved, so the database is never apart from its journal.
            for (int j : moved)
                QFile::rename(targets[j], sources[j]);
            spdlog::error("history: cannot move {} to {}; the history stays in {}", sources[i].toStdString(), targets[i].toStdString(),
                          legacyAppDataDir().toStdString());
            return from;
        }
        moved.push_back(i);
    }
    spdlog::info("history: moved {} from {} to {}", kDatabase.toStdString(), legacyAppDataDir().toStdString(), dir.toStdString());
    return to;
}

} // namespace

QString appDataDir()
{
    const QString dir = genericLocation(QStandardPaths::GenericDataLocation, QStringLiteral("/.local/share"));
    QDir().mkpath(dir);
    return dir;
}

QString appConfigDir() { return genericLocation(QStandardPaths::GenericConfigLocation, QStringLiteral("/.config")); }

QString legacyAppDataDir() { return genericLocation(QStandardPaths::GenericDataLocation, QStringLiteral("/.local/share")) + kFolder; }

QString legacyAppConfigDir() { return appConfigDir() + kFolder; }

QString defaultDatabasePath()
{
    const QString dir = appDataDir();
    // Looked at once per process and data folder (tests point XDG_DATA_HOME elsewhere between calls).
    static std::mutex mutex;
    static QString resolvedFor, resolved;
    const std::lock_guard<std::mutex> lock(mutex);
    if (resolvedFor != dir) {
        resolved = adoptLegacyDatabase(dir);
        resolvedFor = dir;
    }
    return resolved;
}

QString defaultLogPath() { return appDataDir() + QStringLiteral("/pilotbench.log"); }

} // namespace pb
