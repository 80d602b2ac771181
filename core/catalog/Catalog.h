#pragma once
// The card catalog: the shipped default (":/catalog.json") or a file the user imports. A Catalog is
// a value: a failed load throws and leaves whatever Catalog the caller holds untouched, so the
// previous catalog stays in use (reloadCatalog makes that explicit).
#include "catalog/CardSpec.h"

#include <QString>

#include <string>
#include <vector>

namespace pb {

class Catalog final {
public:
    static constexpr int kCatalogVersion = 1;

    int catalogVersion = kCatalogVersion;
    std::string modelledOn;            // ISO date the prices were modelled
    std::string currency;              // "USD"
    std::string notice;                // "Locally modelled catalog, not a quote ..."
    std::string priceBasis;            // how prices are billed, in words
    std::string source;                // file it came from (":/catalog.json" for the default)
    std::vector<int> gpuCounts;        // card counts every price table has, ascending
    std::vector<TermSpec> terms;       // shortest first
    std::vector<CardSpec> cards;
    CatalogOptions options;

    bool empty() const { return cards.empty(); }
    std::vector<std::string> ids() const;
    // nullptr when the id is unknown.
    const CardSpec *find(const std::string &id) const;
    // Throws InvalidInputError("card", ...) listing the known ids.
    const CardSpec &card(const std::string &id) const;
    // Throws InvalidInputError("term", ...) listing the known terms.
    const TermSpec &term(const std::string &id) const;
    bool hasGpuCount(int gpus) const;
};

// Path of the catalog compiled into the binaries.
inline QString builtInCatalogPath() { return QStringLiteral(":/catalog.json"); }

// Reads and validates a catalog file (a path or a Qt resource path). Throws InvalidInputError whose
// where() is the offending field ("cards[2].prices.terms.1w.gpus_4") and whose message names the file.
Catalog loadCatalog(const QString &pathOrResource);
// The built-in catalog; throws PilotBenchError if the embedded copy is broken (a build defect).
Catalog builtInCatalog();
// Loads `path` into `current` only when it is valid. On failure `current` is untouched, `error`
// holds the reason (field named) and false is returned.
bool reloadCatalog(Catalog &current, const QString &path, std::string &error);

} // namespace pb
