#pragma once
// Internal to the engine (includes torch): everything a training run holds, which is exactly what
// a checkpoint must save and restore (model, optimizer, step, data position, RNG, loss scale).
#include "config/RunConfig.h"
#include "data/Batcher.h"
#include "engine/Optimizer.h"
#include "model/Transformer.h"

#include <memory>

namespace pb {

struct LossScaler {
    bool enabled = false;
    double scale = 65536.0;
    int64_t goodSteps = 0;
    static constexpr int64_t kGrowthInterval = 2000;
};

struct TrainingSession {
    RunConfig config;
    torch::Device device {torch::kCPU};
    DecoderModel model {nullptr};
    std::unique_ptr<TrainingOptimizer> optimizer;
    std::unique_ptr<TokenDataset> dataset;
    std::unique_ptr<Batcher> trainBatches;
    std::unique_ptr<Batcher> validationBatches;
    DataPosition consumed;           // position after the last batch the model actually trained on
    int64_t step = 0;                // optimizer steps completed
    LossScaler scaler;
};

} // namespace pb
