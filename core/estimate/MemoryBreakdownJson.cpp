#include "estimate/MemoryBreakdownJson.h"

namespace pb {

QJsonObject toJson(const MemoryBreakdown &b)
{
    return QJsonObject {
        {QStringLiteral("weights"), static_cast<double>(b.weights())},
        {QStringLiteral("frozen_weights"), static_cast<double>(b.frozenWeights)},
        {QStringLiteral("trainable_weights"), static_cast<double>(b.trainableWeights)},
        {QStringLiteral("gradients"), static_cast<double>(b.gradients)},
        {QStringLiteral("optimizer"), static_cast<double>(b.optimizer)},
        {QStringLiteral("activations"), static_cast<double>(b.activations)},
        {QStringLiteral("logits"), static_cast<double>(b.logits)},
        {QStringLiteral("blas_workspaces"), static_cast<double>(b.blasWorkspaces)},
        {QStringLiteral("workspace"), static_cast<double>(b.workspace)},
        {QStringLiteral("framework"), static_cast<double>(b.framework)},
    };
}

} // namespace pb
