#pragma once
// The one rule for files a command reads and writes. Inputs are regular files with a size limit (a
// FIFO would hang the read, /dev/zero would exhaust memory); outputs never name a command's own input
// or the open history database, are never a folder, and are replaced atomically so a failed write
// (full disk, quota) leaves the previous file as it was.
#include <QByteArray>
#include <QString>
#include <QStringList>

#include <string>

namespace pb {

// Throws InvalidInputError naming `path` unless it is an existing regular file of at most maxBytes
// (symbolic links are followed; what they point at must be a regular file).
void requireRegularFile(const QString &path, qint64 maxBytes);
// requireRegularFile, then the whole content.
QByteArray readRegularFile(const QString &path, qint64 maxBytes);

// A path an output must not replace, and what it is ("the history database", "the input config").
struct ProtectedPath {
    QString path;
    QString what;
};
// The history database and the files SQLite keeps beside it (-wal, -shm, -journal).
QList<ProtectedPath> databasePaths(const QString &database);
// PRAGMA application_id of a PilotBench history ("PBhs"), set since the first schema version.
constexpr int kHistoryApplicationId = 0x50426873;
// Throws InvalidInputError naming `option` when writing `path` would damage a PilotBench history, any
// one, not only the open one: the file (by name or through a link) is an SQLite file carrying the
// history's application id, or is named as the -wal, -shm or -journal file of such a file.
void refuseHistoryFile(const QString &path, const std::string &option);
// Throws InvalidInputError naming `option` when `path` is empty, a folder or other non-regular file,
// sits in a folder that does not exist, is (by name, link or hard link) one of `protectedPaths`, or
// is a history or one of its files (refuseHistoryFile).
void checkOutputPath(const QString &path, const QList<ProtectedPath> &protectedPaths, const std::string &option);
// Refuses a history as refuseHistoryFile does (naming the path), then writes through QSaveFile with unbuffered writes, so that a full disk fails at write() instead of
// committing an empty file (Qt 6.4's commit misses an error raised by its final flush). Throws
// PilotBenchError(Failure) naming the path; the previous file is untouched then.
void writeFileAtomically(const QString &path, const QByteArray &bytes);

} // namespace pb
