#pragma once
// Streaming SHA-256. Checkpoints and data revisions hash gigabytes, so this uses OpenSSL's
// implementation (SHA extensions, ~1.5 GB/s) where the build has it, Qt's (~0.1 GB/s) otherwise.
#include <QByteArray>
#include <QString>

#include <cstddef>
#include <memory>
#include <string>

namespace pb {

class Sha256 final {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;
    void add(const void *data, std::size_t bytes);
    std::string hexDigest();          // finishes the hash
    static const char *backend();     // "openssl" or "qt"

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Hex SHA-256 of a file, streamed in 8 MiB chunks; empty string when the file cannot be read.
std::string sha256OfFileHex(const QString &path, QString *error = nullptr);

} // namespace pb
