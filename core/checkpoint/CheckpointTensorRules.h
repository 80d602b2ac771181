#pragma once
// What each tensor file of a version-2 checkpoint must hold for its run configuration, beyond the
// safetensors format itself (model/Safetensors.h checks that): the model's parameters by name,
// shape and the dtype the config's precision gives them; the optimizer's state named, shaped and
// typed for the model's trainable parameters and the optimizer state.json names, which must be how
// the config's optimizer runs; the RNG states in the form the generators write. No torch: verify
// runs this before any run is recorded. Every refusal names the file and the tensor.
#include "checkpoint/CheckpointLayout.h"
#include "checkpoint/CheckpointManifest.h"
#include "config/RunConfig.h"
#include "model/Safetensors.h"

#include <string>
#include <vector>

namespace pb {

// The bytes of a generator's state as LibTorch writes it: the CPU generator's mt19937 state
// (CPUGeneratorImplState), and a CUDA generator's seed and offset, after 800 bytes kept for the
// retired MTGP32 states up to LibTorch 2.0 (CUDAGeneratorImpl::get_state). Checkpoint.cpp checks
// the live generators against these when it writes, so a LibTorch that changes them fails there.
inline constexpr int64_t kCpuGeneratorStateBytes = 5056;
inline bool isCudaGeneratorStateBytes(int64_t bytes) { return bytes == 16 || bytes == 816; }

struct CheckpointTensorFile {
    std::string path;
    CheckpointFileName name;
    SafetensorsHeader header;
};

// state.json's optimizer is a path the config's optimizer runs on ("fused" or "per-tensor" for
// Adam and AdamW, "torch::optim" for SGD, Adagrad and RMSprop). Throws naming `statePath`.
void checkStateOptimizer(const CheckpointState &state, const RunConfig &config, const std::string &statePath);
// Every file of the checkpoint (`files` in manifest order), checked part by part: model, then
// optimizer, then RNG. Sharded parts (FSDP's model, ZeRO-2's and FSDP's optimizer) are checked
// for their metadata only: their tensors are flat shards, not the named state.
void checkCheckpointTensors(const std::vector<CheckpointTensorFile> &files, const RunConfig &config, const CheckpointState &state);

} // namespace pb
