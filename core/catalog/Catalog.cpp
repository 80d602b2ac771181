#include "catalog/Catalog.h"

#include "catalog/CatalogJson.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QFile>
#include <spdlog/spdlog.h>

namespace pb {
namespace {

std::string joined(const std::vector<std::string> &items)
{
    std::string out;
    for (const auto &item : items)
        out += (out.empty() ? "" : ", ") + item;
    return out;
}

double priceFor(const TermPrice &price, int gpus, const std::string &cardId)
{
    const auto it = price.perGpuHourByGpus.find(gpus);
    if (it == price.perGpuHourByGpus.end()) {
        std::string counts;
        for (const auto &[n, p] : price.perGpuHourByGpus)
            counts += (counts.empty() ? "" : ", ") + std::to_string(n);
        throw InvalidInputError("gpus", cardId + " has no " + price.termId + " price for " + std::to_string(gpus) + " GPU(s); priced counts: " + counts);
    }
    return it->second;
}

} // namespace

const char *toString(SoftwareStack stack)
{
    return stack == SoftwareStack::Rocm ? "rocm" : "cuda";
}

double CardSpec::onDemandPerGpuHour(int gpus) const
{
    return priceFor(onDemand, gpus, id);
}

double CardSpec::termPerGpuHour(const std::string &termId, int gpus) const
{
    if (termId == "on_demand")
        return onDemandPerGpuHour(gpus);
    for (const auto &t : terms) {
        if (t.termId == termId)
            return priceFor(t, gpus, id);
    }
    throw InvalidInputError("term", id + " has no prices for term '" + termId + "'");
}

std::vector<std::string> Catalog::ids() const
{
    std::vector<std::string> out;
    for (const auto &c : cards)
        out.push_back(c.id);
    return out;
}

const CardSpec *Catalog::find(const std::string &id) const
{
    for (const auto &c : cards) {
        if (c.id == id)
            return &c;
    }
    return nullptr;
}

const CardSpec &Catalog::card(const std::string &id) const
{
    if (const CardSpec *c = find(id))
        return *c;
    throw InvalidInputError("card", "'" + id + "' is not in the catalog; known cards: " + joined(ids()));
}

const TermSpec &Catalog::term(const std::string &id) const
{
    std::vector<std::string> known;
    for (const auto &t : terms) {
        if (t.id == id)
            return t;
        known.push_back(t.id);
    }
    throw InvalidInputError("term", "'" + id + "' is not a catalog term; known terms: " + joined(known) + " (or on_demand)");
}

bool Catalog::hasGpuCount(int gpus) const
{
    for (int n : gpuCounts) {
        if (n == gpus)
            return true;
    }
    return false;
}

// A catalog lists a few dozen cards: a few KiB. 16 MiB is a generous bound that still refuses /dev/zero-like inputs.
constexpr qint64 kMaxCatalogBytes = 16 * 1024 * 1024;

Catalog loadCatalog(const QString &pathOrResource)
{
    QByteArray bytes;
    if (pathOrResource.startsWith(QLatin1Char(':'))) { // the built-in one, a Qt resource
        QFile file(pathOrResource);
        if (!file.open(QIODevice::ReadOnly))
            throw PilotBenchError(ExitCode::Failure, pathOrResource.toStdString() + ": the built-in catalog is missing from this build");
        bytes = file.readAll();
    } else {
        bytes = readRegularFile(pathOrResource, kMaxCatalogBytes);
    }
    Catalog catalog = parseCatalog(bytes, pathOrResource.toStdString());
    spdlog::debug("catalog {}: {} cards, modelled on {}", catalog.source, catalog.cards.size(), catalog.modelledOn);
    return catalog;
}

Catalog builtInCatalog()
{
    try {
        return loadCatalog(builtInCatalogPath());
    } catch (const InvalidInputError &e) {
        throw PilotBenchError(ExitCode::Failure, std::string("the built-in catalog is broken (a build defect): ") + e.what());
    }
}

bool reloadCatalog(Catalog &current, const QString &path, std::string &error)
{
    try {
        Catalog next = loadCatalog(path);
        current = std::move(next);
        error.clear();
        spdlog::info("catalog replaced by {} ({} cards, modelled on {})", current.source, current.cards.size(), current.modelledOn);
        return true;
    } catch (const PilotBenchError &e) {
        error = e.what();
        spdlog::warn("catalog {} refused, keeping {}: {}", path.toStdString(), current.source, error);
        return false;
    }
}

} // namespace pb
