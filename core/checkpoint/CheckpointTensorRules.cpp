#include "checkpoint/CheckpointTensorRules.h"

#include "config/Nf4Format.h"
#include "config/ParameterTable.h"
#include "util/Errors.h"

#include <algorithm>
#include <map>
#include <set>

namespace pb {
namespace {

std::string shapeText(const std::vector<int64_t> &shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string metadataText(const SafetensorsHeader &h)
{
    if (!h.hasMetadata)
        return "none";
    std::string s = "{";
    for (const auto &[k, v] : h.metadata)
        s += (s.size() > 1 ? ", " : "") + k + ": \"" + v + "\"";
    return s + "}";
}

// Exactly what the writer puts in a part's files: no __metadata__ for an empty map.
void checkMetadata(const CheckpointTensorFile &f, const std::map<std::string, std::string> &expected, const std::string &part)
{
    SafetensorsHeader want;
    want.metadata = expected;
    want.hasMetadata = !expected.empty();
    if (f.header.hasMetadata != want.hasMetadata || f.header.metadata != expected)
        throw InvalidInputError(f.path, "__metadata__ is " + metadataText(f.header) + "; a checkpoint's " + part + " file carries " + metadataText(want));
}

// A part's files of one rank (-1: written once), in shard order.
std::vector<const CheckpointTensorFile *> partFiles(const std::vector<CheckpointTensorFile> &files, CheckpointPart part, int rank)
{
    std::vector<const CheckpointTensorFile *> out;
    for (const auto &f : files)
        if (f.name.part == part && f.name.rank == rank)
            out.push_back(&f);
    std::sort(out.begin(), out.end(), [](const CheckpointTensorFile *a, const CheckpointTensorFile *b) { return a->name.index < b->name.index; });
    return out;
}

// The dtypes DecoderModel gives its parameters (model/Transformer.cpp): trained ones in bf16 under
// pure bf16, else fp32 masters; frozen ones in the precision's 16-bit type, or fp32.
std::string trainedDtype(Precision p) { return p == Precision::Bf16 ? "BF16" : "F32"; }
std::string frozenDtype(Precision p) { return p == Precision::Fp32 ? "F32" : p == Precision::Fp16Mixed ? "F16" : "BF16"; }

struct TrainableParameter {
    std::string name;
    std::vector<int64_t> shape;
    std::string dtype;
    bool routedExpert = false;
};

struct ExpectedTensor {
    std::vector<int64_t> shape;
    std::string dtype;
    bool trainable = false;
    bool routedExpert = false;
};

// The model file(s): every parameter of the config once, of its shape and dtype. Returns the
// trainable ones in the order the files store them, which is the engine's parameter order (the
// writer lays out named_parameters() in order) and so the optimizer's numbering.
std::vector<TrainableParameter> checkModelFiles(const std::vector<const CheckpointTensorFile *> &files, const RunConfig &config)
{
    const Precision precision = config.train.precision;
    std::map<std::string, ExpectedTensor> expected;
    for (const ParameterInfo &p : parameterTable(config)) {
        if (!p.nf4) {
            expected[p.name] = {p.shape, p.trainable ? trainedDtype(precision) : frozenDtype(precision), p.trainable, p.routed()};
            continue;
        }
        // A QLoRA base's buffers, in config/Nf4Format.h's order: codes (uint8), block maxima
        // (int8), their scales and mean (fp32).
        static const char *const kNf4Dtypes[] = {"U8", "I8", "F32", "F32"};
        const auto parts = nf4Tensors(p.name, p.numel);
        for (size_t i = 0; i < parts.size() && i < 4; ++i)
            expected[parts[i].name] = {{parts[i].numel}, kNf4Dtypes[i], false, false};
    }
    std::vector<TrainableParameter> trainable;
    std::map<std::string, std::string> seen; // name -> file
    for (const CheckpointTensorFile *f : files) {
        for (const SafetensorEntry &e : f->header.entries) {
            const std::string tensor = "tensor '" + e.name + "'";
            if (!seen.emplace(e.name, f->path).second)
                throw InvalidInputError(f->path, tensor + " is stored twice (also in " + seen[e.name] + ")");
            const auto it = expected.find(e.name);
            if (it == expected.end())
                throw InvalidInputError(f->path, "holds " + tensor + ", which this config's model does not have (written by a different model)");
            if (e.shape != it->second.shape)
                throw InvalidInputError(f->path, tensor + " has the shape " + shapeText(e.shape) + ", this config's is " + shapeText(it->second.shape) +
                                                     " (written by a different model shape)");
            if (e.dtype != it->second.dtype)
                throw InvalidInputError(f->path, tensor + " is " + e.dtype + ", this config's is " + it->second.dtype + " (train.precision " +
                                                     toString(precision) + ", " + (it->second.trainable ? "trained" : "frozen") + ")");
            if (it->second.trainable)
                trainable.push_back({e.name, e.shape, e.dtype, it->second.routedExpert});
        }
    }
    for (const auto &[name, want] : expected)
        if (!seen.count(name))
            throw InvalidInputError(files.front()->path, "has no tensor '" + name + "' (written by a different model or config)");
    // After the tensors: a file of another part says so by its tensors first.
    for (const CheckpointTensorFile *f : files)
        checkMetadata(*f, {{"format", "pt"}}, "model");
    return trainable;
}

// The state one optimizer keeps per trainable parameter N, as "<field>.N" (engine/Optimizer.cpp),
// beside its step counter "step".
struct OptimizerFields {
    std::vector<std::string> fields;
    bool alwaysThere = false;        // made with the optimizer (Adagrad), not at the first step
    bool allOrNone = false;          // every parameter's, or none before the first step (AdamW)
};

OptimizerFields fieldsOf(const OptimizerConfig &o)
{
    switch (o.kind) {
    case OptimizerKind::AdamW:
    case OptimizerKind::Adam: return {{"exp_avg", "exp_avg_sq"}, false, true};
    case OptimizerKind::Sgd: return {o.momentum > 0 ? std::vector<std::string> {"momentum_buffer"} : std::vector<std::string> {}, false, false};
    case OptimizerKind::Adagrad: return {{"sum", "step"}, true, false};
    case OptimizerKind::RmsProp: {
        OptimizerFields f {{"step", "square_avg"}, false, false};
        if (o.momentum > 0)
            f.fields.push_back("momentum_buffer");
        return f;
    }
    case OptimizerKind::AdamW8bit:
    case OptimizerKind::Adafactor: break;
    }
    return {};
}

std::string keepsText(const OptimizerFields &f, size_t count)
{
    std::string s = "step";
    for (const auto &field : f.fields)
        s += ", " + field + ".N";
    return s + (f.fields.empty() ? "" : " for each of its " + std::to_string(count) + " trainable parameters");
}

void checkOptimizerFiles(const std::vector<const CheckpointTensorFile *> &files, const std::vector<TrainableParameter> &trainable, const RunConfig &config,
                         const CheckpointState &state)
{
    const OptimizerFields kind = fieldsOf(config.train.optimizer);
    const std::string optimizer = std::string(toString(config.train.optimizer.kind)) + " optimizer";
    std::map<std::string, std::string> seen; // name -> file
    std::vector<std::set<std::string>> present(trainable.size());
    bool step = false;
    for (const CheckpointTensorFile *f : files) {
        for (const SafetensorEntry &e : f->header.entries) {
            const std::string tensor = "tensor '" + e.name + "'";
            const auto scalarStep = [&] {
                if (e.dtype != "I64" || !e.shape.empty())
                    throw InvalidInputError(f->path, tensor + " is " + e.dtype + " " + shapeText(e.shape) + "; a step counter is I64 []");
            };
            if (e.name == "step") {
                scalarStep();
                step = true;
            } else {
                const auto dot = e.name.rfind('.');
                std::string field = dot == std::string::npos ? e.name : e.name.substr(0, dot);
                const std::string index = dot == std::string::npos ? std::string() : e.name.substr(dot + 1);
                const bool number = !index.empty() && index.size() < 10 && index.find_first_not_of("0123456789") == std::string::npos &&
                                    (index == "0" || index[0] != '0');
                if (field == "momentum") // how the hand-written SGD and RMSprop this replaced named it
                    field = "momentum_buffer";
                if (!number || std::find(kind.fields.begin(), kind.fields.end(), field) == kind.fields.end())
                    throw InvalidInputError(f->path, "holds " + tensor + ", which the " + optimizer + " does not keep (it keeps " + keepsText(kind, trainable.size()) + ")");
                const size_t i = std::stoul(index);
                if (i >= trainable.size())
                    throw InvalidInputError(f->path, tensor + " names trainable parameter " + index + "; this config's model has " + std::to_string(trainable.size()));
                if (!present[i].insert(field).second)
                    throw InvalidInputError(f->path, tensor + " is stored twice (as " + field + "." + index + ")");
                const TrainableParameter &p = trainable[i];
                if (field == "step") {
                    scalarStep();
                } else if (e.dtype != p.dtype || e.shape != p.shape) {
                    throw InvalidInputError(f->path, tensor + " is " + e.dtype + " " + shapeText(e.shape) + "; trainable parameter " + index + " (" + p.name + ") is " + p.dtype +
                                                         " " + shapeText(p.shape));
                }
            }
            if (!seen.emplace(e.name, f->path).second)
                throw InvalidInputError(f->path, tensor + " is stored twice (also in " + seen[e.name] + ")");
        }
    }
    const std::string first = files.front()->path;
    if (!step)
        throw InvalidInputError(first, "has no tensor 'step' (the " + optimizer + "'s step counter)");
    // A parameter's state is all its fields or none (before its first gradient). AdamW makes every
    // parameter's at its first step; torch::optim's a parameter's at its first gradient, which a
    // routed expert may not have had. Once the run has stepped without loss scaling (which may
    // skip steps), every other parameter has its state.
    bool any = false;
    for (const auto &p : present)
        any = any || !p.empty();
    const bool stepped = state.step > 0 && !state.ranks.empty() && !state.ranks.front().lossScaleEnabled;
    for (size_t i = 0; i < trainable.size(); ++i) {
        const bool required = kind.alwaysThere || (kind.allOrNone ? any || stepped : !present[i].empty() || (stepped && !trainable[i].routedExpert));
        if (!required)
            continue;
        for (const auto &field : kind.fields)
            if (!present[i].count(field))
                throw InvalidInputError(first, "has no tensor '" + field + "." + std::to_string(i) + "' (trainable parameter " + std::to_string(i) + ", " + trainable[i].name +
                                                   "): the " + optimizer + " keeps it for every parameter once it has stepped");
    }
}

void checkRngFile(const CheckpointTensorFile &f)
{
    std::set<int> cuda;
    bool cpu = false;
    for (const SafetensorEntry &e : f.header.entries) {
        const std::string tensor = "generator state '" + e.name + "'";
        const bool isCpu = e.name == "cpu";
        if (isCpu) {
            cpu = true;
        } else if (e.name.rfind("cuda_", 0) == 0 && e.name.size() > 5 && e.name.size() < 9 && e.name.find_first_not_of("0123456789", 5) == std::string::npos &&
                   (e.name.size() == 6 || e.name[5] != '0')) {
            cuda.insert(std::stoi(e.name.substr(5)));
        } else {
            throw InvalidInputError(f.path, "holds tensor '" + e.name + "', which an RNG file does not hold (it holds 'cpu' and 'cuda_N', one per device generator)");
        }
        const bool sized = e.shape.size() == 1 && (isCpu ? e.shape[0] == kCpuGeneratorStateBytes : isCudaGeneratorStateBytes(e.shape[0]));
        if (e.dtype != "U8" || !sized)
            throw InvalidInputError(f.path, tensor + " is " + e.dtype + " " + shapeText(e.shape) + "; LibTorch's is U8 " +
                                                (isCpu ? "[" + std::to_string(kCpuGeneratorStateBytes) + "]" : std::string("[16] (or [816] up to LibTorch 2.0)")));
    }
    if (!cpu)
        throw InvalidInputError(f.path, "has no generator state 'cpu'");
    if (!cuda.empty() && (*cuda.begin() != 0 || *cuda.rbegin() != static_cast<int>(cuda.size()) - 1))
        throw InvalidInputError(f.path, "generator states 'cuda_N' must be numbered 0 to " + std::to_string(cuda.size() - 1) + ", one per device");
    checkMetadata(f, {}, "RNG");
}

} // namespace

void checkStateOptimizer(const CheckpointState &state, const RunConfig &config, const std::string &statePath)
{
    const OptimizerKind kind = config.train.optimizer.kind;
    const bool adam = kind == OptimizerKind::AdamW || kind == OptimizerKind::Adam;
    const bool ok = adam ? state.optimizer == "fused" || state.optimizer == "per-tensor" : state.optimizer == "torch::optim";
    if (!ok)
        throw InvalidInputError(statePath, "optimizer: '" + state.optimizer + "' is not a path the config's optimizer (" + toString(kind) + ") runs on (" +
                                               (adam ? "fused or per-tensor" : "torch::optim") + ")");
}

void checkCheckpointTensors(const std::vector<CheckpointTensorFile> &files, const RunConfig &config, const CheckpointState &state)
{
    std::vector<TrainableParameter> trainable;
    if (state.strategy == "fsdp") {
        for (const auto &f : files)
            if (f.name.part == CheckpointPart::Model)
                checkMetadata(f, {{"format", "pt"}}, "model");
    } else {
        trainable = checkModelFiles(partFiles(files, CheckpointPart::Model, -1), config);
    }
    if (partIsPerRank(CheckpointPart::Optimizer, state.worldSize, state.strategy)) {
        for (const auto &f : files)
            if (f.name.part == CheckpointPart::Optimizer)
                checkMetadata(f, {{"optimizer", state.optimizer}}, "optimizer");
    } else {
        const auto optimizer = partFiles(files, CheckpointPart::Optimizer, -1);
        checkOptimizerFiles(optimizer, trainable, config, state);
        for (const CheckpointTensorFile *f : optimizer)
            checkMetadata(*f, {{"optimizer", state.optimizer}}, "optimizer");
    }
    for (const auto &f : files)
        if (f.name.part == CheckpointPart::Rng)
            checkRngFile(f);
}

} // namespace pb
