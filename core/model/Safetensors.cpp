#include "model/Safetensors.h"

#include "config/JsonText.h"
#include "util/Errors.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace pb {

int64_t SafetensorsFolder::dtypeSize(const std::string &dtype)
{
    static const std::map<std::string, int64_t> sizes {{"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}};
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

int64_t safetensorsHeaderLength(const QByteArray &first8, int64_t fileSize, const std::string &where)
{
    if (first8.size() < 8)
        throw InvalidInputError(where, "is truncated: no header length");
    uint64_t headerLength = 0;
    for (int i = 7; i >= 0; --i)
        headerLength = (headerLength << 8) | static_cast<uchar>(first8[i]);
    if (headerLength == 0 || headerLength > 100u * 1024 * 1024 || static_cast<int64_t>(8 + headerLength) > fileSize)
        throw InvalidInputError(where, "has an impossible header length (" + std::to_string(headerLength) + " bytes)");
    return static_cast<int64_t>(headerLength);
}

std::vector<SafetensorEntry> parseSafetensorsHeader(const QByteArray &headerJson, int64_t dataBytes, const std::string &where)
{
    QJsonParseError error {};
    const auto doc = QJsonDocument::fromJson(headerJson, &error);
    if (!doc.isObject())
        throw InvalidInputError(where, "header is not a JSON object: " + error.errorString().toStdString());
    std::vector<SafetensorEntry> entries;
    const QJsonObject header = doc.object();
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == QLatin1String("__metadata__"))
            continue;
        const QJsonObject t = it.value().toObject();
        SafetensorEntry e;
        e.name = it.key().toStdString();
        e.dtype = t.value(QStringLiteral("dtype")).toString().toStdString();
        // Every dimension a count, and the size they need checked as it grows: a header is only text,
        // and a product that wraps around could match a small byte range.
        int64_t needBytes = SafetensorsFolder::dtypeSize(e.dtype);
        bool shapeOk = needBytes > 0;
        for (const auto &d : t.value(QStringLiteral("shape")).toArray()) {
            e.shape.push_back(d.toInteger(-1));
            shapeOk = shapeOk && e.shape.back() >= 0 && !__builtin_mul_overflow(needBytes, e.shape.back(), &needBytes);
        }
        const QJsonArray offsets = t.value(QStringLiteral("data_offsets")).toArray();
        if (offsets.size() != 2 || !shapeOk)
            throw InvalidInputError(where, "tensor '" + e.name + "' has a malformed entry (dtype '" + e.dtype + "')");
        e.begin = offsets[0].toInteger(-1);
        e.end = offsets[1].toInteger(-1);
        if (e.begin < 0 || e.end < e.begin || e.end > dataBytes)
            throw InvalidInputError(where, "tensor '" + e.name + "' lies outside the file (truncated?)");
        if (e.end - e.begin != needBytes)
            throw InvalidInputError(where, "tensor '" + e.name + "' has " + std::to_string(e.end - e.begin) + " bytes, its shape needs " +
                                               std::to_string(needBytes));
        entries.push_back(std::move(e));
    }
    return entries;
}

namespace {

// A whole number of at least 0 as the text wrote it, or -1. toInteger, not toDouble: Qt keeps an
// integer literal exactly, and 2^53 + 1 must not read as 2^53 (the lenient reader would disagree).
int64_t wholeNumber(const QJsonValue &v) { return v.isDouble() ? std::max<int64_t>(v.toInteger(-1), -1) : -1; }

} // namespace

SafetensorsHeader parseSafetensorsHeaderStrict(const QByteArray &headerJson, int64_t dataBytes, const std::string &where)
{
    // The specification: the header starts with '{' and may be padded at its end with spaces
    // (0x20) only; one JSON object whose keys are unique (Qt would keep one of two silently).
    qsizetype end = headerJson.size();
    while (end > 0 && headerJson[end - 1] == ' ')
        --end;
    if (end == 0 || headerJson[0] != '{' || headerJson[end - 1] != '}')
        throw InvalidInputError(where, "header must be one JSON object, starting with '{' and padded with spaces only");
    checkJsonText(headerJson, where);
    QJsonParseError error {};
    const auto doc = QJsonDocument::fromJson(headerJson, &error);
    if (!doc.isObject())
        throw InvalidInputError(where, "header is not a JSON object: " + error.errorString().toStdString());
    SafetensorsHeader out;
    const QJsonObject header = doc.object();
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string name = it.key().toStdString();
        if (name == "__metadata__") {
            if (!it.value().isObject())
                throw InvalidInputError(where, "__metadata__ must be an object of strings");
            const QJsonObject meta = it.value().toObject();
            for (auto m = meta.begin(); m != meta.end(); ++m) {
                if (!m.value().isString())
                    throw InvalidInputError(where, "__metadata__." + m.key().toStdString() + " must be a string (the format's metadata maps strings to strings)");
                out.metadata[m.key().toStdString()] = m.value().toString().toStdString();
            }
            out.hasMetadata = true;
            continue;
        }
        const std::string tensor = "tensor '" + name + "'";
        if (!it.value().isObject())
            throw InvalidInputError(where, tensor + " must be an object of dtype, shape and data_offsets");
        const QJsonObject t = it.value().toObject();
        for (auto k = t.begin(); k != t.end(); ++k)
            if (k.key() != QLatin1String("dtype") && k.key() != QLatin1String("shape") && k.key() != QLatin1String("data_offsets"))
                throw InvalidInputError(where, tensor + " has the key '" + k.key().toStdString() + "'; a tensor has only dtype, shape and data_offsets");
        SafetensorEntry e;
        e.name = name;
        e.dtype = t.value(QStringLiteral("dtype")).toString().toStdString();
        int64_t needBytes = SafetensorsFolder::dtypeSize(e.dtype);
        if (needBytes == 0)
            throw InvalidInputError(where, tensor + " has dtype '" + e.dtype + "', not one of F64, F32, BF16, F16, I64, I32, I16, I8, U8, BOOL");
        const QJsonValue shape = t.value(QStringLiteral("shape"));
        if (!shape.isArray())
            throw InvalidInputError(where, tensor + ": shape must be an array of dimensions");
        bool fits = true; // the size checked as it grows: a product that wraps could match a small range
        for (const auto &d : shape.toArray()) {
            e.shape.push_back(wholeNumber(d));
            if (e.shape.back() < 0)
                throw InvalidInputError(where, tensor + ": shape must hold whole numbers of at least 0");
            fits = fits && !__builtin_mul_overflow(needBytes, e.shape.back(), &needBytes);
        }
        const QJsonValue offsets = t.value(QStringLiteral("data_offsets"));
        if (!offsets.isArray() || offsets.toArray().size() != 2)
            throw InvalidInputError(where, tensor + ": data_offsets must be [begin, end]");
        e.begin = wholeNumber(offsets.toArray().at(0));
        e.end = wholeNumber(offsets.toArray().at(1));
        if (e.begin < 0 || e.end < e.begin)
            throw InvalidInputError(where, tensor + ": data_offsets must be whole numbers, begin <= end");
        if (e.end > dataBytes)
            throw InvalidInputError(where, tensor + " lies outside the file (ends at " + std::to_string(e.end) + " of " + std::to_string(dataBytes) + " data bytes)");
        if (!fits || e.end - e.begin != needBytes)
            throw InvalidInputError(where, tensor + " has " + std::to_string(e.end - e.begin) + " bytes, its dtype and shape need " +
                                               (fits ? std::to_string(needBytes) : std::string("more than the file holds")));
        out.entries.push_back(std::move(e));
    }
    // The data is the tensors one after another, covering it exactly: no overlap (two names on the
    // same bytes), no hole and nothing after the last (bytes no tensor accounts for).
    std::sort(out.entries.begin(), out.entries.end(),
              [](const SafetensorEntry &a, const SafetensorEntry &b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    int64_t next = 0;
    const SafetensorEntry *previous = nullptr;
    for (const SafetensorEntry &e : out.entries) {
        if (e.begin < next)
            throw InvalidInputError(where, "tensor '" + e.name + "' overlaps tensor '" + previous->name + "' (it begins at byte " + std::to_string(e.begin) + ", '" +
                                               previous->name + "' ends at " + std::to_string(next) + ")");
        if (e.begin > next)
            throw InvalidInputError(where, std::to_string(e.begin - next) + " bytes before tensor '" + e.name + "' belong to no tensor (the data must be contiguous)");
        next = e.end;
        previous = &e;
    }
    if (next != dataBytes)
        throw InvalidInputError(where, std::to_string(dataBytes - next) + " bytes after " + (previous ? "the last tensor '" + previous->name + "'" : std::string("the header")) +
                                           " belong to no tensor (the data must end with the last tensor)");
    return out;
}

SafetensorsFolder::SafetensorsFolder(const QString &path) : m_path(path)
{
    const QDir dir(path);
    const QStringList files = dir.entryList({QStringLiteral("*.safetensors")}, QDir::Files, QDir::Name);
    if (!dir.exists() || files.isEmpty())
        throw InvalidInputError("model.weights_path", "'" + path.toStdString() + "' holds no .safetensors file");
    for (const QString &name : files) {
        const QString filePath = dir.filePath(name);
        const std::string where = filePath.toStdString();
        auto file = std::make_unique<QFile>(filePath);
        if (!file->open(QIODevice::ReadOnly))
            throw InvalidInputError(where, "cannot be read: " + file->errorString().toStdString());
        const int64_t size = file->size();
        const int64_t headerLength = safetensorsHeaderLength(file->read(8), size, where);
        const int64_t dataStart = 8 + headerLength;
        for (SafetensorEntry &e : parseSafetensorsHeader(file->read(headerLength), size - dataStart, where)) {
            e.file = filePath;
            m_entries[e.name] = e;
        }
        const uchar *mapped = file->map(0, size);
        if (!mapped)
            throw InvalidInputError(where, "cannot be memory-mapped");
        m_maps[filePath] = {mapped + dataStart, dataStart};
        m_files[filePath] = std::move(file);
    }
}

const SafetensorEntry *SafetensorsFolder::find(const std::string &name) const
{
    const auto it = m_entries.find(name);
    return it == m_entries.end() ? nullptr : &it->second;
}

const uchar *SafetensorsFolder::data(const SafetensorEntry &entry) { return m_maps.at(entry.file).first + entry.begin; }

} // namespace pb
