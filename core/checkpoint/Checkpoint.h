#pragma once
// Internal to the engine (includes torch). A checkpoint is a folder step-NNNNNNNN: the model's
// parameters under their Hugging Face names in model*.safetensors, the optimizer state and the
// RNG states (CPU and every device generator) in their own safetensors files, state.json (step,
// each rank's data position and loss scale, config hash), config.json, and manifest.json with the
// size and SHA-256 of every file (CheckpointLayout.h names them). It is written into a hidden
// folder beside it, files hashed as they are written, the manifest last, then exchanged with any
// earlier checkpoint of that step in one rename: a step folder is always complete.
// Under DDP, ZeRO-2 or FSDP every rank calls these together: rank 0 writes what all ranks hold
// alike, each rank its own shards and RNG states, and rank 0 the manifest over all of them.
#include "checkpoint/CheckpointManifest.h"
#include "result/PilotTypes.h"
#include "engine/TrainingSession.h"

#include <string>

namespace pb {

class DistributedHooks;

// Writes `root`/step-NNNNNNNN for the session's current step; returns its path, size and time
// (rank 0: the whole checkpoint's size; another rank: its own files').
CheckpointWrite writeCheckpoint(TrainingSession &session, const std::string &root, DistributedHooks *dist = nullptr);
// Verifies the manifest, then restores model, optimizer, RNG, step, data position and loss scale.
// `path` is a step folder or a root holding them (the newest complete one is taken). Throws
// InvalidInputError naming the file for anything missing, truncated, altered or mismatched.
// `skip` names one piece left unrestored (proof tests show the check catches it).
// Reads version 1 too. A checkpoint restores onto the rank count and strategy that wrote it only.
void restoreCheckpoint(TrainingSession &session, const std::string &path, const std::string &skip = {}, ContentHashes hashes = ContentHashes::Check,
                       DistributedHooks *dist = nullptr);
// SHA-256 (or plain text) of each piece of state: model, optimizer, schedule, rng, data_position,
// loss_scale. Equal digests before a checkpoint and after its restore mean the restore was exact.
// Under FSDP the model's digest is this rank's shards'.
std::map<std::string, std::string> stateDigest(TrainingSession &session, DistributedHooks *dist = nullptr);
inline const std::vector<std::string> &statePieces()
{
    static const std::vector<std::string> pieces {"model", "optimizer", "schedule", "rng", "data_position", "loss_scale"};
    return pieces;
}
// SHA-256 over every parameter's bytes, in name order.
std::string parameterChecksum(torch::nn::Module &model);
// Every tensor as little-endian float32, one after another in the order given (the restore proof
// measures the distance between two runs' dumps with checkpoint/ParameterDump.h); `each` sees each
// tensor's float32 CPU values. An empty path writes nothing and only calls `each`. Throws
// PilotBenchError naming the file when it cannot be written.
void writeParameterDump(const std::vector<torch::Tensor> &params, const std::string &path,
                        const std::function<void(const torch::Tensor &values)> &each = {});

} // namespace pb
