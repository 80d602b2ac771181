#include "checkpoint/Checkpoint.h"

#include "config/RunConfigJson.h"
#include "engine/LrSchedule.h"
#include "engine/TorchCompat.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "util/Sha256.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace pb {
namespace {

const QString kModelFile = QStringLiteral("model.pt");
const QString kOptimizerFile = QStringLiteral("optimizer.pt");
const QString kRngFile = QStringLiteral("rng.pt");
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

// Through a writer function, not save_to(filename): the file writer throws from its destructor when
// the disk fills, which cannot be caught and aborts the process. Here the first error is kept, the
// archive is let finish into nothing, and the failure is reported with the old file in place.
void saveArchive(torch::serialize::OutputArchive &archive, const QString &path)
{
    const QString temp = path + QStringLiteral(".tmp");
    QFile file(temp);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Unbuffered))
        throw PilotBenchError(ExitCode::Failure, temp.toStdString() + ": cannot be created: " + file.errorString().toStdString());
    QString error;
    archive.save_to([&](const void *data, size_t n) -> size_t {
        if (error.isEmpty() && file.write(static_cast<const char *>(data), static_cast<qint64>(n)) != static_cast<qint64>(n))
            error = file.errorString();
        return n;
    });
    if (error.isEmpty() && ::fsync(file.handle()) != 0)
        error = QString::fromLocal8Bit(std::strerror(errno));
    file.close();
    if (!error.isEmpty()) {
        QFile::remove(temp);
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be written (" + error.toStdString() + "); no checkpoint was completed");
    }
    // rename(2) replaces atomically: there is no moment without a file at `path`.
    if (::rename(QFile::encodeName(temp).constData(), QFile::encodeName(path).constData()) != 0)
        throw PilotBenchError(ExitCode::Failure, path.toStdString() + ": cannot be renamed into place: " + std::strerror(errno));
}

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

} // namespace

namespace {

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

CheckpointWrite writeCheckpoint(TrainingSession &session, const std::string &root)
{
    const auto start = std::chrono::steady_clock::now();
    const QString folder = QDir(QString::fromStdString(root)).filePath(QStringLiteral("step-%1").arg(session.step, 8, 10, QLatin1Char('0')));
    QDir dir(folder);
    if (dir.exists())
        dir.removeRecursively();
    if (!QDir().mkpath(folder))
        throw PilotBenchError(ExitCode::Failure, folder.toStdString() + ": cannot create the checkpoint folder");

    {
        torch::serialize::OutputArchive archive;
        for (const auto &item : session.model->named_parameters())
            archive.write(item.key(), item.value().detach());
        for (const auto &item : session.model->named_buffers())
            archive.write(item.key(), item.value().detach(), /*is_buffer=*/true);
        saveArchive(archive, dir.filePath(kModelFile));
    }
    {
        torch::serialize::OutputArchive archive;
        for (const auto &[name, tensor] : session.optimizer->state())
            archive.write(name, tensor.detach());
        saveArchive(archive, dir.filePath(kOptimizerFile));
    }
    {
        torch::serialize::OutputArchive archive;
        for (const auto &device : generatorDevices(session.device))
            archive.write(generatorKey(device), at::globalContext().defaultGenerator(device).get_state());
        saveArchive(archive, dir.filePath(kRngFile));
    }
    const QJsonObject state {
        {QStringLiteral("step"), static_cast<qint64>(session.step)},
        {QStringLiteral("data_position"), QJsonObject {{QStringLiteral("epoch"), static_cast<qint64>(session.consumed.epoch)},
                                                       {QStringLiteral("index"), static_cast<qint64>(session.consumed.index)},
                                                       {QStringLiteral("shuffle_seed"), QString::number(session.consumed.shuffleSeed)}}},
        {QStringLiteral("loss_scale"), QJsonObject {{QStringLiteral("enabled"), session.scaler.enabled},
                                                    {QStringLiteral("scale"), session.scaler.scale},
                                                    {QStringLiteral("good_steps"), static_cast<qint64>(session.scaler.goodSteps)}}},
        {QStringLiteral("config_hash"), QString::fromStdString(configHash(session.config))},
        {QStringLiteral("optimizer"), QString::fromStdString(session.optimizer->path())},
        {QStringLiteral("torch_version"), QStringLiteral(TORCH_VERSION)},
    };
    writeFileAtomically(dir.filePath(kStateFile), QJsonDocument(state).toJson());
    writeFileAtomically(dir.filePath(kConfigFile), QJsonDocument(toJson(session.config)).toJson());

    QJsonArray files;
    int64_t total = 0;
    for (const auto &name : {kModelFile, kOptimizerFile, kRngFile, kStateFile, kConfigFile}) {
        const QString path = dir.filePath(name);
        const qint64 bytes = QFileInfo(path).size();
        total += bytes;
        files.append(QJsonObject {{QStringLiteral("file"), name}, {QStringLiteral("bytes"), bytes}, {QStringLiteral("sha256"), QString::fromStdString(sha256OfFile(path))}});
    }
    const QJsonObject manifest {{QStringLiteral("format"), QStringLiteral("pilotbench-checkpoint")},
                                {QStringLiteral("version"), 1},
                                {QStringLiteral("step"), static_cast<qint64>(session.step)},
                                {QStringLiteral("config_hash"), QString::fromStdString(configHash(session.config))},
                                {QStringLiteral("files"), files}};
    // The manifest is written last: its presence is what marks the checkpoint complete.
    writeFileAtomically(dir.filePath(QStringLiteral("manifest.json")), QJsonDocument(manifest).toJson());
    fsyncDirectory(folder);

    CheckpointWrite write;
    write.step = session.step;
    write.path = folder.toStdString();
    write.bytes = total;
    write.writeMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return write;
}

std::map<std::string, std::string> stateDigest(TrainingSession &session)
{
    std::map<std::string, std::string> digest;
    digest["model"] = parameterChecksum(*session.model);
    std::vector<std::pair<std::string, torch::Tensor>> optimizer;
    for (const auto &[name, tensor] : session.optimizer->state())
        optimizer.emplace_back(name, tensor);
    digest["optimizer"] = hashTensors(optimizer);
    digest["schedule"] = "step " + std::to_string(session.step) + ", next lr " +
                         std::to_string(learningRateAt(session.config.train.optimizer, session.config.train.schedule, session.step));
    std::vector<std::pair<std::string, torch::Tensor>> rng;
    for (const auto &device : generatorDevices(session.device))
        rng.emplace_back(generatorKey(device), at::globalContext().defaultGenerator(device).get_state());
    digest["rng"] = hashTensors(rng);
    digest["data_position"] = "epoch " + std::to_string(session.consumed.epoch) + ", batch " + std::to_string(session.consumed.index) + ", seed " +
                              std::to_string(session.consumed.shuffleSeed);
    digest["loss_scale"] = session.scaler.enabled ? std::to_string(session.scaler.scale) + " after " + std::to_string(session.scaler.goodSteps) : "off";
    return digest;
}

void restoreCheckpoint(TrainingSession &session, const std::string &path, const std::string &skip, ContentHashes hashes)
{
    const QString folder = resolveCheckpointFolder(QString::fromStdString(path));
    const CheckpointInfo info = verifyCheckpoint(folder, hashes);
    const QDir dir(folder);
    const std::string expectedHash = configHash(session.config);
    if (info.configHash != expectedHash)
        throw InvalidInputError(dir.filePath(kConfigFile).toStdString(), "was written for another run configuration (hash " + info.configHash +
                                                                            ", this run is " + expectedHash + ")");
    const CheckpointState &state = info.state;

    torch::NoGradGuard noGrad;
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, dir.filePath(kModelFile), session.device);
        for (auto &item : session.model->named_parameters()) {
            if (skip == "model")
                break;
            item.value().copy_(readTensor(archive, item.key(), dir.filePath(kModelFile), item.value()));
        }
        for (auto &item : session.model->named_buffers())
            item.value().copy_(readTensor(archive, item.key(), dir.filePath(kModelFile), item.value()));
    }
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, dir.filePath(kOptimizerFile), session.device);
        std::map<std::string, torch::Tensor> optimizerState;
        for (const auto &key : archive.keys())
            optimizerState[key] = readTensor(archive, key, dir.filePath(kOptimizerFile), {});
        try {
            if (skip != "optimizer")
                session.optimizer->restoreState(optimizerState);
        } catch (const c10::Error &e) {
            throw InvalidInputError(dir.filePath(kOptimizerFile).toStdString(), e.what_without_backtrace());
        }
    }
    {
        torch::serialize::InputArchive archive;
        loadArchive(archive, dir.filePath(kRngFile), torch::kCPU);
        for (const auto &device : generatorDevices(session.device)) {
            if (skip == "rng")
                break;
            at::Generator generator = at::globalContext().defaultGenerator(device); // a handle to the global one
            generator.set_state(readTensor(archive, generatorKey(device), dir.filePath(kRngFile), {}));
        }
    }
    if (skip != "schedule")
        session.step = state.step;
    if (skip != "data_position") {
        session.consumed.epoch = state.epoch;
        session.consumed.index = state.index;
        session.consumed.shuffleSeed = state.shuffleSeed;
    }
    if (skip == "loss_scale")
        return;
    session.scaler.scale = state.lossScale;
    session.scaler.goodSteps = state.goodSteps;
}

} // namespace pb
