#include "checkpoint/TensorFileIo.h"

#include "model/Safetensors.h"
#include "util/Errors.h"
#include "util/Sha256.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pb {
namespace {

std::string systemError() { return std::strerror(errno); }

class Fd {
public:
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return m_fd; }
    int release()
    {
        const int fd = m_fd;
        m_fd = -1;
        return fd;
    }

private:
    int m_fd;
};

void writeAll(int fd, const void *data, int64_t length, const std::string &where)
{
    const auto *p = static_cast<const char *>(data);
    while (length > 0) {
        const ssize_t n = ::write(fd, p, static_cast<size_t>(std::min<int64_t>(length, int64_t(1) << 30)));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            throw PilotBenchError(ExitCode::Failure, where + ": cannot be written (" + (n < 0 ? systemError() : std::string("no space left")) + "); no checkpoint was completed");
        p += n;
        length -= n;
    }
}

void readAll(int fd, void *data, int64_t length, int64_t offset, const std::string &where)
{
    auto *p = static_cast<char *>(data);
    while (length > 0) {
        const ssize_t n = ::pread(fd, p, static_cast<size_t>(std::min<int64_t>(length, int64_t(1) << 30)), offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw InvalidInputError(where, "cannot be read: " + systemError());
        if (n == 0)
            throw InvalidInputError(where, "is truncated (ends before the tensors its header lists)");
        p += n;
        offset += n;
        length -= n;
    }
}

FileDigest writeOneFile(const QString &folder, const SafetensorsFileJob &job, uint8_t *staging)
{
    const QString path = QDir(folder).filePath(QString::fromStdString(job.name));
    const std::string where = path.toStdString();
    Fd fd(::open(QFile::encodeName(path).constData(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0)
        throw PilotBenchError(ExitCode::Failure, where + ": cannot be created: " + systemError());
    Sha256 hash;
    const QByteArray header = safetensorsHeaderBytes(job.tensors, job.metadata);
    hash.add(header.constData(), static_cast<size_t>(header.size()));
    writeAll(fd.get(), header.constData(), header.size(), where);
    int64_t total = header.size();
    for (const TensorSource &t : job.tensors) {
        for (int64_t offset = 0; offset < t.bytes; offset += kChunkBytes) {
            const int64_t length = std::min(kChunkBytes, t.bytes - offset);
            const void *bytes = t.read(offset, length, staging);
            hash.add(bytes, static_cast<size_t>(length));
            writeAll(fd.get(), bytes, length, where);
        }
        total += t.bytes;
    }
    if (::fsync(fd.get()) != 0)
        throw PilotBenchError(ExitCode::Failure, where + ": cannot be written (" + systemError() + "); no checkpoint was completed");
    if (::close(fd.release()) != 0)
        throw PilotBenchError(ExitCode::Failure, where + ": cannot be written (" + systemError() + "); no checkpoint was completed");
    return {job.name, total, hash.hexDigest()};
}

int64_t readOneFile(const SafetensorsReadJob &job, uint8_t *staging)
{
    const std::string where = job.path.toStdString();
    Fd fd(::open(QFile::encodeName(job.path).constData(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        throw InvalidInputError(where, "cannot be read: " + systemError());
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw InvalidInputError(where, "is not a regular file");
    const int64_t size = st.st_size;
    if (job.expectedBytes >= 0 && size != job.expectedBytes)
        throw InvalidInputError(where, "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(job.expectedBytes) + " (truncated or replaced)");
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    QByteArray first8(8, '\0');
    if (size < 8)
        throw InvalidInputError(where, "is truncated: no header length");
    readAll(fd.get(), first8.data(), 8, 0, where);
    const int64_t headerLength = safetensorsHeaderLength(first8, size, where);
    QByteArray header(static_cast<qsizetype>(headerLength), '\0');
    readAll(fd.get(), header.data(), headerLength, 8, where);
    const int64_t dataStart = 8 + headerLength;
    // Our own files: the format to the letter, so the tensors come in data order, none overlapping.
    std::vector<SafetensorEntry> entries = parseSafetensorsHeaderStrict(header, size - dataStart, where).entries;
    std::vector<TensorSink> sinks;
    for (SafetensorEntry &e : entries) {
        e.file = job.path;
        sinks.push_back(job.sinkFor(e));
    }
    Sha256 hash;
    const bool hashing = !job.expectedSha256.empty();
    if (hashing) {
        hash.add(first8.constData(), 8);
        hash.add(header.constData(), static_cast<size_t>(header.size()));
    }
    size_t next = 0; // the first entry not yet wholly delivered
    for (int64_t pos = dataStart; pos < size; pos += kChunkBytes) {
        const int64_t length = std::min(kChunkBytes, size - pos);
        readAll(fd.get(), staging, length, pos, where);
        if (hashing)
            hash.add(staging, static_cast<size_t>(length));
        const int64_t chunkBegin = pos - dataStart, chunkEnd = chunkBegin + length;
        for (size_t i = next; i < entries.size() && entries[i].begin < chunkEnd; ++i) {
            const int64_t from = std::max(entries[i].begin, chunkBegin), to = std::min(entries[i].end, chunkEnd);
            if (to > from)
                sinks[i].write(from - entries[i].begin, staging + (from - chunkBegin), to - from);
            if (entries[i].end <= chunkEnd && i == next)
                ++next;
        }
    }
    if (hashing && hash.hexDigest() != job.expectedSha256)
        throw InvalidInputError(where, "SHA-256 differs from the manifest: the file was altered or corrupted");
    return size;
}

// Staging buffers handed to the file threads and taken back, so at most one per thread is ever
// made (pinned allocations are slow).
class StagingPool {
public:
    explicit StagingPool(const ChunkBufferFactory &make) : m_make(make) {}
    class Lease {
    public:
        explicit Lease(StagingPool &pool) : m_pool(pool), m_buffer(pool.take()) {}
        ~Lease() { m_pool.give(std::move(m_buffer)); }
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        uint8_t *get() const { return m_buffer.get(); }

    private:
        StagingPool &m_pool;
        ChunkBuffer m_buffer;
    };

private:
    ChunkBuffer take()
    {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (!m_free.empty()) {
                ChunkBuffer b = std::move(m_free.back());
                m_free.pop_back();
                return b;
            }
        }
        return m_make();
    }
    void give(ChunkBuffer b)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_free.push_back(std::move(b));
    }

    const ChunkBufferFactory &m_make;
    std::mutex m_mutex;
    std::vector<ChunkBuffer> m_free;
};

} // namespace

ChunkBuffer plainChunkBuffer() { return ChunkBuffer(new uint8_t[kChunkBytes], std::default_delete<uint8_t[]>()); }

QByteArray safetensorsHeaderBytes(const std::vector<TensorSource> &tensors, const std::map<std::string, std::string> &metadata)
{
    QJsonObject header;
    int64_t offset = 0;
    for (const TensorSource &t : tensors) {
        QJsonArray shape;
        for (int64_t d : t.shape)
            shape.append(static_cast<qint64>(d));
        header.insert(QString::fromStdString(t.name), QJsonObject {{QStringLiteral("dtype"), QString::fromStdString(t.dtype)},
                                                                    {QStringLiteral("shape"), shape},
                                                                    {QStringLiteral("data_offsets"), QJsonArray {static_cast<qint64>(offset), static_cast<qint64>(offset + t.bytes)}}});
        offset += t.bytes;
    }
    if (!metadata.empty()) {
        QJsonObject meta;
        for (const auto &[key, value] : metadata)
            meta.insert(QString::fromStdString(key), QString::fromStdString(value));
        header.insert(QStringLiteral("__metadata__"), meta);
    }
    QByteArray json = QJsonDocument(header).toJson(QJsonDocument::Compact);
    // The data starts 8-aligned, as the safetensors library pads it (with spaces).
    json.append(QByteArray((8 - (json.size() % 8)) % 8, ' '));
    QByteArray bytes(8, '\0');
    uint64_t length = static_cast<uint64_t>(json.size());
    for (int i = 0; i < 8; ++i, length >>= 8)
        bytes[i] = static_cast<char>(length & 0xff);
    return bytes + json;
}

std::vector<std::vector<TensorSource>> splitIntoShards(std::vector<TensorSource> tensors, int64_t maxBytes)
{
    std::vector<std::vector<TensorSource>> shards(1);
    int64_t bytes = 0;
    for (TensorSource &t : tensors) {
        if (!shards.back().empty() && bytes + t.bytes > maxBytes) {
            shards.emplace_back();
            bytes = 0;
        }
        bytes += t.bytes;
        shards.back().push_back(std::move(t));
    }
    return shards;
}

std::vector<FileDigest> writeSafetensorsFiles(const QString &folder, const std::vector<SafetensorsFileJob> &jobs, const ChunkBufferFactory &buffers)
{
    std::vector<FileDigest> digests(jobs.size());
    // Largest first, so the longest file does not start last.
    std::vector<size_t> order(jobs.size());
    std::vector<int64_t> sizes(jobs.size(), 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        order[i] = i;
        for (const auto &t : jobs[i].tensors)
            sizes[i] += t.bytes;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
    StagingPool pool(buffers);
    runInParallel(jobs.size(), [&](size_t k) {
        const StagingPool::Lease staging(pool);
        digests[order[k]] = writeOneFile(folder, jobs[order[k]], staging.get());
    });
    return digests;
}

int64_t readSafetensorsFiles(const std::vector<SafetensorsReadJob> &jobs, const ChunkBufferFactory &buffers)
{
    std::atomic<int64_t> total {0};
    StagingPool pool(buffers);
    runInParallel(jobs.size(), [&](size_t i) {
        const StagingPool::Lease staging(pool);
        total += readOneFile(jobs[i], staging.get());
    });
    return total.load();
}

void runInParallel(size_t count, const std::function<void(size_t)> &fn, unsigned threads)
{
    if (threads == 0)
        threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    threads = static_cast<unsigned>(std::min<size_t>(threads, count));
    if (threads <= 1) {
        for (size_t i = 0; i < count; ++i)
            fn(i);
        return;
    }
    std::atomic<size_t> next {0};
    std::atomic<bool> failed {false};
    std::exception_ptr first;
    std::mutex mutex;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            for (size_t i = next++; i < count && !failed; i = next++) {
                try {
                    fn(i);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(mutex);
                    if (!first)
                        first = std::current_exception();
                    failed = true;
                }
            }
        });
    }
    for (auto &t : pool)
        t.join();
    if (first)
        std::rethrow_exception(first);
}

} // namespace pb
