#pragma once
// Internal to the engine (includes torch). A checkpoint is a folder: model.pt (parameters and
// buffers by name), optimizer.pt, rng.pt (CPU and every device generator), state.json (step, data
// position, loss scale, config hash), config.json, and manifest.json with the size and SHA-256 of
// every file. Files are written under temporary names, fsynced and renamed; the manifest comes
// last, so a folder without one is never taken for a complete checkpoint.
#include "checkpoint/CheckpointManifest.h"
#include "result/PilotTypes.h"
#include "engine/TrainingSession.h"

#include <string>

namespace pb {

// Writes `root`/step-NNNNNNNN for the session's current step; returns its path, size and time.
CheckpointWrite writeCheckpoint(TrainingSession &session, const std::string &root);
// Verifies the manifest, then restores model, optimizer, RNG, step, data position and loss scale.
// `path` is a step folder or a root holding them (the newest complete one is taken). Throws
// InvalidInputError naming the file for anything missing, truncated, altered or mismatched.
// `skip` names one piece left unrestored (proof tests show the check catches it).
void restoreCheckpoint(TrainingSession &session, const std::string &path, const std::string &skip = {}, ContentHashes hashes = ContentHashes::Check);
// SHA-256 (or plain text) of each piece of state: model, optimizer, schedule, rng, data_position,
// loss_scale. Equal digests before a checkpoint and after its restore mean the restore was exact.
std::map<std::string, std::string> stateDigest(TrainingSession &session);
inline const std::vector<std::string> &statePieces()
{
    static const std::vector<std::string> pieces {"model", "optimizer", "schedule", "rng", "data_position", "loss_scale"};
    return pieces;
}
// SHA-256 over every parameter's bytes, in name order.
std::string parameterChecksum(torch::nn::Module &model);

} // namespace pb
