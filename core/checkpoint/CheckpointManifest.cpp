#include "checkpoint/CheckpointManifest.h"

#include "util/Errors.h"
#include "util/Sha256.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <fcntl.h>
#include <unistd.h>

namespace pb {

std::string sha256OfFile(const QString &path)
{
    QString error;
    std::string digest = sha256OfFileHex(path, &error);
    if (digest.empty())
        throw InvalidInputError(path.toStdString(), "cannot be read: " + error.toStdString());
    return digest;
}

void fsyncFile(const QString &path)
{
    const int fd = ::open(QFile::encodeName(path).constData(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

void fsyncDirectory(const QString &path) { fsyncFile(path); }

void writeFileAtomically(const QString &path, const QByteArray &data)
{
    const QString temp = path + QStringLiteral(".tmp");
    QFile file(temp);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(data) != data.size() || !file.flush())
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be written: " + file.errorString().toStdString());
    ::fsync(file.handle());
    file.close();
    QFile::remove(path);
    if (!QFile::rename(temp, path))
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be renamed into place");
    fsyncDirectory(QFileInfo(path).absolutePath());
}

CheckpointInfo verifyCheckpoint(const QString &stepFolder)
{
    QElapsedTimer timer;
    timer.start();
    CheckpointInfo info;
    info.path = stepFolder;
    const QString manifestPath = QDir(stepFolder).filePath(QStringLiteral("manifest.json"));
    QFile manifestFile(manifestPath);
    if (!manifestFile.exists())
        throw InvalidInputError(manifestPath.toStdString(), "missing: the checkpoint is incomplete (a write was interrupted?) or this is not a checkpoint folder");
    if (!manifestFile.open(QIODevice::ReadOnly))
        throw InvalidInputError(manifestPath.toStdString(), "cannot be read");
    QJsonParseError error {};
    const auto doc = QJsonDocument::fromJson(manifestFile.readAll(), &error);
    if (doc.isNull() || !doc.isObject())
        throw InvalidInputError(manifestPath.toStdString(), "is not valid JSON: " + error.errorString().toStdString());
    const auto root = doc.object();
    info.step = root.value(QStringLiteral("step")).toInteger();
    info.configHash = root.value(QStringLiteral("config_hash")).toString().toStdString();
    const auto files = root.value(QStringLiteral("files")).toArray();
    if (files.isEmpty())
        throw InvalidInputError(manifestPath.toStdString(), "lists no files");
    for (const auto &value : files) {
        const auto entry = value.toObject();
        ManifestEntry e;
        e.file = entry.value(QStringLiteral("file")).toString().toStdString();
        e.bytes = entry.value(QStringLiteral("bytes")).toInteger(-1);
        e.sha256 = entry.value(QStringLiteral("sha256")).toString().toStdString();
        if (e.file.empty() || e.file.find('/') != std::string::npos || e.bytes < 0 || e.sha256.size() != 64)
            throw InvalidInputError(manifestPath.toStdString(), "has a malformed entry");
        const QString path = QDir(stepFolder).filePath(QString::fromStdString(e.file));
        const QFileInfo fi(path);
        if (!fi.exists())
            throw InvalidInputError(path.toStdString(), "missing from the checkpoint (listed in the manifest)");
        if (fi.size() != e.bytes)
            throw InvalidInputError(path.toStdString(), "has " + std::to_string(fi.size()) + " bytes, the manifest says " + std::to_string(e.bytes) + " (truncated or replaced)");
        if (sha256OfFile(path) != e.sha256)
            throw InvalidInputError(path.toStdString(), "SHA-256 differs from the manifest: the file was altered or corrupted");
        info.totalBytes += e.bytes;
        info.files.push_back(e);
    }
    info.verifyMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    return info;
}

QString resolveCheckpointFolder(const QString &path)
{
    const QDir dir(path);
    if (!dir.exists())
        throw InvalidInputError(path.toStdString(), "no such checkpoint folder");
    if (dir.exists(QStringLiteral("manifest.json")))
        return dir.absolutePath();
    const auto steps = dir.entryList({QStringLiteral("step-*")}, QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name | QDir::Reversed);
    for (const auto &name : steps)
        if (QFileInfo::exists(dir.filePath(name + QStringLiteral("/manifest.json"))))
            return dir.absoluteFilePath(name);
    throw InvalidInputError(path.toStdString(), "holds no complete checkpoint (no manifest.json in it or in a step-* folder)");
}

} // namespace pb
