#include "config/HfHubCache.h"

#include "util/Errors.h"
#include "util/FileRules.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

namespace pb {
namespace {

// huggingface_hub expands a leading ~ in these variables; an empty one counts as unset here, where
// Python would take it for the working folder.
QString expandHome(const QString &path)
{
    if (path == QLatin1String("~") || path.startsWith(QLatin1String("~/")))
        return QDir::homePath() + path.mid(1);
    return path;
}

std::string quoted(const QString &path) { return "'" + QDir::toNativeSeparators(path).toStdString() + "'"; }

} // namespace

std::optional<HfRepoId> parseHfRepoId(const QString &text)
{
    // The Hub's names: letters, digits, '-', '_', '.'; no leading '-' or '.'. A revision may hold
    // '/' (refs/pr/1), never '..', so it cannot leave the repository's folder.
    static const QRegularExpression pattern(QStringLiteral("^([A-Za-z0-9_][A-Za-z0-9._-]{0,95})/([A-Za-z0-9_][A-Za-z0-9._-]{0,95})(?:@([A-Za-z0-9._/-]+))?$"));
    const auto match = pattern.match(text);
    if (!match.hasMatch())
        return std::nullopt;
    HfRepoId repo {match.captured(1), match.captured(2), match.captured(3)};
    if (repo.revision.contains(QLatin1String("..")) || repo.revision.startsWith(QLatin1Char('/')) || repo.revision.endsWith(QLatin1Char('/')))
        return std::nullopt;
    return repo;
}

HfHubCacheDir hfHubCacheDir()
{
    for (const char *name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
        const QString value = qEnvironmentVariable(name);
        if (!value.isEmpty())
            return {expandHome(value), QStringLiteral("$") + QLatin1String(name)};
    }
    const QString home = qEnvironmentVariable("HF_HOME");
    if (!home.isEmpty())
        return {QDir(expandHome(home)).filePath(QStringLiteral("hub")), QStringLiteral("$HF_HOME/hub")};
    const QString xdg = qEnvironmentVariable("XDG_CACHE_HOME");
    if (!xdg.isEmpty())
        return {QDir(expandHome(xdg)).filePath(QStringLiteral("huggingface/hub")), QStringLiteral("$XDG_CACHE_HOME/huggingface/hub")};
    return {QDir::home().filePath(QStringLiteral(".cache/huggingface/hub")), QStringLiteral("the default ~/.cache/huggingface/hub")};
}

HfCachedSnapshot findHfCachedSnapshot(const HfRepoId &repo, const HfHubCacheDir &cache)
{
    const std::string where = (repo.revision.isEmpty() ? repo.id() : repo.id() + QLatin1Char('@') + repo.revision).toStdString();
    const QString repoPath = QDir(cache.path).filePath(QStringLiteral("models--") + repo.owner + QStringLiteral("--") + repo.name);
    if (!QFileInfo(repoPath).isDir())
        throw InvalidInputError(where, "no such file or folder, and not in the Hugging Face cache: no folder " + quoted(repoPath) + " (cache folder " +
                                           quoted(cache.path) + " from " + cache.source.toStdString() +
                                           "). Nothing is downloaded: fetch the model first (e.g. huggingface-cli download " + repo.id().toStdString() +
                                           " config.json) or name its folder");

    const QDir repoDir(repoPath);
    const QString revision = repo.revision.isEmpty() ? QStringLiteral("main") : repo.revision;
    // As huggingface_hub: a ref names a commit; a revision without a ref may be the commit itself.
    QString commit = revision;
    const QString refPath = repoDir.filePath(QStringLiteral("refs/") + revision);
    // Through the file rule: a FIFO or a link to /dev/zero as a ref must not hang the import.
    const bool hasRef = QFileInfo(refPath).exists() || QFileInfo(refPath).isSymLink();
    if (hasRef) {
        commit = QString::fromUtf8(readRegularFile(refPath, 4096)).trimmed();
        static const QRegularExpression hash(QStringLiteral("^[A-Za-z0-9._-]+$"));
        if (!hash.match(commit).hasMatch() || commit.startsWith(QLatin1Char('.')))
            throw InvalidInputError(refPath.toStdString(), "expected a commit hash, got '" + commit.left(60).toStdString() + "'");
    }
    const QString snapshot = repoDir.filePath(QStringLiteral("snapshots/") + commit);
    if (QFileInfo(QDir(snapshot).filePath(QStringLiteral("config.json"))).isFile())
        return {QFileInfo(snapshot).absoluteFilePath(), commit.toStdString()};

    const QStringList cached = QDir(repoDir.filePath(QStringLiteral("snapshots"))).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
    const std::string cachedText = cached.isEmpty() ? std::string("none") : cached.join(QStringLiteral(", ")).toStdString();
    if (hasRef)
        throw InvalidInputError(where, "revision '" + revision.toStdString() + "' is commit " + commit.toStdString() + " (" + quoted(refPath) + "), whose config.json is not in the Hugging Face cache: no " +
                                           quoted(QDir(snapshot).filePath(QStringLiteral("config.json"))) + " (cached snapshots: " + cachedText + ")");
    throw InvalidInputError(where, "revision '" + revision.toStdString() + "' is not in the Hugging Face cache: no " + quoted(refPath) + " and no " +
                                       quoted(QDir(snapshot).filePath(QStringLiteral("config.json"))) + " (cached snapshots: " + cachedText +
                                       "; name one as " + repo.id().toStdString() + "@HASH)");
}

} // namespace pb
