#pragma once
// Fixture writers for the data-source tests: raw token arrays, .npy files with any header the
// tests want (including broken ones), text files.
#include "data/TokenDataset.h"
#include "util/Errors.h"

#include <QByteArray>
#include <QFile>
#include <QString>
#include <QTemporaryDir>
#include <QtTest>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pbtest {

inline std::string writeFile(const QTemporaryDir &dir, const QString &name, const QByteArray &bytes)
{
    const QString path = dir.filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size())
        qFatal("cannot write fixture %s", qPrintable(path));
    return path.toStdString();
}

template <typename T>
QByteArray rawTokens(const std::vector<T> &tokens)
{
    // The project only targets little-endian hosts, where the in-memory layout is the file layout.
    QByteArray bytes(static_cast<qsizetype>(tokens.size() * sizeof(T)), '\0');
    if (!tokens.empty())
        std::memcpy(bytes.data(), tokens.data(), tokens.size() * sizeof(T));
    return bytes;
}

// An .npy file as NumPy writes it: magic, version, header length (2 bytes for v1, 4 for v2/v3),
// the dict padded with spaces to a 64-byte boundary and a newline, then the payload.
inline QByteArray npyFile(const std::string &dict, const QByteArray &payload, int major = 1)
{
    const int lengthBytes = major == 1 ? 2 : 4;
    QByteArray header = QByteArray::fromStdString(dict);
    const qsizetype unpadded = 8 + lengthBytes + header.size() + 1;
    header.append(QByteArray((64 - unpadded % 64) % 64, ' '));
    header.append('\n');
    QByteArray out("\x93NUMPY", 6);
    out.append(static_cast<char>(major));
    out.append('\0');
    for (int i = 0; i < lengthBytes; ++i)
        out.append(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    out.append(header);
    out.append(payload);
    return out;
}

inline std::string npyDict(const std::string &descr, const std::string &shape, bool fortran = false)
{
    return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

inline std::vector<int32_t> readSample(const pb::TokenDataset &dataset, int64_t index)
{
    std::vector<int32_t> out;
    dataset.read(index, out);
    return out;
}

} // namespace pbtest

// Runs `statement`, which must throw pb::InvalidInputError whose where() equals `whereExpected`
// and whose message contains `needle`.
#define PB_EXPECT_INVALID(statement, whereExpected, needle)                                                         \
    do {                                                                                                            \
        bool thrown_ = false;                                                                                       \
        try {                                                                                                       \
            statement;                                                                                              \
        } catch (const pb::InvalidInputError &e_) {                                                                 \
            thrown_ = true;                                                                                         \
            QCOMPARE(QString::fromStdString(e_.where()), QString::fromStdString(whereExpected));                   \
            QVERIFY2(QString::fromUtf8(e_.what()).contains(QString::fromStdString(needle)), e_.what());            \
        }                                                                                                           \
        QVERIFY2(thrown_, "expected pb::InvalidInputError");                                                        \
    } while (false)
