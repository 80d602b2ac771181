#pragma once
// One catalog everywhere: the catalog the user edited or imported lives in the configuration
// folder (XDG config: it is a setting, not data) and every command that prices uses it, unless an
// explicit file is named; the built-in catalog otherwise.
#include "catalog/Catalog.h"

#include <QString>

#include <string>

namespace pb {

// $XDG_CONFIG_HOME/pilotbench/catalog.json (util/AppPaths.h appConfigDir()).
QString userCatalogPath();
// The catalog in force. `explicitPath` set: that file. Otherwise the user's catalog when there is
// one, else the built-in one. Throws InvalidInputError naming the file when the chosen file is
// unreadable or invalid (a broken edited catalog is an error, not silently replaced).
Catalog activeCatalog(const QString &explicitPath = {});
// The GUI's form: never throws; a broken user catalog falls back to the built-in one and
// `problem` says why.
Catalog activeCatalogOrBuiltIn(std::string *problem);
// Writes the user's catalog atomically (QSaveFile). Throws PilotBenchError with the reason.
void saveUserCatalog(const Catalog &catalog);
// "built-in" or the path a catalog was read from, for reports and tables.
std::string catalogSourceLabel(const Catalog &catalog);

} // namespace pb
