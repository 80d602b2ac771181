// A Hugging Face config.json: everything importHfConfig makes of the object itself (hfRunConfig:
// the model shape, the training defaults, the validation), short of the folder (revision, weights,
// name).
#include "FuzzSupport.h"

#include "config/HfImport.h"
#include "config/RunConfig.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const auto json = pb::fuzz::jsonObject(pb::fuzz::bytes(data, size));
    if (!json)
        return 0;
    pb::RunConfig config;
    try {
        config = pb::hfRunConfig(*json, "config.json");
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    FUZZ_REQUIRE(config.model.hiddenSize > 0 && config.model.layers > 0 && config.model.attentionHeads > 0);
    // The table lists every parameter; past a few dozen layers it only repeats, and slows the fuzzing.
    if (config.model.layers <= 64) {
        const pb::ParamCounts counts = pb::countParameters(config);
        FUZZ_REQUIRE(counts.total > 0);
    }
    return 0;
}
