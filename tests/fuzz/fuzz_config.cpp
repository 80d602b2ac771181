// Run config JSON (a --config file): parse, validate, and for what parses, write it back and read
// that again. A config that validates must also be safe to size (the parameter table).
#include "FuzzSupport.h"

#include "config/RunConfigJson.h"
#include "config/RunConfigParse.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const auto json = pb::fuzz::jsonObject(pb::fuzz::bytes(data, size));
    if (!json)
        return 0;
    pb::RunConfig config;
    try {
        config = pb::parseRunConfigJson(*json);
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    const auto issues = pb::validateRunConfig(config);
    // What we save must load again as the same config (same hash), in both written forms; a throw
    // here escapes. Not QJsonObject ==: it tells a number read from text (an integer above 2^53)
    // from the same value held as a double.
    const std::string hash = pb::configHash(config);
    FUZZ_REQUIRE(pb::configHash(pb::parseRunConfigJson(pb::toJson(config))) == hash);
    FUZZ_REQUIRE(pb::configHash(pb::parseRunConfigJson(QJsonDocument::fromJson(pb::formatRunConfig(config)).object())) == hash);
    // The table lists every parameter; past a few dozen layers it only repeats, and slows the fuzzing.
    if (issues.empty() && config.model.layers <= 64) {
        const pb::ParamCounts counts = pb::countParameters(config);
        FUZZ_REQUIRE(counts.total > 0 && counts.trainable >= 0 && counts.trainable <= counts.total);
    }
    return 0;
}
