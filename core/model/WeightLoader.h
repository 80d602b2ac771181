#pragma once
// Internal to the engine (includes torch): copies a Hugging Face safetensors folder into the
// model's parameters by name. Every parameter must be there with its exact shape; LoRA adapters
// (not part of a base checkpoint) keep their initialisation; a tied lm_head may be absent.
#include <torch/torch.h>

#include <QString>

namespace pb {

struct WeightLoadReport {
    int64_t loaded = 0;          // tensors copied
    int64_t bytes = 0;           // bytes read
    int64_t ignored = 0;         // tensors in the files that the model has no parameter for
};

// Throws InvalidInputError naming the file or parameter for a missing tensor, a shape or dtype it
// cannot take, or a malformed file.
WeightLoadReport loadSafetensors(torch::nn::Module &model, const QString &folder);

} // namespace pb
