// A Hugging Face config.json: the model shape, then what importHfConfig does with it short of the
// folder (revision, weights, name): default training settings and the validation.
#include "FuzzSupport.h"

#include "config/HfImport.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const auto json = pb::fuzz::jsonObject(pb::fuzz::bytes(data, size));
    if (!json)
        return 0;
    pb::RunConfig config;
    try {
        config.model = pb::hfModelShape(*json, "config.json");
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    FUZZ_REQUIRE(config.model.hiddenSize > 0 && config.model.layers > 0 && config.model.attentionHeads > 0);
    config.train.seqLen = std::min(config.train.seqLen, config.model.maxPositions);
    // The table lists every parameter; past a few dozen layers it only repeats, and slows the fuzzing.
    if (pb::validateRunConfig(config).empty() && config.model.layers <= 64) {
        const pb::ParamCounts counts = pb::countParameters(config);
        FUZZ_REQUIRE(counts.total > 0);
    }
    return 0;
}
