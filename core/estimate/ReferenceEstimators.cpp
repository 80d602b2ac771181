#include "estimate/ReferenceEstimators.h"

#include "config/ParameterTable.h"

#include <algorithm>

namespace pb {

int64_t accelerateTrainingBytes(const RunConfig &config)
{
    int64_t params = 0;
    for (const auto &p : parameterTable(config))
        params += p.numel;
    const int64_t fp32Size = 4 * params;
    return config.train.precision == Precision::Fp32 ? 4 * fp32Size : 2 * fp32Size;
}

int64_t deepSpeedModelStatesBytes(const RunConfig &config, ParallelStrategy strategy, int gpus)
{
    int64_t params = 0, largestLayer = 0;
    for (const auto &p : parameterTable(config)) {
        params += p.numel;
        largestLayer = std::max(largestLayer, p.numel); // every module here holds one weight (+ bias)
    }
    const int64_t n = std::max(gpus, 1);
    if (strategy == ParallelStrategy::Fsdp || strategy == ParallelStrategy::Zero3)
        return 4 * largestLayer + 18 * params / n;
    return 4 * params + 16 * params / n;
}

} // namespace pb
