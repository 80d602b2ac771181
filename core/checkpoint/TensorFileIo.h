#pragma once
// Safetensors files written and read at the disk's speed (no torch here; the engine supplies the
// byte copies to and from its tensors). Each file is streamed through one thread in large chunks,
// hashed with SHA-256 as it is written or read (never a second pass), and several files go at once:
// one SHA-256 stream runs at about 0.65 GB/s on the H200 host, slower than its disk, so a
// checkpoint is cut into shards of at most kShardBytes and the shards are hashed in parallel.
#include <QByteArray>
#include <QString>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pb {

struct SafetensorEntry;

inline constexpr int64_t kShardBytes = int64_t(1) << 30;
inline constexpr int64_t kChunkBytes = int64_t(32) << 20;

// A staging buffer of kChunkBytes: pinned host memory where the tensors live on a GPU (so the
// device copies run at full speed), plain memory otherwise.
using ChunkBuffer = std::shared_ptr<uint8_t>;
using ChunkBufferFactory = std::function<ChunkBuffer()>;
ChunkBuffer plainChunkBuffer();

struct TensorSource {
    std::string name;
    std::string dtype;               // safetensors spelling: F32, BF16, I64, U8, ...
    std::vector<int64_t> shape;
    int64_t bytes = 0;
    // The bytes [offset, offset + length) of the tensor: a pointer into it, or `staging` after
    // copying them there.
    std::function<const void *(int64_t offset, int64_t length, uint8_t *staging)> read;
};

struct SafetensorsFileJob {
    std::string name;                // inside the folder
    std::vector<TensorSource> tensors;
    std::map<std::string, std::string> metadata;
};

struct FileDigest {
    std::string name;
    int64_t bytes = 0;
    std::string sha256;
};

// The 8-byte length, the JSON header and its padding to a multiple of 8, as safetensors writes them.
QByteArray safetensorsHeaderBytes(const std::vector<TensorSource> &tensors, const std::map<std::string, std::string> &metadata);
// Consecutive runs of tensors of at most maxBytes each (a larger tensor gets a shard of its own).
std::vector<std::vector<TensorSource>> splitIntoShards(std::vector<TensorSource> tensors, int64_t maxBytes);
// Creates each file in `folder` (it must not exist), writes it, fsyncs it; in parallel across files.
// Throws PilotBenchError(Failure) naming the file (full disk, no permission).
std::vector<FileDigest> writeSafetensorsFiles(const QString &folder, const std::vector<SafetensorsFileJob> &jobs, const ChunkBufferFactory &buffers);

// Where one stored tensor's bytes go: `write` gets them in order, in pieces.
struct TensorSink {
    std::function<void(int64_t offset, const uint8_t *data, int64_t length)> write;
};
struct SafetensorsReadJob {
    QString path;
    int64_t expectedBytes = -1;      // -1: unchecked
    std::string expectedSha256;      // empty: not hashed
    // Called once per stored tensor, in file order, before any data: its sink, or throw
    // InvalidInputError naming the file and tensor to refuse it.
    std::function<TensorSink(const SafetensorEntry &entry)> sinkFor;
};
// Reads each file sequentially in large chunks (in parallel across files), delivering every
// tensor's bytes to its sink and hashing the whole file when asked. Throws InvalidInputError naming
// the file for a malformed header, a wrong size or digest. Returns the bytes read.
int64_t readSafetensorsFiles(const std::vector<SafetensorsReadJob> &jobs, const ChunkBufferFactory &buffers);

// Runs fn(0..count-1) on up to `threads` threads (0: one per core, at most 8); the first exception
// is rethrown after all have stopped. std::thread rather than QtConcurrent, whose blocking calls
// pass on only QException's kind.
void runInParallel(size_t count, const std::function<void(size_t)> &fn, unsigned threads = 0);

} // namespace pb
