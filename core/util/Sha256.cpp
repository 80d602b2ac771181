#include "util/Sha256.h"

#include <QCryptographicHash>
#include <QFile>

#ifdef PB_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace pb {

struct Sha256::Impl {
#ifdef PB_HAVE_OPENSSL
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    Impl() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
    ~Impl() { EVP_MD_CTX_free(ctx); }
#else
    QCryptographicHash hash {QCryptographicHash::Sha256};
#endif
};

Sha256::Sha256() : m_impl(std::make_unique<Impl>()) {}
Sha256::~Sha256() = default;

void Sha256::add(const void *data, std::size_t bytes)
{
#ifdef PB_HAVE_OPENSSL
    EVP_DigestUpdate(m_impl->ctx, data, bytes);
#else
    m_impl->hash.addData(QByteArrayView(static_cast<const char *>(data), static_cast<qsizetype>(bytes)));
#endif
}

std::string Sha256::hexDigest()
{
#ifdef PB_HAVE_OPENSSL
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(m_impl->ctx, digest, &length);
    return QByteArray(reinterpret_cast<const char *>(digest), static_cast<qsizetype>(length)).toHex().toStdString();
#else
    return m_impl->hash.result().toHex().toStdString();
#endif
}

const char *Sha256::backend()
{
#ifdef PB_HAVE_OPENSSL
    return "openssl";
#else
    return "qt";
#endif
}

std::string sha256OfFileHex(const QString &path, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        if (error)
            *error = file.errorString();
        return {};
    }
    Sha256 hash;
    QByteArray chunk(8 << 20, Qt::Uninitialized);
    for (;;) {
        const qint64 n = file.read(chunk.data(), chunk.size());
        if (n < 0) {
            if (error)
                *error = file.errorString();
            return {};
        }
        if (n == 0)
            break;
        hash.add(chunk.constData(), static_cast<std::size_t>(n));
    }
    return hash.hexDigest();
}

} // namespace pb
