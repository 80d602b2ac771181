#include "checkpoint/CheckpointManifest.h"

#include "checkpoint/CheckpointLayout.h"
#include "checkpoint/CheckpointTensorRules.h"
#include "checkpoint/TensorFileIo.h"
#include "config/RunConfigJson.h"
#include "model/Safetensors.h"
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
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pb {
namespace {

// manifest.json, state.json and config.json are a few KiB; anything far larger is not ours.
constexpr qint64 kMaxSmallFileBytes = 4 * 1024 * 1024;

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

// world_size and strategy, as the manifest and state.json (version 2) both carry them.
void readLayout(const FieldReader &r, const QJsonObject &root, int &worldSize, std::string &strategy)
{
    const int64_t world = r.count(root, "", "world_size");
    if (world < 1 || world > 65536)
        r.bad("world_size", "must be between 1 and 65536");
    worldSize = static_cast<int>(world);
    strategy = r.text(root, "", "strategy");
    if (!isCheckpointStrategy(strategy))
        r.bad("strategy", "'" + strategy + "' is not none, ddp, zero2 or fsdp");
}

} // namespace

const std::vector<std::string> &checkpointFilesV1()
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
    CheckpointManifest m;
    m.version = r.count(root, "", "version");
    if (m.version != 1 && m.version != kCheckpointVersion)
        r.bad("version", std::to_string(m.version) + " is not a checkpoint version this build reads (1 or " + std::to_string(kCheckpointVersion) + ")");
    m.step = r.count(root, "", "step");
    m.configHash = r.hash(root, "", "config_hash");
    if (m.version >= 2) {
        readLayout(r, root, m.worldSize, m.strategy);
    }
    const QJsonValue filesValue = r.need(root, "", "files");
    if (!filesValue.isArray())
        r.bad("files", "must be an array");
    const QJsonArray files = filesValue.toArray();
    std::set<std::string> seen;
    std::vector<std::string> names;
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
        if (m.version == 1) {
            const auto &known = checkpointFilesV1();
            if (std::find(known.begin(), known.end(), e.file) == known.end())
                r.bad(field + "file", "'" + e.file + "' is not a file of a checkpoint (model.pt, optimizer.pt, rng.pt, state.json, config.json)");
        } else if (e.file != "state.json" && e.file != "config.json" && e.file != kModelIndexFile && !parseCheckpointFileName(e.file)) {
            r.bad(field + "file", "'" + e.file + "' is not a file of a checkpoint (model, optimizer and rng .safetensors files, " + kModelIndexFile + ", state.json, config.json)");
        }
        if (!seen.insert(e.file).second)
            r.bad(field + "file", "'" + e.file + "' is listed twice");
        names.push_back(e.file);
        m.files.push_back(e);
    }
    if (m.version == 1) {
        for (const std::string &name : checkpointFilesV1())
            if (!seen.count(name))
                r.bad("files", "does not list " + name + "; every checkpoint has it");
        std::sort(m.files.begin(), m.files.end(), [](const ManifestEntry &a, const ManifestEntry &b) {
            const auto &k = checkpointFilesV1();
            return std::find(k.begin(), k.end(), a.file) < std::find(k.begin(), k.end(), b.file);
        });
    } else {
        try {
            checkCheckpointFileSet(names, m.worldSize, m.strategy, where);
        } catch (const InvalidInputError &e) {
            r.bad("files", e.message());
        }
    }
    return m;
}

namespace {

RankPosition parseRankPosition(const FieldReader &r, const QJsonObject &root, const std::string &prefix)
{
    RankPosition p;
    const QJsonObject position = r.object(root, prefix, "data_position");
    p.epoch = r.count(position, prefix + "data_position.", "epoch");
    p.index = r.count(position, prefix + "data_position.", "index");
    const std::string seed = r.text(position, prefix + "data_position.", "shuffle_seed");
    bool ok = false;
    p.shuffleSeed = QString::fromStdString(seed).toULongLong(&ok);
    if (!ok || seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos)
        r.bad(prefix + "data_position.shuffle_seed", "must be a decimal number in a string");
    const QJsonObject scale = r.object(root, prefix, "loss_scale");
    p.lossScaleEnabled = r.flag(scale, prefix + "loss_scale.", "enabled");
    const QJsonValue scaleValue = r.need(scale, prefix + "loss_scale.", "scale");
    p.lossScale = scaleValue.toDouble(-1);
    if (!scaleValue.isDouble() || !std::isfinite(p.lossScale) || p.lossScale <= 0)
        r.bad(prefix + "loss_scale.scale", "must be a positive number");
    p.goodSteps = r.count(scale, prefix + "loss_scale.", "good_steps");
    return p;
}

} // namespace

QJsonObject rankPositionJson(const RankPosition &p)
{
    return QJsonObject {{QStringLiteral("data_position"), QJsonObject {{QStringLiteral("epoch"), static_cast<qint64>(p.epoch)},
                                                                       {QStringLiteral("index"), static_cast<qint64>(p.index)},
                                                                       {QStringLiteral("shuffle_seed"), QString::number(p.shuffleSeed)}}},
                        {QStringLiteral("loss_scale"), QJsonObject {{QStringLiteral("enabled"), p.lossScaleEnabled},
                                                                    {QStringLiteral("scale"), p.lossScale},
                                                                    {QStringLiteral("good_steps"), static_cast<qint64>(p.goodSteps)}}}};
}

RankPosition parseRankPositionJson(const QJsonObject &json, const std::string &where)
{
    return parseRankPosition(FieldReader(where), json, "");
}

CheckpointState parseCheckpointState(const QByteArray &bytes, const std::string &where)
{
    const FieldReader r(where);
    const QJsonObject root = r.document(bytes);
    CheckpointState s;
    s.step = r.count(root, "", "step");
    s.configHash = r.hash(root, "", "config_hash");
    s.optimizer = r.text(root, "", "optimizer");
    s.torchVersion = r.text(root, "", "torch_version");
    if (!root.contains(QStringLiteral("ranks"))) { // version 1: one process, its position at the top
        s.ranks.push_back(parseRankPosition(r, root, ""));
        return s;
    }
    readLayout(r, root, s.worldSize, s.strategy);
    const QJsonValue ranks = r.need(root, "", "ranks");
    if (!ranks.isArray() || ranks.toArray().size() != s.worldSize)
        r.bad("ranks", "must be an array of one entry per rank (" + std::to_string(s.worldSize) + ")");
    for (qsizetype i = 0; i < ranks.toArray().size(); ++i) {
        const std::string prefix = "ranks[" + std::to_string(i) + "].";
        const QJsonValue v = ranks.toArray().at(i);
        if (!v.isObject())
            r.bad(prefix.substr(0, prefix.size() - 1), "must be an object");
        if (r.count(v.toObject(), prefix, "rank") != i)
            r.bad(prefix + "rank", "must be " + std::to_string(i) + " (ranks in order)");
        s.ranks.push_back(parseRankPosition(r, v.toObject(), prefix));
    }
    return s;
}

QByteArray checkpointStateJson(const CheckpointState &s)
{
    QJsonArray ranks;
    for (size_t i = 0; i < s.ranks.size(); ++i) {
        QJsonObject o = rankPositionJson(s.ranks[i]);
        o.insert(QStringLiteral("rank"), static_cast<qint64>(i));
        ranks.append(o);
    }
    return QJsonDocument(QJsonObject {{QStringLiteral("step"), static_cast<qint64>(s.step)},
                                      {QStringLiteral("config_hash"), QString::fromStdString(s.configHash)},
                                      {QStringLiteral("optimizer"), QString::fromStdString(s.optimizer)},
                                      {QStringLiteral("torch_version"), QString::fromStdString(s.torchVersion)},
                                      {QStringLiteral("world_size"), s.worldSize},
                                      {QStringLiteral("strategy"), QString::fromStdString(s.strategy)},
                                      {QStringLiteral("ranks"), ranks}})
        .toJson();
}

QByteArray checkpointManifestJson(const CheckpointManifest &m)
{
    QJsonArray files;
    for (const ManifestEntry &e : m.files)
        files.append(QJsonObject {{QStringLiteral("file"), QString::fromStdString(e.file)}, {QStringLiteral("bytes"), static_cast<qint64>(e.bytes)},
                                  {QStringLiteral("sha256"), QString::fromStdString(e.sha256)}});
    return QJsonDocument(QJsonObject {{QStringLiteral("format"), QStringLiteral("pilotbench-checkpoint")},
                                      {QStringLiteral("version"), static_cast<qint64>(m.version)},
                                      {QStringLiteral("step"), static_cast<qint64>(m.step)},
                                      {QStringLiteral("config_hash"), QString::fromStdString(m.configHash)},
                                      {QStringLiteral("world_size"), m.worldSize},
                                      {QStringLiteral("strategy"), QString::fromStdString(m.strategy)},
                                      {QStringLiteral("files"), files}})
        .toJson();
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

namespace {

// Every tensor file's safetensors header, read to the letter of the format (a garbage, truncated
// or hand-edited file is refused here, before any run starts), then what the files hold against
// the config and state.json (checkpoint/CheckpointTensorRules.h): a checkpoint of another shape,
// precision or optimizer is refused by file and tensor.
void checkTensorFiles(const QDir &dir, const CheckpointManifest &manifest, const RunConfig &config, const CheckpointState &state)
{
    if (manifest.version < 2)
        return;
    std::vector<CheckpointTensorFile> files;
    for (const ManifestEntry &e : manifest.files) {
        const auto name = parseCheckpointFileName(e.file);
        if (!name)
            continue;
        const QString path = dir.filePath(QString::fromStdString(e.file));
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly))
            throw InvalidInputError(path.toStdString(), "cannot be read: " + file.errorString().toStdString());
        const int64_t headerLength = safetensorsHeaderLength(file.read(8), file.size(), path.toStdString());
        files.push_back({path.toStdString(), *name, parseSafetensorsHeaderStrict(file.read(headerLength), file.size() - 8 - headerLength, path.toStdString())});
    }
    checkCheckpointTensors(files, config, state);
}

// model.safetensors.index.json, Hugging Face's map from tensor to shard: an object whose
// weight_map names only the model's own shards.
void checkModelIndex(const QDir &dir, const CheckpointManifest &manifest)
{
    const QString path = dir.filePath(QString::fromLatin1(kModelIndexFile));
    const FieldReader r(path.toStdString());
    const QJsonObject index = r.document(readSmallFile(path, "the manifest"));
    const QJsonObject map = r.object(index, "", "weight_map");
    std::set<std::string> shards;
    for (const ManifestEntry &e : manifest.files) {
        const auto f = parseCheckpointFileName(e.file);
        if (f && f->part == CheckpointPart::Model && f->rank < 0)
            shards.insert(e.file);
    }
    for (auto it = map.begin(); it != map.end(); ++it)
        if (!it.value().isString() || !shards.count(it.value().toString().toStdString()))
            r.bad("weight_map." + it.key().toStdString(), "must name one of the model's shards");
}

} // namespace

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
    info.version = manifest.version;
    info.step = manifest.step;
    info.configHash = manifest.configHash;
    std::set<QString> listed {QStringLiteral("manifest.json")};
    for (const ManifestEntry &e : manifest.files) {
        const QString path = dir.filePath(QString::fromStdString(e.file));
        requireOwnRegularFile(path, "the manifest");
        const qint64 size = QFileInfo(path).size();
        if (size != e.bytes)
            throw InvalidInputError(path.toStdString(), "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(e.bytes) + " (truncated or replaced)");
        info.totalBytes += e.bytes;
        info.files.push_back(e);
        listed.insert(QString::fromStdString(e.file));
    }
    // Nothing else lives in a step folder: an unlisted file or link would travel with an export and
    // be taken for part of the checkpoint.
    for (const QString &name : dir.entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot))
        if (!listed.count(name))
            throw InvalidInputError(dir.filePath(name).toStdString(), "is not part of a checkpoint and not in its manifest; a checkpoint folder holds only its own files");
    if (hashes == ContentHashes::Check) {
        // One SHA-256 stream is slower than the disk: the files are hashed side by side.
        std::vector<std::string> digests(manifest.files.size());
        runInParallel(manifest.files.size(), [&](size_t i) { digests[i] = sha256OfFile(dir.filePath(QString::fromStdString(manifest.files[i].file))); });
        for (size_t i = 0; i < digests.size(); ++i)
            if (digests[i] != manifest.files[i].sha256)
                throw InvalidInputError(dir.filePath(QString::fromStdString(manifest.files[i].file)).toStdString(),
                                        "SHA-256 differs from the manifest: the file was altered or corrupted");
    }
    // The hashes match, so these are the bytes the writer wrote, or a consistent forgery: check that
    // they also agree with the manifest and with each other.
    const QString statePath = dir.filePath(QStringLiteral("state.json"));
    info.state = parseCheckpointState(readSmallFile(statePath, "the manifest"), statePath.toStdString());
    if (info.state.step != manifest.step)
        throw InvalidInputError(statePath.toStdString(), "step: " + std::to_string(info.state.step) + " disagrees with the manifest's step " + std::to_string(manifest.step));
    if (info.state.configHash != manifest.configHash)
        throw InvalidInputError(statePath.toStdString(), "config_hash: disagrees with the manifest's config_hash");
    if (info.state.worldSize != manifest.worldSize || info.state.strategy != manifest.strategy)
        throw InvalidInputError(statePath.toStdString(), "world_size/strategy: " + std::to_string(info.state.worldSize) + " " + info.state.strategy +
                                                             " disagrees with the manifest's " + std::to_string(manifest.worldSize) + " " + manifest.strategy);
    const QString configPath = dir.filePath(QStringLiteral("config.json"));
    RunConfig config;
    try {
        const QByteArray bytes = readSmallFile(configPath, "the manifest");
        QJsonParseError error {};
        const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
        if (!doc.isObject())
            throw InvalidInputError(configPath.toStdString(), "is not a JSON object");
        config = parseRunConfigJson(doc.object());
    } catch (const InvalidInputError &e) {
        throw InvalidInputError(configPath.toStdString(), std::string("is not a run config: ") + e.what());
    }
    const std::string writtenHash = configHash(config);
    if (writtenHash != manifest.configHash)
        throw InvalidInputError(configPath.toStdString(), "is another run configuration (hash " + writtenHash + ") than the manifest's config_hash " + manifest.configHash);
    checkStateOptimizer(info.state, config, statePath.toStdString());
    checkTensorFiles(dir, manifest, config, info.state);
    if (manifest.version >= 2 && listed.count(QString::fromLatin1(kModelIndexFile)))
        checkModelIndex(dir, manifest);
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
