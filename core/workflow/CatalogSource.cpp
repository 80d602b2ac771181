#include "workflow/CatalogSource.h"

#include "catalog/CatalogJson.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>

#include <spdlog/spdlog.h>

namespace pb {
namespace {

// Earlier versions kept the edited catalog in the doubled configuration folder
// (pilotbench/pilotbench, Qt's organisation/application) and before that in the doubled data
// folder; it moves once, on first use, and never over one already here.
void adoptLegacyCatalog(const QString &path)
{
    if (QFileInfo::exists(path))
        return;
    for (const QString &dir : {legacyAppConfigDir(), legacyAppDataDir()}) {
        const QString legacy = dir + QStringLiteral("/catalog.json");
        if (!QFileInfo::exists(legacy))
            continue;
        QDir().mkpath(QFileInfo(path).absolutePath());
        if (QFile::rename(legacy, path) || (QFile::copy(legacy, path) && QFile::remove(legacy)))
            spdlog::info("catalog: moved the edited catalog from {} to the configuration folder {}", legacy.toStdString(), path.toStdString());
        return;
    }
}

} // namespace

QString userCatalogPath() { return appConfigDir() + QStringLiteral("/catalog.json"); }

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
    writeFileAtomically(path, QJsonDocument(catalogToJson(catalog)).toJson());
}

std::string catalogSourceLabel(const Catalog &catalog)
{
    return catalog.source.empty() || QString::fromStdString(catalog.source) == builtInCatalogPath() ? std::string("built-in") : catalog.source;
}

} // namespace pb
