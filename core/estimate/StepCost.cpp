#include "estimate/StepCost.h"

#include "config/ParameterTable.h"
#include "estimate/ModelStates.h"

#include <algorithm>

namespace pb {

StepCost stepCost(const RunConfig &config, int64_t savedActivationBytes)
{
    return stepCost(config, savedActivationBytes, parameterTable(config));
}

StepCost stepCost(const RunConfig &config, int64_t savedActivationBytes, const std::vector<ParameterInfo> &table)
{
    const auto &m = config.model;
    const auto &train = config.train;
    const double n = static_cast<double>(train.microBatch * train.seqLen);
    const double micro = static_cast<double>(train.gradAccum);
    double forward = 0, backward = 0;
    double computeWeightBytes = 0, trainable = 0;
    const double c = train.precision == Precision::Fp32 ? 4 : 2;
    for (const auto &p : table) {
        const double numel = static_cast<double>(p.numel);
        computeWeightBytes += numel * (p.isMatrix ? c : 4);
        if (p.trainable)
            trainable += numel;
        // Embedding tables are looked up, not multiplied (Gemma 4's per-layer table never is).
        if (!p.isMatrix || (p.name == "model.embed_tokens.weight" && !m.tieEmbeddings) || p.name == "model.embed_tokens_per_layer.weight")
            continue;
        // A routed expert's weight multiplies only the tokens routed to it.
        const double used = numel * p.activeFraction;
        forward += 2 * n * used;
        backward += 2 * n * used + (p.trainable ? 2 * n * used : 0);
    }
    // Keys each query is scored against, summed over layers: the sequence, or a sliding layer's window.
    // Weighted by each layer's head width (Gemma 4's global layers have their own).
    double keys = 0;
    for (int64_t layer = 0; layer < m.layers; ++layer) // a Gated DeltaNet layer scores no keys
        keys += m.linear.linear(layer) ? 0.0
                                       : static_cast<double>(m.usesSliding(layer) ? std::min(m.traits.slidingWindow, train.seqLen) : train.seqLen) *
                                             (m.layerShapesVary() ? static_cast<double>(m.headDimAt(layer)) : m.attentionFlopsHeadDim());
    const double attentionForward = 4.0 * static_cast<double>(train.microBatch) * static_cast<double>(train.seqLen) * keys * static_cast<double>(m.attentionHeads);
    forward += attentionForward;
    backward += 2 * attentionForward;

    StepCost cost;
    cost.tokens = train.microBatch * train.seqLen * train.gradAccum;
    cost.modelFlops = micro * (forward + backward);
    cost.hardwareFlops = cost.modelFlops + (train.recompute ? micro * forward : 0);
    const double tw = static_cast<double>(trainableParamBytes(train.precision));
    const double s = static_cast<double>(optimizerStateBytes(train.precision));
    const double states = config.train.optimizer.kind == OptimizerKind::AdamW || config.train.optimizer.kind == OptimizerKind::Adam ? 2 : 1;
    const double passes = 2 + (train.recompute ? 1 : 0);
    cost.bytesMoved = micro * passes * computeWeightBytes                 // weights read by each pass
                      + micro * 2 * trainable * tw                        // gradients written and accumulated
                      + trainable * (3 * tw + 2 * states * s)             // step: read p, g; write p; states in and out
                      + micro * 2 * static_cast<double>(savedActivationBytes);
    return cost;
}

} // namespace pb
