#include "util/FileRules.h"

#include "util/Errors.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QSaveFile>

#include <sys/stat.h>

namespace pb {
namespace {

std::string kindOf(const struct stat &st)
{
    if (S_ISDIR(st.st_mode))
        return "a folder";
    if (S_ISFIFO(st.st_mode))
        return "a named pipe (FIFO)";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        return "a device";
    if (S_ISSOCK(st.st_mode))
        return "a socket";
    return "not a regular file";
}

bool statPath(const QString &path, struct stat &st) { return ::stat(QFile::encodeName(path).constData(), &st) == 0; }

// The SQLite file header (sqlite.org/fileformat.html): 16 bytes of magic, the application id as a
// big-endian 32-bit integer at offset 68. Read only from a regular file, so a FIFO cannot block it.
bool carriesHistoryId(const QString &path)
{
    struct stat st {};
    if (!statPath(path, st) || !S_ISREG(st.st_mode) || st.st_size < 100)
        return false;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return false;
    const QByteArray header = file.read(100);
    if (header.size() < 100 || !header.startsWith(QByteArrayLiteral("SQLite format 3\0")))
        return false;
    const auto byte = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(header[i])); };
    const uint32_t id = byte(68) << 24 | byte(69) << 16 | byte(70) << 8 | byte(71);
    return id == static_cast<uint32_t>(kHistoryApplicationId);
}

} // namespace

void requireRegularFile(const QString &path, qint64 maxBytes)
{
    const std::string where = path.toStdString();
    struct stat st {};
    if (path.isEmpty())
        throw InvalidInputError("file", "the path is empty");
    if (!statPath(path, st))
        throw InvalidInputError(where, QFileInfo(path).isSymLink() ? "is a symbolic link to nothing" : "no such file");
    if (!S_ISREG(st.st_mode))
        throw InvalidInputError(where, "is " + kindOf(st) + ", not a file");
    if (st.st_size > maxBytes)
        throw InvalidInputError(where, "is " + QLocale::c().formattedDataSize(st.st_size).toStdString() + ", larger than the "
                                           + QLocale::c().formattedDataSize(maxBytes).toStdString() + " such a file can be");
}

QByteArray readRegularFile(const QString &path, qint64 maxBytes)
{
    requireRegularFile(path, maxBytes);
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw InvalidInputError(path.toStdString(), "cannot be read: " + file.errorString().toStdString());
    // Bounded again here: the file may have grown since the check.
    QByteArray bytes = file.read(maxBytes + 1);
    if (bytes.size() > maxBytes)
        throw InvalidInputError(path.toStdString(), "grew beyond the size such a file can be while it was read");
    return bytes;
}

QList<ProtectedPath> databasePaths(const QString &database)
{
    const QString what = QStringLiteral("the history database");
    return {{database, what}, {database + QStringLiteral("-wal"), what}, {database + QStringLiteral("-shm"), what}, {database + QStringLiteral("-journal"), what}};
}

void refuseHistoryFile(const QString &path, const std::string &option)
{
    if (path.isEmpty())
        return;
    const QFileInfo info(path);
    // Both the name given and what a link leads to: a link named "out.json" may point at "h.db-wal".
    QStringList names {QDir::cleanPath(info.absoluteFilePath())};
    const QString canonical = info.canonicalFilePath();
    if (!canonical.isEmpty())
        names << canonical;
    else if (info.isSymLink())
        names << QDir::cleanPath(QFileInfo(info.symLinkTarget()).absoluteFilePath());
    for (const QString &name : std::as_const(names)) {
        QString database = name;
        for (const char *suffix : {"-wal", "-shm", "-journal"})
            if (name.endsWith(QLatin1String(suffix)))
                database = name.chopped(static_cast<qsizetype>(qstrlen(suffix)));
        if (carriesHistoryId(database))
            throw InvalidInputError(option, "'" + path.toStdString() + "' is " + (database == name ? std::string("a PilotBench history database")
                                                                                                     : "a file of the PilotBench history database " + database.toStdString())
                                                + "; writing there would destroy recorded runs, name another file");
    }
}

void checkOutputPath(const QString &path, const QList<ProtectedPath> &protectedPaths, const std::string &option)
{
    if (path.isEmpty())
        throw InvalidInputError(option, "the output path is empty");
    const std::string &where = option;
    const std::string named = "'" + path.toStdString() + "' ";
    struct stat st {};
    const bool exists = statPath(path, st);
    if (exists && !S_ISREG(st.st_mode))
        throw InvalidInputError(where, named + "is " + kindOf(st) + "; name a file to write");
    const QFileInfo info(path);
    if (!exists && !QFileInfo(info.absolutePath()).isDir())
        throw InvalidInputError(where, named + "cannot be written: its folder " + info.absolutePath().toStdString() + " does not exist");
    const QString absolute = QDir::cleanPath(info.absoluteFilePath());
    for (const ProtectedPath &p : protectedPaths) {
        if (p.path.isEmpty())
            continue;
        struct stat other {};
        const bool sameFile = exists && statPath(p.path, other) && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
        const bool sameName = absolute == QDir::cleanPath(QFileInfo(p.path).absoluteFilePath());
        if (sameFile || sameName)
            throw InvalidInputError(where, named + "is " + p.what.toStdString() + " (" + p.path.toStdString() + "); writing there would destroy it, name another file");
    }
    refuseHistoryFile(path, option);
}

void writeFileAtomically(const QString &path, const QByteArray &bytes)
{
    refuseHistoryFile(path, "output");
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Unbuffered))
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be written: " + file.errorString().toStdString());
    if (file.write(bytes) != bytes.size()) {
        const std::string reason = file.errorString().toStdString();
        file.cancelWriting();
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be written (" + reason + "); the previous file, if any, is unchanged");
    }
    if (!file.commit())
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be written (" + file.errorString().toStdString() + "); the previous file, if any, is unchanged");
}

} // namespace pb
