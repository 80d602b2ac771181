#pragma once
// The checkpoint manifest and state, without torch: verification is also what `checkpoint verify`
// and the export copy check use. A checkpoint is accepted only when its manifest lists exactly the
// files of the format, each a regular file (never a link) of the listed size and SHA-256, and when
// state.json and config.json agree with the manifest field by field.
// Version 2 (written now): tensors in safetensors files (CheckpointLayout.h names them), one or
// several processes. Version 1 (written before): model.pt, optimizer.pt and rng.pt, torch archives
// of one process; still verified and restored.
#include <QByteArray>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct ManifestEntry {
    std::string file;
    int64_t bytes = 0;
    std::string sha256;
};

inline constexpr int64_t kCheckpointVersion = 2;

// manifest.json as written by writeCheckpoint (format "pilotbench-checkpoint").
struct CheckpointManifest {
    int64_t version = kCheckpointVersion;
    int64_t step = 0;
    std::string configHash;
    int worldSize = 1;
    std::string strategy = "none";   // "none" (one process), "ddp", "zero2", "fsdp"
    std::vector<ManifestEntry> files; // version 1: exactly checkpointFilesV1(), in that order
};

// One rank's place in the data and its loss scaler.
struct RankPosition {
    int64_t epoch = 0;
    int64_t index = 0;               // batches consumed in the epoch
    uint64_t shuffleSeed = 0;
    bool lossScaleEnabled = false;
    double lossScale = 1.0;
    int64_t goodSteps = 0;
};

// state.json: what a restore sets besides tensors.
struct CheckpointState {
    int64_t step = 0;
    std::string configHash;
    std::string optimizer;
    std::string torchVersion;
    int worldSize = 1;
    std::string strategy = "none";
    std::vector<RankPosition> ranks; // one per rank, in rank order
};

struct CheckpointInfo {
    QString path;                    // the step folder
    int64_t step = 0;
    std::string configHash;
    std::vector<ManifestEntry> files;
    CheckpointState state;
    int64_t version = kCheckpointVersion;
    int64_t totalBytes = 0;
    double verifyMs = 0;
};

// The files of a version-1 checkpoint besides manifest.json, in the order the manifest lists them.
const std::vector<std::string> &checkpointFilesV1();
// Parse and check field by field; throw InvalidInputError naming `where` and the field.
CheckpointManifest parseCheckpointManifest(const QByteArray &bytes, const std::string &where);
CheckpointState parseCheckpointState(const QByteArray &bytes, const std::string &where);
QByteArray checkpointManifestJson(const CheckpointManifest &manifest);
QByteArray checkpointStateJson(const CheckpointState &state);
// One rank's entry of state.json ({data_position, loss_scale}), also what a rank hands rank 0.
QJsonObject rankPositionJson(const RankPosition &position);
RankPosition parseRankPositionJson(const QJsonObject &json, const std::string &where);

// Streams the file through SHA-256; throws InvalidInputError naming the file when unreadable.
std::string sha256OfFile(const QString &path);
void fsyncFile(const QString &path);
void fsyncDirectory(const QString &path);
enum class ContentHashes { Check, AlreadyChecked };
// Reads manifest.json, checks every listed file's kind, size and SHA-256 (unless a caller has just
// done so; the files are hashed in parallel), then state.json and config.json against it, and the
// model's tensor names and shapes against the config. Throws InvalidInputError naming the
// offending file (exit code 2).
CheckpointInfo verifyCheckpoint(const QString &stepFolder, ContentHashes hashes = ContentHashes::Check);
// The checkpoint a run will resume from (a step folder or a root holding them), verified and
// checked to be of the run configuration hashed `configHash`: what can be found wrong without torch
// is found before the run is recorded.
CheckpointInfo verifyResumePoint(const QString &path, const std::string &configHash);
// `path` itself when it holds a manifest, else its newest step-* child with a manifest.
QString resolveCheckpointFolder(const QString &path);

} // namespace pb
