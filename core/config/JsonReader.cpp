#include "config/JsonReader.h"

#include "util/Errors.h"

#include <QJsonArray>

#include <cmath>

namespace pb {

std::string jsonTypeName(const QJsonValue &value)
{
    switch (value.type()) {
    case QJsonValue::Null: return "null";
    case QJsonValue::Bool: return value.toBool() ? "true" : "false";
    case QJsonValue::Double: return "the number " + QString::number(value.toDouble(), 'g', 17).toStdString();
    case QJsonValue::String: return "the string \"" + value.toString().left(60).toStdString() + "\"";
    case QJsonValue::Array: return "an array";
    case QJsonValue::Object: return "an object";
    case QJsonValue::Undefined: break;
    }
    return "nothing";
}

void throwUnknownEnum(const std::string &field, const std::string &got, const std::vector<std::string> &known)
{
    std::string list;
    for (const auto &k : known)
        list += (list.empty() ? "" : ", ") + k;
    throw InvalidInputError(field, "unknown value '" + got + "' (expected one of: " + list + ")");
}

JsonReader::JsonReader(QJsonObject object, std::string path) : m_object(std::move(object)), m_path(std::move(path)) {}

std::string JsonReader::fieldPath(const char *key) const
{
    return m_path.empty() ? std::string(key) : m_path + "." + key;
}

std::optional<QJsonValue> JsonReader::take(const char *key)
{
    const QString k = QString::fromLatin1(key);
    m_read.insert(k);
    const auto it = m_object.constFind(k);
    if (it == m_object.constEnd())
        return std::nullopt;
    return it.value();
}

void JsonReader::typeError(const char *key, const char *expected, const QJsonValue &got) const
{
    throw InvalidInputError(fieldPath(key), std::string("expected ") + expected + ", got " + jsonTypeName(got));
}

int64_t JsonReader::integer(const char *key, const QJsonValue &v, int64_t min) const
{
    if (!v.isDouble())
        typeError(key, "an integer", v);
    const double d = v.toDouble();
    if (!std::isfinite(d) || std::floor(d) != d)
        typeError(key, "an integer", v);
    if (std::fabs(d) > static_cast<double>(kMaxExactJsonInteger))
        throw InvalidInputError(fieldPath(key), "value " + QString::number(d, 'g', 17).toStdString() + " is too large (integers must lie within +/-2^53)");
    const auto i = static_cast<int64_t>(d);
    if (i < min)
        throw InvalidInputError(fieldPath(key), "must be at least " + std::to_string(min) + ", got " + std::to_string(i));
    return i;
}

void JsonReader::read(const char *key, int64_t &value)
{
    if (const auto v = take(key))
        value = integer(key, *v, -kMaxExactJsonInteger);
}

void JsonReader::read(const char *key, uint64_t &value)
{
    if (const auto v = take(key))
        value = static_cast<uint64_t>(integer(key, *v, 0));
}

void JsonReader::read(const char *key, int &value)
{
    if (const auto v = take(key)) {
        const int64_t i = integer(key, *v, -kMaxExactJsonInteger);
        if (i < INT32_MIN || i > INT32_MAX)
            throw InvalidInputError(fieldPath(key), "value " + std::to_string(i) + " is out of range");
        value = static_cast<int>(i);
    }
}

void JsonReader::read(const char *key, double &value)
{
    if (const auto v = take(key)) {
        if (!v->isDouble() || !std::isfinite(v->toDouble()))
            typeError(key, "a number", *v);
        value = v->toDouble();
    }
}

void JsonReader::read(const char *key, std::optional<double> &value)
{
    if (const auto v = take(key)) {
        if (v->isNull()) {
            value.reset();
            return;
        }
        if (!v->isDouble() || !std::isfinite(v->toDouble()))
            typeError(key, "a number or null", *v);
        value = v->toDouble();
    }
}

void JsonReader::read(const char *key, bool &value)
{
    if (const auto v = take(key)) {
        if (!v->isBool())
            typeError(key, "true or false", *v);
        value = v->toBool();
    }
}

void JsonReader::read(const char *key, std::string &value)
{
    if (const auto v = take(key)) {
        if (!v->isString())
            typeError(key, "a string", *v);
        value = v->toString().toStdString();
    }
}

void JsonReader::read(const char *key, std::vector<std::string> &value)
{
    if (const auto v = take(key)) {
        if (!v->isArray())
            typeError(key, "an array of strings", *v);
        std::vector<std::string> out;
        const QJsonArray array = v->toArray();
        for (qsizetype i = 0; i < array.size(); ++i) {
            if (!array[i].isString())
                throw InvalidInputError(fieldPath(key) + "[" + std::to_string(i) + "]", "expected a string, got " + jsonTypeName(array[i]));
            out.push_back(array[i].toString().toStdString());
        }
        value = std::move(out);
    }
}

void JsonReader::read(const char *key, std::vector<int64_t> &value)
{
    if (const auto v = take(key)) {
        if (!v->isArray())
            typeError(key, "an array of integers", *v);
        std::vector<int64_t> out;
        const QJsonArray array = v->toArray();
        for (qsizetype i = 0; i < array.size(); ++i) {
            const std::string item = std::string(key) + "[" + std::to_string(i) + "]";
            out.push_back(integer(item.c_str(), array[i], 0));
        }
        value = std::move(out);
    }
}

void JsonReader::read(const char *key, std::vector<double> &value)
{
    if (const auto v = take(key)) {
        if (!v->isArray())
            typeError(key, "an array of numbers", *v);
        std::vector<double> out;
        const QJsonArray array = v->toArray();
        for (qsizetype i = 0; i < array.size(); ++i) {
            const std::string item = std::string(key) + "[" + std::to_string(i) + "]";
            if (!array[i].isDouble() || !std::isfinite(array[i].toDouble()))
                typeError(item.c_str(), "a number", array[i]);
            out.push_back(array[i].toDouble());
        }
        value = std::move(out);
    }
}

std::optional<JsonReader> JsonReader::object(const char *key)
{
    const auto v = take(key);
    if (!v)
        return std::nullopt;
    if (!v->isObject())
        typeError(key, "an object", *v);
    return JsonReader(v->toObject(), fieldPath(key));
}

void JsonReader::finish() const
{
    std::vector<std::string> unknown;
    for (auto it = m_object.constBegin(); it != m_object.constEnd(); ++it)
        if (m_read.count(it.key()) == 0)
            unknown.push_back(it.key().toStdString());
    if (unknown.empty())
        return;
    std::string known;
    for (const auto &k : m_read)
        known += (known.empty() ? "" : ", ") + k.toStdString();
    std::string message = "unknown key";
    if (unknown.size() > 1) {
        message = "unknown keys ";
        for (size_t i = 0; i < unknown.size(); ++i)
            message += (i ? ", " : "") + fieldPath(unknown[i].c_str());
    }
    throw InvalidInputError(fieldPath(unknown.front().c_str()), message + " (known here: " + known + ")");
}

} // namespace pb
