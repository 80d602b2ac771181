#include "data/MappedFile.h"

#include "util/Sha256.h"

#include "util/Errors.h"

#include <QCryptographicHash>
#include <QFileInfo>

#include <algorithm>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace pb::data {

MappedFile::MappedFile(const std::string &path) : m_path(path), m_file(QString::fromStdString(path))
{
    const QFileInfo info(m_file.fileName());
    if (!info.exists())
        throw InvalidInputError(path, "file does not exist");
    if (info.isDir())
        throw InvalidInputError(path, "is a folder, not a data file");
    if (!m_file.open(QIODevice::ReadOnly))
        throw InvalidInputError(path, "cannot be read: " + m_file.errorString().toStdString());
    m_sizeBytes = m_file.size();
    if (m_sizeBytes == 0)
        throw InvalidInputError(path, "file is empty");
    m_data = m_file.map(0, m_sizeBytes);
    if (!m_data)
        throw InvalidInputError(path, "cannot be memory-mapped: " + m_file.errorString().toStdString());
}

MappedFile::~MappedFile()
{
    if (m_data)
        m_file.unmap(m_data);
}

std::string MappedFile::sha256() const
{
    // 8 MiB: large enough that the hash dominates, small enough that the resident set stays flat.
    constexpr int64_t kChunkBytes = int64_t(8) << 20;
    Sha256 hash;
    for (int64_t offset = 0; offset < m_sizeBytes; offset += kChunkBytes) {
        const int64_t n = std::min(kChunkBytes, m_sizeBytes - offset);
        hash.add(m_data + offset, static_cast<std::size_t>(n));
#ifdef __linux__
        // The mapping is read-only and file-backed: dropping our page-table entries loses nothing
        // (the pages stay in the page cache; a later read simply faults them back in).
        // The mapping starts page-aligned and the chunk size is a multiple of any page size.
        madvise(m_data + offset, static_cast<size_t>(n), MADV_DONTNEED);
#endif
    }
    return "sha256:" + hash.hexDigest();
}

std::string sha256Of(const std::string &bytes)
{
    const QByteArray digest = QCryptographicHash::hash(QByteArrayView(bytes.data(), static_cast<qsizetype>(bytes.size())),
                                                       QCryptographicHash::Sha256);
    return "sha256:" + digest.toHex().toStdString();
}

} // namespace pb::data
