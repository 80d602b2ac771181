#pragma once
// Reading the fields of a Hugging Face config.json: each error names the file and the key, absent or
// null optional keys keep the default of the type's Transformers config class.
#include <QJsonObject>

#include <cstdint>
#include <string>

namespace pb {

std::string hfField(const std::string &where, const char *key);
int64_t requiredInt(const QJsonObject &json, const std::string &where, const char *key);
int64_t optionalInt(const QJsonObject &json, const std::string &where, const char *key, int64_t fallback);
double optionalNumber(const QJsonObject &json, const std::string &where, const char *key, double fallback);
bool optionalBool(const QJsonObject &json, const std::string &where, const char *key, bool fallback);
// Present and not null.
bool present(const QJsonObject &json, const char *key);

} // namespace pb
