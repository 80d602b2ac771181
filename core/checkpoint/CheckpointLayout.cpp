#include "checkpoint/CheckpointLayout.h"

#include "util/Errors.h"

#include <QRegularExpression>
#include <QString>

#include <map>
#include <set>

namespace pb {
namespace {

const char *partName(CheckpointPart part)
{
    switch (part) {
    case CheckpointPart::Model: return "model";
    case CheckpointPart::Optimizer: return "optimizer";
    case CheckpointPart::Rng: return "rng";
    }
    return "";
}

std::string fiveDigits(int n)
{
    std::string s = std::to_string(n);
    return std::string(s.size() < 5 ? 5 - s.size() : 0, '0') + s;
}

} // namespace

bool isCheckpointStrategy(const std::string &strategy) { return strategy == "none" || strategy == "ddp" || strategy == "zero2" || strategy == "fsdp"; }

bool partIsPerRank(CheckpointPart part, int worldSize, const std::string &strategy)
{
    if (worldSize <= 1)
        return false;
    switch (part) {
    case CheckpointPart::Model: return strategy == "fsdp";
    case CheckpointPart::Optimizer: return strategy == "zero2" || strategy == "fsdp";
    case CheckpointPart::Rng: return true;
    }
    return false;
}

std::string checkpointFileName(CheckpointPart part, int rank, int index, int count)
{
    std::string name = partName(part);
    if (rank >= 0)
        name += ".rank" + fiveDigits(rank);
    if (count > 1)
        name += "-" + fiveDigits(index) + "-of-" + fiveDigits(count);
    return name + ".safetensors";
}

std::optional<CheckpointFileName> parseCheckpointFileName(const std::string &name)
{
    static const QRegularExpression pattern(QStringLiteral("^(model|optimizer|rng)(?:\\.rank(\\d{5}))?(?:-(\\d{5})-of-(\\d{5}))?\\.safetensors$"));
    const auto m = pattern.match(QString::fromStdString(name));
    if (!m.hasMatch())
        return std::nullopt;
    CheckpointFileName f;
    const QString part = m.captured(1);
    f.part = part == QLatin1String("model") ? CheckpointPart::Model : part == QLatin1String("optimizer") ? CheckpointPart::Optimizer : CheckpointPart::Rng;
    f.rank = m.captured(2).isEmpty() ? -1 : m.captured(2).toInt();
    if (!m.captured(3).isEmpty()) {
        f.index = m.captured(3).toInt();
        f.count = m.captured(4).toInt();
        // "-00001-of-00001" is spelt without the suffix; index within 1..count.
        if (f.count < 2 || f.index < 1 || f.index > f.count)
            return std::nullopt;
    }
    // The spelling is unique: parsing and writing back gives the same name.
    if (checkpointFileName(f.part, f.rank, f.index, f.count) != name)
        return std::nullopt;
    return f;
}

void checkCheckpointFileSet(const std::vector<std::string> &names, int worldSize, const std::string &strategy, const std::string &where)
{
    if (worldSize < 1 || !isCheckpointStrategy(strategy) || (worldSize == 1) != (strategy == "none"))
        throw InvalidInputError(where, "world_size " + std::to_string(worldSize) + " with strategy '" + strategy + "' is not a checkpoint layout");
    // (part, rank) -> shard count and the indices seen
    std::map<std::pair<CheckpointPart, int>, std::pair<int, std::set<int>>> groups;
    bool state = false, config = false, index = false;
    for (const std::string &name : names) {
        if (name == "state.json") {
            state = true;
            continue;
        }
        if (name == "config.json") {
            config = true;
            continue;
        }
        if (name == kModelIndexFile) {
            index = true;
            continue;
        }
        const auto f = parseCheckpointFileName(name);
        if (!f)
            throw InvalidInputError(where, "'" + name + "' is not a file of a checkpoint (model, optimizer and rng .safetensors files, "
                                                        + kModelIndexFile + ", state.json, config.json)");
        const bool perRank = partIsPerRank(f->part, worldSize, strategy);
        if (perRank != (f->rank >= 0) || f->rank >= worldSize)
            throw InvalidInputError(where, "'" + name + "' does not belong to a checkpoint of " + std::to_string(worldSize) + " process(es) with strategy '" + strategy +
                                               "' (" + partName(f->part) + (perRank ? " is written by every rank" : " is written once") + ")");
        auto &group = groups[{f->part, f->rank}];
        if (group.first != 0 && group.first != f->count)
            throw InvalidInputError(where, "'" + name + "' disagrees with another shard of the same part about the number of shards");
        group.first = f->count;
        if (!group.second.insert(f->index).second)
            throw InvalidInputError(where, "'" + name + "' is listed twice");
    }
    if (!state || !config)
        throw InvalidInputError(where, std::string("does not list ") + (state ? "config.json" : "state.json") + "; every checkpoint has it");
    for (CheckpointPart part : {CheckpointPart::Model, CheckpointPart::Optimizer, CheckpointPart::Rng}) {
        const bool perRank = partIsPerRank(part, worldSize, strategy);
        for (int rank = perRank ? 0 : -1; rank < (perRank ? worldSize : 0); ++rank) {
            const auto it = groups.find({part, rank});
            const std::string what = std::string(partName(part)) + (rank >= 0 ? " of rank " + std::to_string(rank) : "");
            if (it == groups.end())
                throw InvalidInputError(where, "lists no " + what + " file (" + checkpointFileName(part, rank, 1, 1) + ")");
            if (static_cast<int>(it->second.second.size()) != it->second.first)
                throw InvalidInputError(where, "lists " + std::to_string(it->second.second.size()) + " of the " + std::to_string(it->second.first) + " shards of the " + what);
        }
    }
    const auto model = groups.find({CheckpointPart::Model, -1});
    const bool wantIndex = model != groups.end() && model->second.first > 1;
    if (index != wantIndex)
        throw InvalidInputError(where, std::string(kModelIndexFile) + (wantIndex ? " is missing: the model has several shards" : " is listed but the model is one file"));
}

std::vector<std::string> checkpointPartFiles(const std::vector<std::string> &names, CheckpointPart part, int rank, int worldSize, const std::string &strategy)
{
    const int wanted = partIsPerRank(part, worldSize, strategy) ? rank : -1;
    std::vector<std::pair<int, std::string>> files;
    for (const std::string &name : names) {
        const auto f = parseCheckpointFileName(name);
        if (f && f->part == part && f->rank == wanted)
            files.emplace_back(f->index, name);
    }
    std::sort(files.begin(), files.end());
    std::vector<std::string> out;
    for (auto &f : files)
        out.push_back(std::move(f.second));
    return out;
}

} // namespace pb
