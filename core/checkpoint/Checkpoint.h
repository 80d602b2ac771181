#pragma once
// Internal to the engine (includes torch). A checkpoint is a folder: model.pt (parameters and
// buffers by name), optimizer.pt, rng.pt (CPU and every device generator), state.json (step, data
// position, loss scale, config hash), config.json, and manifest.json with the size and SHA-256 of
// every file. Files are written under temporary names, fsynced and renamed; the manifest comes
// last, so a folder without one is never taken for a complete checkpoint.
#include "checkpoint/CheckpointManifest.h"
#include "engine/PilotTypes.h"
#include "engine/TrainingSession.h"

#include <string>

namespace pb {

// Writes `root`/step-NNNNNNNN for the session's current step; returns its path, size and time.
CheckpointWrite writeCheckpoint(TrainingSession &session, const std::string &root);
// Verifies the manifest, then restores model, optimizer, RNG, step, data position and loss scale.
// `path` is a step folder or a root holding them (the newest complete one is taken). Throws
// InvalidInputError naming the file for anything missing, truncated, altered or mismatched.
void restoreCheckpoint(TrainingSession &session, const std::string &path);
// SHA-256 over every parameter's bytes, in name order.
std::string parameterChecksum(torch::nn::Module &model);

} // namespace pb
