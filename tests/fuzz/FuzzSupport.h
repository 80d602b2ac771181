#pragma once
// What the fuzz targets share. A reader's PilotBenchError is a clean refusal and ends the input;
// anything else escaping (another exception, a crash, a sanitizer report) is a finding, and so is
// a broken FUZZ_REQUIRE: an invariant of what the reader accepted.
#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace pb::fuzz {

// The input without a copy: a read past its end is then a read past libFuzzer's buffer, which ASan
// reports (QByteArray's own copy would carry a terminating NUL and slack).
inline QByteArray bytes(const uint8_t *data, size_t size)
{
    return QByteArray::fromRawData(reinterpret_cast<const char *>(data), static_cast<qsizetype>(size));
}

inline std::optional<QJsonObject> jsonObject(const QByteArray &bytes)
{
    const QJsonDocument doc = QJsonDocument::fromJson(bytes);
    if (!doc.isObject())
        return std::nullopt;
    return doc.object();
}

[[noreturn]] inline void invariantBroken(const char *what, const char *file, int line)
{
    std::fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    std::abort();
}

} // namespace pb::fuzz

#define FUZZ_REQUIRE(condition) ((condition) ? void() : pb::fuzz::invariantBroken(#condition, __FILE__, __LINE__))
