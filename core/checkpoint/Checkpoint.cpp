#include "checkpoint/Checkpoint.h"

#include "checkpoint/CheckpointLayout.h"
#include "checkpoint/CheckpointTensorRules.h"
#include "checkpoint/TensorFileIo.h"
#include "config/RunConfigJson.h"
#include "engine/DistributedHooks.h"
#include "engine/LrSchedule.h"
#include "engine/TorchCompat.h"
#include "model/Safetensors.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "util/Sha256.h"

#include <QDir>
#include <QSaveFile>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <functional>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace pb {
namespace {

const QString kStateFile = QStringLiteral("state.json");
const QString kConfigFile = QStringLiteral("config.json");

std::vector<c10::Device> generatorDevices(const torch::Device &device)
{
    std::vector<c10::Device> devices {c10::Device(c10::kCPU)};
    if (device.is_cuda())
        for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i)
            devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    return devices;
}

std::string generatorKey(const c10::Device &d) { return d.is_cpu() ? "cpu" : "cuda_" + std::to_string(d.index()); }

// Who writes and reads what: one process, or this rank of a strategy.
struct RankView {
    int rank = 0;
    int worldSize = 1;
    std::string strategy = "none";
    DistributedHooks *hooks = nullptr;

    explicit RankView(DistributedHooks *dist) : hooks(dist)
    {
        if (dist && dist->worldSize() > 1) {
            rank = dist->rank();
            worldSize = dist->worldSize();
            strategy = dist->checkpointStrategy();
        }
    }
    bool perRank(CheckpointPart part) const { return partIsPerRank(part, worldSize, strategy); }
    bool writes(CheckpointPart part) const { return perRank(part) || rank == 0; }
    void barrier() const
    {
        if (worldSize > 1)
            hooks->barrier();
    }
};

const std::map<at::ScalarType, std::string> &dtypeNames()
{
    static const std::map<at::ScalarType, std::string> names {
        {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kBFloat16, "BF16"}, {at::kHalf, "F16"}, {at::kLong, "I64"},
        {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},       {at::kByte, "U8"},  {at::kBool, "BOOL"}};
    return names;
}

std::string dtypeName(at::ScalarType type)
{
    const auto it = dtypeNames().find(type);
    TORCH_CHECK(it != dtypeNames().end(), "a checkpoint cannot store tensors of type ", c10::toString(type));
    return it->second;
}

std::optional<at::ScalarType> scalarTypeNamed(const std::string &name)
{
    for (const auto &[type, n] : dtypeNames())
        if (n == name)
            return type;
    return std::nullopt;
}

// The tensor's storage as bytes, on its own device (it must be contiguous).
torch::Tensor byteView(const torch::Tensor &t)
{
    return torch::from_blob(t.data_ptr(), {static_cast<int64_t>(t.nbytes())}, torch::TensorOptions().dtype(torch::kUInt8).device(t.device()));
}

TensorSource sourceOf(const std::string &name, const torch::Tensor &tensor)
{
    torch::Tensor t = tensor.detach();
    if (!t.is_contiguous())
        t = t.contiguous();
    TensorSource s;
    s.name = name;
    s.dtype = dtypeName(t.scalar_type());
    s.shape = t.sizes().vec();
    s.bytes = static_cast<int64_t>(t.nbytes());
    if (t.is_cpu()) {
        s.read = [t](int64_t offset, int64_t, uint8_t *) -> const void * { return static_cast<const uint8_t *>(t.data_ptr()) + offset; };
    } else {
        s.read = [t](int64_t offset, int64_t length, uint8_t *staging) -> const void * {
            torch::from_blob(staging, {length}, torch::kUInt8).copy_(byteView(t).narrow(0, offset, length));
            return staging;
        };
    }
    return s;
}

// Device copies run at full speed only from pinned host memory (53.5 vs 1.19 GB/s measured).
ChunkBufferFactory chunkBuffers(const torch::Device &device)
{
    if (!device.is_cuda())
        return plainChunkBuffer;
    return [] {
        auto pinned = std::make_shared<torch::Tensor>(torch::empty({kChunkBytes}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true)));
        return ChunkBuffer(static_cast<uint8_t *>(pinned->data_ptr()), [pinned](uint8_t *) {});
    };
}

std::vector<std::pair<std::string, torch::Tensor>> modelTensors(TrainingSession &session, const RankView &view)
{
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    if (view.perRank(CheckpointPart::Model))
        return view.hooks->modelShards();
    for (const auto &item : session.model->named_parameters())
        tensors.emplace_back(item.key(), item.value());
    for (const auto &item : session.model->named_buffers())
        tensors.emplace_back(item.key(), item.value());
    return tensors;
}

std::vector<std::pair<std::string, torch::Tensor>> rngStates(const torch::Device &device)
{
    std::vector<std::pair<std::string, torch::Tensor>> states;
    for (const auto &d : generatorDevices(device))
        states.emplace_back(generatorKey(d), at::globalContext().defaultGenerator(d).get_state());
    return states;
}

// One part's tensors as safetensors files: one, or Hugging Face style shards of at most kShardBytes.
void addPartJobs(std::vector<SafetensorsFileJob> &jobs, CheckpointPart part, int rank, const std::vector<std::pair<std::string, torch::Tensor>> &tensors,
                 const std::map<std::string, std::string> &metadata)
{
    std::vector<TensorSource> sources;
    for (const auto &[name, tensor] : tensors)
        sources.push_back(sourceOf(name, tensor));
    auto shards = splitIntoShards(std::move(sources), kShardBytes);
    const int count = static_cast<int>(shards.size());
    for (int i = 0; i < count; ++i)
        jobs.push_back({checkpointFileName(part, rank, i + 1, count), std::move(shards[static_cast<size_t>(i)]), metadata});
}

RankPosition positionOf(const TrainingSession &session)
{
    RankPosition p;
    p.epoch = session.consumed.epoch;
    p.index = session.consumed.index;
    p.shuffleSeed = session.consumed.shuffleSeed;
    p.lossScaleEnabled = session.scaler.enabled;
    p.lossScale = session.scaler.scale;
    p.goodSteps = session.scaler.goodSteps;
    return p;
}

QJsonObject digestJson(const FileDigest &d)
{
    return {{QStringLiteral("file"), QString::fromStdString(d.name)}, {QStringLiteral("bytes"), static_cast<qint64>(d.bytes)}, {QStringLiteral("sha256"), QString::fromStdString(d.sha256)}};
}

// A rank's files and position, handed to rank 0 through the folder (the checkpoint's own files are
// on a shared disk anyway); rank 0 removes these before it writes the manifest.
QString partFile(const QDir &dir, int rank) { return dir.filePath(QStringLiteral("part.rank%1.json").arg(rank)); }

// Replaces `final` by `partial` with no moment at which `final` is missing or incomplete: an
// exchange of the two folders (renameat2), then the old one is removed.
void moveIntoPlace(const QString &partial, const QString &final)
{
    const QByteArray from = QFile::encodeName(partial), to = QFile::encodeName(final);
    if (QFileInfo::exists(final)) {
        if (::renameat2(AT_FDCWD, from.constData(), AT_FDCWD, to.constData(), RENAME_EXCHANGE) != 0)
            throw PilotBenchError(ExitCode::Failure, final.toStdString() + ": cannot replace the earlier checkpoint: " + std::strerror(errno));
        QDir(partial).removeRecursively();
    } else if (::rename(from.constData(), to.constData()) != 0) {
        throw PilotBenchError(ExitCode::Failure, final.toStdString() + ": cannot move the checkpoint into place: " + std::strerror(errno));
    }
}

// SHA-256 over names and bytes. The proof hashes the whole model and optimizer state several
// times (tens of GB on a 1B model), hence OpenSSL's hash rather than Qt's (~10x slower).
std::string hashTensors(const std::vector<std::pair<std::string, torch::Tensor>> &tensors)
{
    Sha256 hash;
    for (const auto &[name, tensor] : tensors) {
        const auto cpu = tensor.detach().to(torch::kCPU).contiguous();
        hash.add(name.data(), name.size());
        hash.add(cpu.data_ptr(), cpu.nbytes());
    }
    return hash.hexDigest();
}

} // namespace

std::string parameterChecksum(torch::nn::Module &model)
{
    std::vector<std::pair<std::string, torch::Tensor>> params;
    for (const auto &item : model.named_parameters())
        params.emplace_back(item.key(), item.value());
    return hashTensors(params);
}

void writeParameterDump(const std::vector<torch::Tensor> &params, const std::string &path, const std::function<void(const torch::Tensor &values)> &each)
{
    torch::NoGradGuard noGrad;
    QSaveFile file(QString::fromStdString(path));
    const bool dump = !path.empty();
    if (dump && !file.open(QIODevice::WriteOnly | QIODevice::Unbuffered)) // unbuffered: a full disk fails the write, not a silent commit
        throw PilotBenchError(ExitCode::Failure, path + ": cannot write the parameter dump: " + file.errorString().toStdString());
    for (const auto &p : params) {
        const auto values = p.detach().to(torch::kCPU, torch::kFloat).contiguous();
        if (each)
            each(values);
        const qint64 bytes = values.numel() * static_cast<qint64>(sizeof(float));
        if (dump && file.write(reinterpret_cast<const char *>(values.data_ptr<float>()), bytes) != bytes)
            throw PilotBenchError(ExitCode::Failure, path + ": cannot write the parameter dump: " + file.errorString().toStdString());
    }
    if (dump && !file.commit())
        throw PilotBenchError(ExitCode::Failure, path + ": cannot write the parameter dump: " + file.errorString().toStdString());
}

CheckpointWrite writeCheckpoint(TrainingSession &session, const std::string &root, DistributedHooks *dist)
{
    const auto start = std::chrono::steady_clock::now();
    const RankView view(dist);
    const auto rng = rngStates(session.device);
    // Verify checks these against the sizes it knows without torch: a LibTorch whose generators
    // keep another state fails here, at the write, rather than leaving a checkpoint verify refuses.
    for (const auto &[key, state] : rng)
        if (state.scalar_type() != torch::kUInt8 || state.dim() != 1 || !(key == "cpu" ? state.numel() == kCpuGeneratorStateBytes : isCudaGeneratorStateBytes(state.numel())))
            throw PilotBenchError(ExitCode::Failure, "generator state '" + key + "' of this LibTorch is " + c10::toString(state.scalar_type()) + " " + c10::str(state.sizes()) +
                                                         ", not the form checkpoint/CheckpointTensorRules.h expects; no checkpoint was written");
    const QString name = QStringLiteral("step-%1").arg(session.step, 8, 10, QLatin1Char('0'));
    const QString final = QDir(QString::fromStdString(root)).filePath(name);
    // Written beside the checkpoint it may replace, under a name no reader takes for a checkpoint.
    const QString partial = QDir(QString::fromStdString(root)).filePath(QLatin1Char('.') + name + QStringLiteral(".partial"));
    const QDir dir(partial);
    if (view.rank == 0) {
        if (dir.exists())
            QDir(partial).removeRecursively();
        if (!QDir().mkpath(partial))
            throw PilotBenchError(ExitCode::Failure, partial.toStdString() + ": cannot create the checkpoint folder");
    }
    view.barrier();

    std::vector<SafetensorsFileJob> jobs;
    std::vector<std::pair<std::string, torch::Tensor>> model;
    if (view.writes(CheckpointPart::Model)) {
        model = modelTensors(session, view);
        // "format: pt" is what transformers asks of a safetensors file it loads.
        addPartJobs(jobs, CheckpointPart::Model, view.perRank(CheckpointPart::Model) ? view.rank : -1, model, {{"format", "pt"}});
    }
    if (view.writes(CheckpointPart::Optimizer)) {
        std::vector<std::pair<std::string, torch::Tensor>> optimizer;
        for (const auto &[key, tensor] : session.optimizer->state())
            optimizer.emplace_back(key, tensor);
        addPartJobs(jobs, CheckpointPart::Optimizer, view.perRank(CheckpointPart::Optimizer) ? view.rank : -1, optimizer, {{"optimizer", session.optimizer->path()}});
    }
    addPartJobs(jobs, CheckpointPart::Rng, view.perRank(CheckpointPart::Rng) ? view.rank : -1, rng, {});
    std::vector<FileDigest> written;
    try {
        written = writeSafetensorsFiles(partial, jobs, chunkBuffers(session.device));
    } catch (const PilotBenchError &) {
        if (view.worldSize == 1) // nothing of a failed write stays behind (the other ranks may still be writing)
            QDir(partial).removeRecursively();
        throw;
    }

    int64_t bytes = 0;
    for (const auto &d : written)
        bytes += d.bytes;
    if (view.worldSize > 1 && view.rank != 0) {
        QJsonArray files;
        for (const auto &d : written)
            files.append(digestJson(d));
        writeFileAtomically(partFile(dir, view.rank), QJsonDocument(QJsonObject {{QStringLiteral("files"), files}, {QStringLiteral("rank"), rankPositionJson(positionOf(session))}}).toJson());
    }
    view.barrier();

    CheckpointWrite write;
    write.step = session.step;
    write.path = final.toStdString();
    if (view.rank == 0) {
        CheckpointManifest manifest;
        manifest.step = session.step;
        manifest.configHash = configHash(session.config);
        manifest.worldSize = view.worldSize;
        manifest.strategy = view.strategy;
        CheckpointState state;
        state.step = session.step;
        state.configHash = manifest.configHash;
        state.optimizer = session.optimizer->path();
        state.torchVersion = TORCH_VERSION;
        state.worldSize = view.worldSize;
        state.strategy = view.strategy;
        state.ranks.push_back(positionOf(session));
        for (const auto &d : written)
            manifest.files.push_back({d.name, d.bytes, d.sha256});
        for (int rank = 1; rank < view.worldSize; ++rank) {
            const QString path = partFile(dir, rank);
            const QJsonObject part = QJsonDocument::fromJson(readRegularFile(path, 16 * 1024 * 1024)).object();
            for (const auto &f : part.value(QStringLiteral("files")).toArray()) {
                const QJsonObject o = f.toObject();
                manifest.files.push_back({o.value(QStringLiteral("file")).toString().toStdString(), static_cast<int64_t>(o.value(QStringLiteral("bytes")).toDouble()),
                                          o.value(QStringLiteral("sha256")).toString().toStdString()});
                bytes += manifest.files.back().bytes;
            }
            state.ranks.push_back(parseRankPositionJson(part.value(QStringLiteral("rank")).toObject(), path.toStdString()));
            QFile::remove(path);
        }
        std::vector<QString> small {kStateFile, kConfigFile};
        writeFileAtomically(dir.filePath(kStateFile), checkpointStateJson(state));
        writeFileAtomically(dir.filePath(kConfigFile), QJsonDocument(toJson(session.config)).toJson());
        std::vector<std::string> modelFiles;
        for (const auto &job : jobs)
            if (parseCheckpointFileName(job.name)->part == CheckpointPart::Model && !view.perRank(CheckpointPart::Model))
                modelFiles.push_back(job.name);
        if (modelFiles.size() > 1) { // Hugging Face's index of a sharded model
            QJsonObject weightMap;
            int64_t total = 0;
            for (const auto &job : jobs)
                if (std::find(modelFiles.begin(), modelFiles.end(), job.name) != modelFiles.end())
                    for (const auto &t : job.tensors) {
                        weightMap.insert(QString::fromStdString(t.name), QString::fromStdString(job.name));
                        total += t.bytes;
                    }
            writeFileAtomically(dir.filePath(QString::fromLatin1(kModelIndexFile)),
                                QJsonDocument(QJsonObject {{QStringLiteral("metadata"), QJsonObject {{QStringLiteral("total_size"), static_cast<qint64>(total)}}},
                                                           {QStringLiteral("weight_map"), weightMap}})
                                    .toJson());
            small.push_back(QString::fromLatin1(kModelIndexFile));
        }
        for (const QString &file : small) {
            const QString path = dir.filePath(file);
            manifest.files.push_back({file.toStdString(), QFileInfo(path).size(), sha256OfFile(path)});
            bytes += manifest.files.back().bytes;
        }
        // The manifest is written last: its presence is what marks the checkpoint complete.
        writeFileAtomically(dir.filePath(QStringLiteral("manifest.json")), checkpointManifestJson(manifest));
        fsyncDirectory(partial);
        moveIntoPlace(partial, final);
        fsyncDirectory(QString::fromStdString(root));
    }
    view.barrier();
    write.bytes = bytes;
    write.writeMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return write;
}

std::map<std::string, std::string> stateDigest(TrainingSession &session, DistributedHooks *dist)
{
    const RankView view(dist);
    std::map<std::string, std::string> digest;
    digest["model"] = view.perRank(CheckpointPart::Model) ? hashTensors(view.hooks->modelShards()) : parameterChecksum(*session.model);
    std::vector<std::pair<std::string, torch::Tensor>> optimizer;
    for (const auto &[name, tensor] : session.optimizer->state())
        optimizer.emplace_back(name, tensor);
    digest["optimizer"] = hashTensors(optimizer);
    digest["schedule"] = "step " + std::to_string(session.step) + ", next lr " +
                         std::to_string(learningRateAt(session.config.train.optimizer, session.config.train.schedule, session.step));
    digest["rng"] = hashTensors(rngStates(session.device));
    digest["data_position"] = "epoch " + std::to_string(session.consumed.epoch) + ", batch " + std::to_string(session.consumed.index) + ", seed " +
                              std::to_string(session.consumed.shuffleSeed);
    digest["loss_scale"] = session.scaler.enabled ? std::to_string(session.scaler.scale) + " after " + std::to_string(session.scaler.goodSteps) : "off";
    return digest;
}

namespace {

// Where each stored tensor of a part goes, checked against what it is copied into.
class SinkMap {
public:
    SinkMap(const torch::Device &device, bool discard) : m_device(device), m_discard(discard) {}

    // A tensor that must arrive, of exactly this dtype and shape.
    void expect(const std::string &name, torch::Tensor into) { m_expected[name] = std::move(into); }
    // Tensors are made as the file describes them (optimizer, RNG): on `device`.
    void acceptAny(const torch::Device &device) { m_anyDevice = device; m_acceptAny = true; }
    // Tensors made as the file describes them go where `target` says when it gives a tensor of
    // that dtype and shape (the optimizer's pooled states).
    void targets(std::function<torch::Tensor(const std::string &, c10::IntArrayRef, at::ScalarType)> target) { m_target = std::move(target); }

    TensorSink sinkFor(const SafetensorEntry &entry)
    {
        const auto type = scalarTypeNamed(entry.dtype);
        if (!type)
            throw InvalidInputError(entry.file.toStdString(), "tensor '" + entry.name + "' has dtype " + entry.dtype + ", which a checkpoint does not store");
        torch::Tensor into;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            const auto it = m_expected.find(entry.name);
            if (it != m_expected.end()) {
                into = it->second;
                if (into.sizes().vec() != entry.shape || into.scalar_type() != *type)
                    throw InvalidInputError(entry.file.toStdString(), "tensor '" + entry.name + "' is " + entry.dtype + " " + c10::str(c10::IntArrayRef(entry.shape)) +
                                                                          ", this run's is " + dtypeName(into.scalar_type()) + " " + c10::str(into.sizes()) +
                                                                          " (written by a different model shape)");
                if (!m_arrived.insert(entry.name).second)
                    throw InvalidInputError(entry.file.toStdString(), "tensor '" + entry.name + "' is stored twice");
            } else if (m_acceptAny) {
                if (m_target)
                    into = m_target(entry.name, entry.shape, *type);
                if (!into.defined() || into.device() != m_anyDevice)
                    into = torch::empty(entry.shape, torch::TensorOptions().dtype(*type).device(m_anyDevice));
                if (!m_made.emplace(entry.name, into).second)
                    throw InvalidInputError(entry.file.toStdString(), "tensor '" + entry.name + "' is stored twice");
            } else {
                throw InvalidInputError(entry.file.toStdString(), "holds tensor '" + entry.name + "', which this run does not have (written by a different model)");
            }
        }
        if (m_discard)
            return {[](int64_t, const uint8_t *, int64_t) {}};
        const torch::Tensor bytes = byteView(into);
        if (into.is_cpu())
            return {[bytes](int64_t offset, const uint8_t *data, int64_t length) { std::memcpy(static_cast<uint8_t *>(bytes.data_ptr()) + offset, data, static_cast<size_t>(length)); }};
        return {[bytes](int64_t offset, const uint8_t *data, int64_t length) {
            bytes.narrow(0, offset, length).copy_(torch::from_blob(const_cast<uint8_t *>(data), {length}, torch::kUInt8));
        }};
    }
    // Throws naming `where` for an expected tensor that no file held.
    void requireAll(const std::string &where) const
    {
        for (const auto &[name, tensor] : m_expected)
            if (!m_arrived.count(name))
                throw InvalidInputError(where, "has no tensor '" + name + "' (written by a different model or config)");
    }
    const std::map<std::string, torch::Tensor> &made() const { return m_made; }

private:
    torch::Device m_device;
    bool m_discard;
    bool m_acceptAny = false;
    torch::Device m_anyDevice {torch::kCPU};
    std::map<std::string, torch::Tensor> m_expected, m_made;
    std::set<std::string> m_arrived;
    std::function<torch::Tensor(const std::string &, c10::IntArrayRef, at::ScalarType)> m_target;
    std::mutex m_mutex;
};

void restoreVersion1(TrainingSession &session, const QDir &dir, const CheckpointState &state, const std::string &skip);

} // namespace

void restoreCheckpoint(TrainingSession &session, const std::string &path, const std::string &skip, ContentHashes hashes, DistributedHooks *dist)
{
    const RankView view(dist);
    const QString folder = resolveCheckpointFolder(QString::fromStdString(path));
    // The tensor files are hashed as they are read below, each rank its own; the rest is checked here.
    const bool hashWhileReading = hashes == ContentHashes::Check;
    CheckpointInfo info = verifyCheckpoint(folder, ContentHashes::AlreadyChecked);
    const QDir dir(folder);
    if (info.version == 1 && hashWhileReading)
        info = verifyCheckpoint(folder, ContentHashes::Check);
    const std::string expectedHash = configHash(session.config);
    if (info.configHash != expectedHash)
        throw InvalidInputError(dir.filePath(kConfigFile).toStdString(), "was written for another run configuration (hash " + info.configHash +
                                                                            ", this run is " + expectedHash + ")");
    const CheckpointState &state = info.state;
    if (state.worldSize != view.worldSize || state.strategy != view.strategy)
        throw InvalidInputError(dir.filePath(QStringLiteral("manifest.json")).toStdString(),
                                "was written by " + std::to_string(state.worldSize) + " process(es) with strategy '" + state.strategy + "'; this run is " +
                                    std::to_string(view.worldSize) + " with '" + view.strategy + "'. A checkpoint restores onto the same rank count and strategy only.");
    torch::NoGradGuard noGrad;
    if (info.version == 1) {
        restoreVersion1(session, dir, state, skip);
    } else {
        std::vector<std::string> names;
        std::map<std::string, const ManifestEntry *> entries;
        for (const ManifestEntry &e : info.files) {
            names.push_back(e.file);
            entries[e.file] = &e;
            if (hashWhileReading && !parseCheckpointFileName(e.file) && sha256OfFile(dir.filePath(QString::fromStdString(e.file))) != e.sha256)
                throw InvalidInputError(dir.filePath(QString::fromStdString(e.file)).toStdString(), "SHA-256 differs from the manifest: the file was altered or corrupted");
        }
        SinkMap model(session.device, skip == "model"), optimizer(session.device, false), rng(torch::kCPU, false);
        for (const auto &[name, tensor] : modelTensors(session, view))
            model.expect(name, tensor);
        optimizer.acceptAny(session.device);
        if (session.optimizer && skip != "optimizer")
            optimizer.targets([opt = session.optimizer.get()](const std::string &name, c10::IntArrayRef shape, at::ScalarType type) {
                return opt->restoreTarget(name, shape, type);
            });
        rng.acceptAny(torch::kCPU);
        std::vector<SafetensorsReadJob> jobs;
        const std::pair<CheckpointPart, SinkMap *> parts[] = {{CheckpointPart::Model, &model}, {CheckpointPart::Optimizer, &optimizer}, {CheckpointPart::Rng, &rng}};
        for (const auto &[part, sinks] : parts) {
            for (const std::string &file : checkpointPartFiles(names, part, view.rank, view.worldSize, view.strategy)) {
                SafetensorsReadJob job;
                job.path = dir.filePath(QString::fromStdString(file));
                job.expectedBytes = entries.at(file)->bytes;
                if (hashWhileReading)
                    job.expectedSha256 = entries.at(file)->sha256;
                SinkMap *target = sinks;
                job.sinkFor = [target](const SafetensorEntry &entry) { return target->sinkFor(entry); };
                jobs.push_back(std::move(job));
            }
        }
        readSafetensorsFiles(jobs, chunkBuffers(session.device));
        if (session.device.is_cuda())
            torch::cuda::synchronize();
        const std::string modelFile = dir.filePath(QString::fromStdString(checkpointPartFiles(names, CheckpointPart::Model, view.rank, view.worldSize, view.strategy).front())).toStdString();
        model.requireAll(modelFile);
        const std::string optimizerFile = dir.filePath(QString::fromStdString(checkpointPartFiles(names, CheckpointPart::Optimizer, view.rank, view.worldSize, view.strategy).front())).toStdString();
        try {
            if (skip != "optimizer")
                session.optimizer->restoreState(optimizer.made());
        } catch (const c10::Error &e) {
            throw InvalidInputError(optimizerFile, e.what_without_backtrace());
        }
        const std::string rngFile = dir.filePath(QString::fromStdString(checkpointPartFiles(names, CheckpointPart::Rng, view.rank, view.worldSize, view.strategy).front())).toStdString();
        for (const auto &device : generatorDevices(session.device)) {
            if (skip == "rng")
                break;
            const auto it = rng.made().find(generatorKey(device));
            if (it == rng.made().end())
                throw InvalidInputError(rngFile, "has no generator state '" + generatorKey(device) + "' (written on another device)");
            at::Generator generator = at::globalContext().defaultGenerator(device); // a handle to the global one
            try {
                generator.set_state(it->second);
            } catch (const c10::Error &e) {
                throw InvalidInputError(rngFile, "generator state '" + generatorKey(device) + "' is not one: " + e.what_without_backtrace());
            }
        }
    }
    const RankPosition &position = state.ranks.at(static_cast<size_t>(view.rank));
    if (skip != "schedule")
        session.step = state.step;
    if (skip != "data_position") {
        session.consumed.epoch = position.epoch;
        session.consumed.index = position.index;
        session.consumed.shuffleSeed = position.shuffleSeed;
    }
    if (skip == "loss_scale")
        return;
    session.scaler.scale = position.lossScale;
    session.scaler.goodSteps = position.goodSteps;
}

namespace {

// The stored tensor, checked against the one it will be copied into: a checkpoint of another shape
// is refused by name instead of failing inside copy_.
torch::Tensor readTensor(torch::serialize::InputArchive &archive, const std::string &key, const QString &file, const torch::Tensor &into)
{
    c10::IValue value;
    if (!archive.try_read(key, value) || !value.isTensor())
        throw InvalidInputError(file.toStdString(), "has no entry '" + key + "' (written by a different model or config)");
    torch::Tensor stored = value.toTensor();
    if (into.defined() && (stored.sizes() != into.sizes() || stored.scalar_type() != into.scalar_type()))
        throw InvalidInputError(file.toStdString(), "entry '" + key + "' is " + c10::toString(stored.scalar_type()) + " " + c10::str(stored.sizes())
                                                        + ", this run's is " + c10::toString(into.scalar_type()) + " " + c10::str(into.sizes())
                                                        + " (written by a different model shape)");
    return stored;
}

void loadArchive(torch::serialize::InputArchive &archive, const QString &path, const torch::Device &device)
{
    try {
        archive.load_from(path.toStdString(), device);
    } catch (const c10::Error &e) {
        throw InvalidInputError(path.toStdString(), std::string("cannot be loaded: ") + e.what_without_backtrace());
    }
}

// Version 1: torch archives (model.pt, optimizer.pt, rng.pt) of one process.
void restoreVersion1(TrainingSession &session, const QDir &dir, const CheckpointState &, const std::string &skip)
{
    const QString modelFile = dir.filePath(QStringLiteral("model.pt")), optimizerFile = dir.filePath(QStringLiteral("optimizer.pt")),
                  rngFile = dir.filePath(QStringLiteral("rng.pt"));
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, modelFile, session.device);
        for (auto &item : session.model->named_parameters()) {
            if (skip == "model")
                break;
            item.value().copy_(readTensor(archive, item.key(), modelFile, item.value()));
        }
        for (auto &item : session.model->named_buffers())
            item.value().copy_(readTensor(archive, item.key(), modelFile, item.value()));
    }
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, optimizerFile, session.device);
        std::map<std::string, torch::Tensor> optimizerState;
        for (const auto &key : archive.keys())
            optimizerState[key] = readTensor(archive, key, optimizerFile, {});
        try {
            if (skip != "optimizer")
                session.optimizer->restoreState(optimizerState);
        } catch (const c10::Error &e) {
            throw InvalidInputError(optimizerFile.toStdString(), e.what_without_backtrace());
        }
    }
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, rngFile, torch::kCPU);
        for (const auto &device : generatorDevices(session.device)) {
            if (skip == "rng")
                break;
            at::Generator generator = at::globalContext().defaultGenerator(device); // a handle to the global one
            generator.set_state(readTensor(archive, generatorKey(device), rngFile, {}));
        }
    }
}

} // namespace

} // namespace pb
