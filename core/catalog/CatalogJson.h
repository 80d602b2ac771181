#pragma once
// The catalog file format (resources/catalog.json). Parsing is strict: every required field must
// be present with the right type and a sensible value, unknown keys are refused (a typo must not
// silently drop a price), and every error names the field path.
#include "catalog/Catalog.h"

#include <QByteArray>
#include <QJsonObject>

namespace pb {

// `source` is the file name used in error messages and stored in Catalog::source.
Catalog parseCatalog(const QByteArray &json, const std::string &source);
Catalog catalogFromJson(const QJsonObject &root, const std::string &source);
// The same format back (for the GUI's editor and export); catalogFromJson(catalogToJson(c)) == c.
QJsonObject catalogToJson(const Catalog &catalog);
// A short fingerprint of everything the catalog says (16 hex digits of the SHA-256 of its compact
// JSON): a decision records it, and a different one means the prices or cards changed since.
std::string catalogRevision(const Catalog &catalog);

} // namespace pb
