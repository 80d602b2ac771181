#pragma once
// The file names of a version-2 checkpoint (no torch). Tensors live in safetensors files named the
// way Hugging Face names shards: model.safetensors or model-00001-of-00003.safetensors (with
// model.safetensors.index.json), so transformers and safetensors load a pilot's weights directly.
// A part that every rank holds alike is written once, by rank 0; a part each rank holds a shard of
// carries the rank: model.rank00001.safetensors (FSDP), optimizer.rank00001-00001-of-00002.safetensors
// (ZeRO-2, FSDP). RNG states are always per rank in a multi-process checkpoint.
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class CheckpointPart { Model, Optimizer, Rng };

struct CheckpointFileName {
    CheckpointPart part = CheckpointPart::Model;
    int rank = -1;                   // -1: written once for all ranks
    int index = 1, count = 1;        // shard index (1-based) and count
};

// "none" (one process), "ddp", "zero2" or "fsdp".
bool isCheckpointStrategy(const std::string &strategy);
bool partIsPerRank(CheckpointPart part, int worldSize, const std::string &strategy);
std::string checkpointFileName(CheckpointPart part, int rank, int index, int count);
std::optional<CheckpointFileName> parseCheckpointFileName(const std::string &name);
inline constexpr const char *kModelIndexFile = "model.safetensors.index.json";

// Every file of a checkpoint of this world size and strategy is in `names` and nothing else: each
// part's shards complete (1..n of one n) for every rank that holds it, state.json, config.json, and
// the index exactly when the model has several shards. Throws InvalidInputError naming `where`.
void checkCheckpointFileSet(const std::vector<std::string> &names, int worldSize, const std::string &strategy, const std::string &where);
// The tensor files of `part` that rank `rank` restores from, in shard order.
std::vector<std::string> checkpointPartFiles(const std::vector<std::string> &names, CheckpointPart part, int rank, int worldSize, const std::string &strategy);

} // namespace pb
