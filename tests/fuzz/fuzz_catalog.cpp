// A catalog file (--catalog, `catalog use`): parse, and for what parses, write it back and read that
// again (catalogFromJson(catalogToJson(c)) == c is the format's promise).
#include "FuzzSupport.h"

#include "catalog/CatalogJson.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pb::Catalog catalog;
    try {
        catalog = pb::parseCatalog(pb::fuzz::bytes(data, size), "catalog.json");
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    const QJsonObject written = pb::catalogToJson(catalog);
    FUZZ_REQUIRE(pb::catalogToJson(pb::catalogFromJson(written, "written")) == written);
    for (const pb::CardSpec &card : catalog.cards)
        FUZZ_REQUIRE(catalog.find(card.id) != nullptr && card.terms.size() == catalog.terms.size());
    return 0;
}
