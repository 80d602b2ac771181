#pragma once
// The checkpoint manifest, without torch: verification is also what `checkpoint verify` and the
// export copy check use.
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

struct CheckpointInfo {
    QString path;                    // the step folder
    int64_t step = 0;
    std::string configHash;
    std::vector<ManifestEntry> files;
    int64_t totalBytes = 0;
    double verifyMs = 0;
};

// Streams the file through SHA-256; throws InvalidInputError naming the file when unreadable.
std::string sha256OfFile(const QString &path);
// Writes `data` to `path` atomically: temporary name, fsync, rename (and fsync of the folder).
void writeFileAtomically(const QString &path, const QByteArray &data);
void fsyncFile(const QString &path);
void fsyncDirectory(const QString &path);
// Reads manifest.json and checks every listed file's presence, size and SHA-256. Throws
// InvalidInputError naming the offending file (exit code 2 in the CLI).
CheckpointInfo verifyCheckpoint(const QString &stepFolder);
// `path` itself when it holds a manifest, else its newest step-* child with a manifest.
QString resolveCheckpointFolder(const QString &path);

} // namespace pb
