#include "model/Safetensors.h"

#include "util/Errors.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

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
