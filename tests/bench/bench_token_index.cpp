// Opening a 1 GB token file must not read it into memory. Writes a 1 GiB uint16 token file
// (removed at the end), evicts it from the page cache, then times openDataset (mapping + the
// bounded range scan) and the revision hash separately, and prints the resident memory before and
// after each: VmRSS, split into anonymous memory (what we allocated) and file pages (what the
// mapping has touched). Usage: bench_token_index [folder for the temporary file]
#include "data/TokenDataset.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>

#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Rss {
    long long totalKiB = 0, anonKiB = 0, fileKiB = 0, peakKiB = 0;
};

Rss residentMemory()
{
    Rss r;
    QFile status(QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly))
        return r;
    for (const QByteArray &line : status.readAll().split('\n')) {
        const auto value = [&line] { return line.mid(line.indexOf(':') + 1).trimmed().split(' ').value(0).toLongLong(); };
        if (line.startsWith("VmRSS:")) r.totalKiB = value();
        else if (line.startsWith("RssAnon:")) r.anonKiB = value();
        else if (line.startsWith("RssFile:")) r.fileKiB = value();
        else if (line.startsWith("VmHWM:")) r.peakKiB = value();
    }
    return r;
}

void printRss(const char *when)
{
    const Rss r = residentMemory();
    std::printf("  RSS %-34s %8.1f MiB (anonymous %7.1f MiB, file pages %7.1f MiB, peak %7.1f MiB)\n", when, r.totalKiB / 1024.0, r.anonKiB / 1024.0,
                r.fileKiB / 1024.0, r.peakKiB / 1024.0);
}

// Clean pages of a file we just wrote and synced can be dropped without privileges.
void evictFromPageCache(const std::string &path)
{
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
        return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

} // namespace

int main(int argc, char **argv)
{
    constexpr long long kTokens = 512LL * 1024 * 1024; // 1 GiB of uint16
    constexpr long long kVocab = 50257;
    constexpr long long kSeqLen = 2048;
    const QString base = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QDir::tempPath();
    QTemporaryDir dir(base + QStringLiteral("/pb-bench-XXXXXX"));
    if (!dir.isValid()) {
        std::fprintf(stderr, "cannot create a temporary folder under %s\n", qPrintable(base));
        return 1;
    }
    const std::string path = dir.filePath(QStringLiteral("tokens.bin")).toStdString();
    std::printf("bench_token_index: %lld uint16 tokens (%.2f GiB) in %s\n", kTokens, kTokens * 2.0 / (1 << 30), path.c_str());
    printRss("at start");

    QElapsedTimer timer;
    timer.start();
    {
        QFile out(QString::fromStdString(path));
        if (!out.open(QIODevice::WriteOnly)) {
            std::fprintf(stderr, "cannot write %s\n", path.c_str());
            return 1;
        }
        std::vector<uint16_t> chunk(8 << 20);
        for (long long written = 0; written < kTokens; written += static_cast<long long>(chunk.size())) {
            for (size_t i = 0; i < chunk.size(); ++i)
                chunk[i] = static_cast<uint16_t>((written + static_cast<long long>(i)) * 7919 % kVocab);
            if (out.write(reinterpret_cast<const char *>(chunk.data()), static_cast<qint64>(chunk.size() * 2)) != static_cast<qint64>(chunk.size() * 2)) {
                std::fprintf(stderr, "short write to %s (disk full?)\n", path.c_str());
                return 1;
            }
        }
    }
    evictFromPageCache(path);
    std::printf("  wrote the file in %.2f s and evicted it from the page cache\n", timer.nsecsElapsed() / 1e9);
    printRss("before open (write buffer freed)");

    pb::DataConfig config;
    config.kind = pb::DataKind::TokenFile;
    config.path = path;
    config.tokenDtype = "uint16";
    timer.restart();
    auto dataset = pb::openDataset(config, kVocab, kSeqLen, 1);
    const double openMs = timer.nsecsElapsed() / 1e6;
    std::printf("  openDataset (map + index + range scan of first/last MiB): %.2f ms -> %s\n", openMs, dataset->description().c_str());
    printRss("after open");

    timer.restart();
    std::vector<int32_t> sample;
    long long checksum = 0;
    const long long samples = dataset->size();
    constexpr int kReads = 1000;
    for (int i = 0; i < kReads; ++i) {
        sample.clear();
        dataset->read((static_cast<long long>(i) * 2654435761LL) % samples, sample);
        checksum += sample[0];
    }
    std::printf("  %d random sample reads (%lld tokens each, cold pages): %.2f ms total (checksum %lld)\n", kReads, kSeqLen + 1, timer.nsecsElapsed() / 1e6,
                checksum);
    printRss("after the reads");

    timer.restart();
    const std::string revision = dataset->revision();
    const double coldHashS = timer.nsecsElapsed() / 1e9;
    std::printf("  revision (SHA-256 streamed through the mapping, cold): %.2f s (%.0f MiB/s) -> %s\n", coldHashS, kTokens * 2.0 / (1 << 20) / coldHashS,
                revision.c_str());
    printRss("after hashing");

    dataset.reset();
    auto again = pb::openDataset(config, kVocab, kSeqLen, 1);
    timer.restart();
    const std::string revisionWarm = again->revision();
    const double warmHashS = timer.nsecsElapsed() / 1e9;
    std::printf("  revision again on a fresh open (page cache warm): %.2f s (%.0f MiB/s), %s\n", warmHashS, kTokens * 2.0 / (1 << 20) / warmHashS,
                revisionWarm == revision ? "same hash" : "DIFFERENT HASH");
    printRss("after the second hash");
    again.reset();
    if (!QFile::remove(QString::fromStdString(path)))
        std::fprintf(stderr, "could not remove %s\n", path.c_str());
    return revisionWarm == revision ? 0 : 1;
}
