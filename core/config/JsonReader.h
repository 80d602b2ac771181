#pragma once
// Reads one JSON object field by field. Every error names the full field path and the expected
// type, and keys nobody asked about are refused in finish(): a typo must never be ignored silently.
#include "config/RunConfig.h"

#include <QJsonObject>
#include <QJsonValue>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pb {

// Largest integer a JSON number (an IEEE double) carries exactly: 2^53.
constexpr int64_t kMaxExactJsonInteger = int64_t(1) << 53;

std::string jsonTypeName(const QJsonValue &value);

class JsonReader final {
public:
    JsonReader(QJsonObject object, std::string path);

    void read(const char *key, int64_t &value);
    void read(const char *key, uint64_t &value);
    void read(const char *key, int &value);
    void read(const char *key, double &value);
    void read(const char *key, bool &value);
    void read(const char *key, std::string &value);
    void read(const char *key, std::vector<std::string> &value);
    void read(const char *key, std::vector<int64_t> &value);   // integers of at least 0
    void read(const char *key, std::vector<double> &value);    // finite numbers
    void read(const char *key, std::optional<double> &value);  // null or absent: unset
    // The enum's file names (toString) are the only accepted values.
    template <typename E> void readEnum(const char *key, E &value);
    // A nested object; nullopt when absent. Throws when present but not an object.
    std::optional<JsonReader> object(const char *key);
    // Throws InvalidInputError naming the first key that was never read.
    void finish() const;

    std::string fieldPath(const char *key) const;

private:
    std::optional<QJsonValue> take(const char *key);
    [[noreturn]] void typeError(const char *key, const char *expected, const QJsonValue &got) const;
    int64_t integer(const char *key, const QJsonValue &v, int64_t min) const;

    QJsonObject m_object;
    std::string m_path;
    std::set<QString> m_read;
};

[[noreturn]] void throwUnknownEnum(const std::string &field, const std::string &got, const std::vector<std::string> &known);

template <typename E> void JsonReader::readEnum(const char *key, E &value)
{
    std::string text = toString(value);
    read(key, text);
    if (const auto parsed = parseEnum<E>(text)) {
        value = *parsed;
        return;
    }
    // The enums are contiguous from 0; toString answers "?" past the last one.
    std::vector<std::string> known;
    for (int i = 0; i < 64 && std::string(toString(static_cast<E>(i))) != "?"; ++i)
        known.emplace_back(toString(static_cast<E>(i)));
    throwUnknownEnum(fieldPath(key), text, known);
}

} // namespace pb
