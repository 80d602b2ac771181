#include "workflow/CatalogSource.h"

#include "catalog/CatalogJson.h"
#include "util/AppPaths.h"
#include "util/Errors.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>
#include <QStandardPaths>

#include <spdlog/spdlog.h>

namespace pb {
namespace {

// Earlier versions kept the edited catalog in the data folder; it moves once, on first use.
void adoptLegacyCatalog(const QString &path)
{
    const QString legacy = appDataDir() + QStringLiteral("/catalog.json");
    if (QFileInfo::exists(path) || !QFileInfo::exists(legacy) || legacy == path)
        return;
    QDir().mkpath(QFileInfo(path).absolutePath());
    if (QFile::rename(legacy, path) || (QFile::copy(legacy, path) && QFile::remove(legacy)))
        spdlog::info("catalog: moved the edited catalog from {} to the configuration folder {}", legacy.toStdString(), path.toStdString());
}

} // namespace

QString userCatalogPath()
{
    return QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation) + QStringLiteral("/catalog.json");
}

Catalog activeCatalog(const QString &explicitPath)
{
    if (!explicitPath.isEmpty())
        return loadCatalog(explicitPath);
    const QString path = userCatalogPath();
    adoptLegacyCatalog(path);
    if (QFileInfo::exists(path))
        return loadCatalog(path);
    return builtInCatalog();
}

Catalog activeCatalogOrBuiltIn(std::string *problem)
{
    try {
        return activeCatalog();
    } catch (const std::exception &e) {
        if (problem)
            *problem = e.what();
        spdlog::warn("catalog: the edited catalog in {} is not used: {}", userCatalogPath().toStdString(), e.what());
        return builtInCatalog();
    }
}

void saveUserCatalog(const Catalog &catalog)
{
    const QString path = userCatalogPath();
    if (!QDir().mkpath(QFileInfo(path).absolutePath()))
        throw PilotBenchError(ExitCode::Failure, "cannot create the configuration folder of " + path.toStdString());
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(catalogToJson(catalog)).toJson()) < 0 || !file.commit())
        throw PilotBenchError(ExitCode::Failure, "the catalog could not be saved to " + path.toStdString() + ": " + file.errorString().toStdString());
}

std::string catalogSourceLabel(const Catalog &catalog)
{
    return catalog.source.empty() || QString::fromStdString(catalog.source) == builtInCatalogPath() ? std::string("built-in") : catalog.source;
}

} // namespace pb
