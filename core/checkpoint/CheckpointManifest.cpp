#include "checkpoint/CheckpointManifest.h"

#include "config/RunConfigJson.h"
#include "config/RunConfigParse.h"
#include "config/JsonText.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "util/Sha256.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pb {
namespace {

// manifest.json, state.json and config.json are a few KiB; anything far larger is not ours.
constexpr qint64 kMaxSmallFileBytes = 4 * 1024 * 1024;
constexpr int64_t kManifestVersion = 1;

// Field-by-field reading of one small JSON file; every refusal names the file and the field.
class FieldReader {
public:
    explicit FieldReader(std::string where) : m_where(std::move(where)) {}

    QJsonObject document(const QByteArray &bytes) const
    {
        QJsonParseError error {};
        const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
        if (error.error != QJsonParseError::NoError)
            bad("", "is not valid JSON: " + error.errorString().toStdString());
        checkJsonText(bytes, m_where);
        if (!doc.isObject())
            bad("", "must be a JSON object");
        return doc.object();
    }
    [[noreturn]] void bad(const std::string &field, const std::string &rule) const
    {
        throw InvalidInputError(m_where, (field.empty() ? std::string() : field + ": ") + rule);
    }
    QJsonValue need(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined())
            bad(field + key, "is missing");
        return v;
    }
    int64_t count(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const QJsonValue v = need(o, field, key);
        const double d = v.toDouble(-1);
        // Integers only, within what a double holds exactly.
        if (!v.isDouble() || d < 0 || d > 9007199254740992.0 || std::floor(d) != d)
            bad(field + key, "must be a whole number of at least 0");
        return static_cast<int64_t>(d);
    }
    std::string text(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const QJsonValue v = need(o, field, key);
        if (!v.isString())
            bad(field + key, "must be a string");
        return v.toString().toStdString();
    }
    bool flag(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const QJsonValue v = need(o, field, key);
        if (!v.isBool())
            bad(field + key, "must be true or false");
        return v.toBool();
    }
    QJsonObject object(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const QJsonValue v = need(o, field, key);
        if (!v.isObject())
            bad(field + key, "must be an object");
        return v.toObject();
    }
    std::string hash(const QJsonObject &o, const std::string &field, const char *key) const
    {
        const std::string h = text(o, field, key);
        if (h.empty() || h.size() > 128 || h.find_first_not_of("0123456789abcdef") != std::string::npos)
            bad(field + key, "must be a lowercase hexadecimal digest");
        return h;
    }

private:
    std::string m_where;
};

// lstat: a checkpoint's own files are never links (a link would make verify and export read
// whatever it points at, /etc/passwd included).
void requireOwnRegularFile(const QString &path, const std::string &listedIn)
{
    struct stat st {};
    if (::lstat(QFile::encodeName(path).constData(), &st) != 0)
        throw InvalidInputError(path.toStdString(), "missing from the checkpoint (listed in " + listedIn + ")");
    if (S_ISLNK(st.st_mode))
        throw InvalidInputError(path.toStdString(), "is a symbolic link; a checkpoint holds its own files, never links");
    if (!S_ISREG(st.st_mode))
        throw InvalidInputError(path.toStdString(), "is not a regular file");
}

QByteArray readSmallFile(const QString &path, const std::string &listedIn)
{
    requireOwnRegularFile(path, listedIn);
    return readRegularFile(path, kMaxSmallFileBytes);
}

} // namespace

const std::vector<std::string> &checkpointFiles()
{
    static const std::vector<std::string> files {"model.pt", "optimizer.pt", "rng.pt", "state.json", "config.json"};
    return files;
}

CheckpointManifest parseCheckpointManifest(const QByteArray &bytes, const std::string &where)
{
    const FieldReader r(where);
    const QJsonObject root = r.document(bytes);
    if (r.text(root, "", "format") != "pilotbench-checkpoint")
        r.bad("format", "must be \"pilotbench-checkpoint\"");
    const int64_t version = r.count(root, "", "version");
    if (version != kManifestVersion)
        r.bad("version", std::to_string(version) + " is not a checkpoint version this build reads (" + std::to_string(kManifestVersion) + ")");
    CheckpointManifest m;
    m.step = r.count(root, "", "step");
    m.configHash = r.hash(root, "", "config_hash");
    const QJsonValue filesValue = r.need(root, "", "files");
    if (!filesValue.isArray())
        r.bad("files", "must be an array");
    const QJsonArray files = filesValue.toArray();
    std::set<std::string> seen;
    for (qsizetype i = 0; i < files.size(); ++i) {
        const std::string field = "files[" + std::to_string(i) + "].";
        if (!files[i].isObject())
            r.bad(field.substr(0, field.size() - 1), "must be an object");
        const QJsonObject entry = files[i].toObject();
        ManifestEntry e;
        e.file = r.text(entry, field, "file");
        e.bytes = r.count(entry, field, "bytes");
        e.sha256 = r.hash(entry, field, "sha256");
        if (e.sha256.size() != 64)
            r.bad(field + "sha256", "must be a SHA-256 digest (64 hexadecimal digits)");
        const auto &known = checkpointFiles();
        if (std::find(known.begin(), known.end(), e.file) == known.end())
            r.bad(field + "file", "'" + e.file + "' is not a file of a checkpoint (model.pt, optimizer.pt, rng.pt, state.json, config.json)");
        if (!seen.insert(e.file).second)
            r.bad(field + "file", "'" + e.file + "' is listed twice");
        m.files.push_back(e);
    }
    for (const std::string &name : checkpointFiles())
        if (!seen.count(name))
            r.bad("files", "does not list " + name + "; every checkpoint has it");
    std::sort(m.files.begin(), m.files.end(), [](const ManifestEntry &a, const ManifestEntry &b) {
        const auto &k = checkpointFiles();
        return std::find(k.begin(), k.end(), a.file) < std::find(k.begin(), k.end(), b.file);
    });
    return m;
}

CheckpointState parseCheckpointState(const QByteArray &bytes, const std::string &where)
{
    const FieldReader r(where);
    const QJsonObject root = r.document(bytes);
    CheckpointState s;
    s.step = r.count(root, "", "step");
    const QJsonObject position = r.object(root, "", "data_position");
    s.epoch = r.count(position, "data_position.", "epoch");
    s.index = r.count(position, "data_position.", "index");
    const std::string seed = r.text(position, "data_position.", "shuffle_seed");
    bool ok = false;
    s.shuffleSeed = QString::fromStdString(seed).toULongLong(&ok);
    if (!ok || seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos)
        r.bad("data_position.shuffle_seed", "must be a decimal number in a string");
    const QJsonObject scale = r.object(root, "", "loss_scale");
    s.lossScaleEnabled = r.flag(scale, "loss_scale.", "enabled");
    const QJsonValue scaleValue = r.need(scale, "loss_scale.", "scale");
    s.lossScale = scaleValue.toDouble(-1);
    if (!scaleValue.isDouble() || !std::isfinite(s.lossScale) || s.lossScale <= 0)
        r.bad("loss_scale.scale", "must be a positive number");
    s.goodSteps = r.count(scale, "loss_scale.", "good_steps");
    s.configHash = r.hash(root, "", "config_hash");
    s.optimizer = r.text(root, "", "optimizer");
    s.torchVersion = r.text(root, "", "torch_version");
    return s;
}

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

CheckpointInfo verifyCheckpoint(const QString &stepFolder, ContentHashes hashes)
{
    QElapsedTimer timer;
    timer.start();
    CheckpointInfo info;
    info.path = stepFolder;
    const QDir dir(stepFolder);
    const QString manifestPath = dir.filePath(QStringLiteral("manifest.json"));
    if (!QFileInfo(manifestPath).isSymLink() && !QFileInfo::exists(manifestPath))
        throw InvalidInputError(manifestPath.toStdString(), "missing: the checkpoint is incomplete (a write was interrupted?) or this is not a checkpoint folder");
    const CheckpointManifest manifest = parseCheckpointManifest(readSmallFile(manifestPath, "the folder"), manifestPath.toStdString());
    info.step = manifest.step;
    info.configHash = manifest.configHash;
    for (const ManifestEntry &e : manifest.files) {
        const QString path = dir.filePath(QString::fromStdString(e.file));
        requireOwnRegularFile(path, "the manifest");
        const qint64 size = QFileInfo(path).size();
        if (size != e.bytes)
            throw InvalidInputError(path.toStdString(), "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(e.bytes) + " (truncated or replaced)");
        if (hashes == ContentHashes::Check && sha256OfFile(path) != e.sha256)
            throw InvalidInputError(path.toStdString(), "SHA-256 differs from the manifest: the file was altered or corrupted");
        info.totalBytes += e.bytes;
        info.files.push_back(e);
    }
    // Nothing else lives in a step folder: an unlisted file or link would travel with an export and
    // be taken for part of the checkpoint.
    for (const QString &name : dir.entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot)) {
        const auto &known = checkpointFiles();
        if (name != QLatin1String("manifest.json") && std::find(known.begin(), known.end(), name.toStdString()) == known.end())
            throw InvalidInputError(dir.filePath(name).toStdString(), "is not part of a checkpoint and not in its manifest; a checkpoint folder holds only its own files");
    }
    // The hashes match, so these are the bytes the writer wrote, or a consistent forgery: check that
    // they also agree with the manifest and with each other.
    const QString statePath = dir.filePath(QStringLiteral("state.json"));
    info.state = parseCheckpointState(readSmallFile(statePath, "the manifest"), statePath.toStdString());
    if (info.state.step != manifest.step)
        throw InvalidInputError(statePath.toStdString(), "step: " + std::to_string(info.state.step) + " disagrees with the manifest's step " + std::to_string(manifest.step));
    if (info.state.configHash != manifest.configHash)
        throw InvalidInputError(statePath.toStdString(), "config_hash: disagrees with the manifest's config_hash");
    const QString configPath = dir.filePath(QStringLiteral("config.json"));
    std::string writtenHash;
    try {
        const QByteArray bytes = readSmallFile(configPath, "the manifest");
        QJsonParseError error {};
        const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
        if (!doc.isObject())
            throw InvalidInputError(configPath.toStdString(), "is not a JSON object");
        writtenHash = configHash(parseRunConfigJson(doc.object()));
    } catch (const InvalidInputError &e) {
        throw InvalidInputError(configPath.toStdString(), std::string("is not a run config: ") + e.what());
    }
    if (writtenHash != manifest.configHash)
        throw InvalidInputError(configPath.toStdString(), "is another run configuration (hash " + writtenHash + ") than the manifest's config_hash " + manifest.configHash);
    info.verifyMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    return info;
}

CheckpointInfo verifyResumePoint(const QString &path, const std::string &expectedHash)
{
    const CheckpointInfo info = verifyCheckpoint(resolveCheckpointFolder(path));
    if (info.configHash != expectedHash)
        throw InvalidInputError(QDir(info.path).filePath(QStringLiteral("config.json")).toStdString(),
                                "was written for another run configuration (hash " + info.configHash + ", this run is " + expectedHash + ")");
    return info;
}

QString resolveCheckpointFolder(const QString &path)
{
    const QDir dir(path);
    if (!dir.exists())
        throw InvalidInputError(path.toStdString(), "no such checkpoint folder");
    if (dir.exists(QStringLiteral("manifest.json")))
        return dir.absolutePath();
    const auto steps = dir.entryList({QStringLiteral("step-*")}, QDir::Dirs | QDir::NoDotAndDotDot | QDir::NoSymLinks, QDir::Name | QDir::Reversed);
    for (const auto &name : steps)
        if (QFileInfo::exists(dir.filePath(name + QStringLiteral("/manifest.json"))))
            return dir.absoluteFilePath(name);
    throw InvalidInputError(path.toStdString(), "holds no complete checkpoint (no manifest.json in it or in a step-* folder)");
}

} // namespace pb
