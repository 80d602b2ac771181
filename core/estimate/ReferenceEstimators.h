#pragma once
// What two public estimators would predict, for comparison columns (bench, CLI). Both count
// model states only and take every parameter as trained.
//
// Accelerate `accelerate estimate-memory` (src/accelerate/commands/estimate.py,
// estimate_training_usage): with the model's fp32 size S = 4·P bytes, the "Training using Adam"
// column is the largest of {model, gradients, optimizer, step}: float32 -> max(S, S, 2S, 4S) = 4S
// = 16·P; float16/bfloat16 mixed -> max(S, 1.5S, 2S, 2S) = 2S = 8·P. No activations (the docs'
// "+20%" is an inference allowance EleutherAI found, not part of the training figure).
//
// DeepSpeed (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py), no offload, per GPU:
//   ZeRO-2: 4·P + 16·P / gpus;  ZeRO-3: 4·L + 18·P / gpus, with L the largest layer's own
//   parameters (model_to_params: the largest module's parameters without recursion).
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"

#include <cstdint>

namespace pb {

int64_t accelerateTrainingBytes(const RunConfig &config);
// Uses ZeRO-3 for fsdp/zero3 and ZeRO-2's formula otherwise (DeepSpeed has no ZeRO-1 or DDP
// estimator; ZeRO-2's is the closest).
int64_t deepSpeedModelStatesBytes(const RunConfig &config, ParallelStrategy strategy, int gpus);

} // namespace pb
