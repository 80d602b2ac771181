#include "estimate/CheckpointBytes.h"

#include "estimate/ModelStates.h"

namespace pb {

int64_t checkpointBytesFor(const RunConfig &config)
{
    // ModelStates already holds the engine's own dtypes and optimizer slots per parameter, so the
    // checkpoint cannot drift from what the estimator budgets in memory.
    const ModelStateBytes states = modelStateBytes(config);
    return states.frozenWeights + states.trainableWeights + states.optimizerStates;
}

} // namespace pb
