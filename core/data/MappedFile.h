#pragma once
// A read-only memory mapping of a data file (QFile::map): the operating system pages in what is
// read, so a gigabyte token file costs address space, not resident memory.
#include <QFile>

#include <cstdint>
#include <string>

namespace pb::data {

class MappedFile final {
public:
    // Throws InvalidInputError(path, ...) for a missing, unreadable, empty or unmappable file.
    explicit MappedFile(const std::string &path);
    ~MappedFile();
    Q_DISABLE_COPY_MOVE(MappedFile)

    const uchar *data() const { return m_data; }
    int64_t sizeBytes() const { return m_sizeBytes; }
    const std::string &path() const { return m_path; }

    // "sha256:<hex>" of the file bytes, streamed through the mapping in chunks. Each chunk is
    // released from this process's resident set once hashed, so hashing a large file leaves it in
    // the page cache but not in our RSS. Safe to call from several threads (read-only mapping).
    std::string sha256() const;

private:
    std::string m_path;
    QFile m_file;
    uchar *m_data = nullptr;
    int64_t m_sizeBytes = 0;
};

// "sha256:<hex>" of a byte string (for synthetic parameters and small side files).
std::string sha256Of(const std::string &bytes);

} // namespace pb::data
