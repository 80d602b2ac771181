#pragma once
// What QJsonDocument accepts but a file we read must not hold: the same key twice in one object
// (Qt keeps one of them silently, so the file does not say what it seems to say) and raw control
// characters such as NUL inside strings (RFC 8259 requires them escaped).
#include <QByteArray>

#include <string>

namespace pb {

// Throws InvalidInputError naming `where` and the line of the first such problem. Text that is not
// well-formed JSON is left to the JSON parser to report.
void checkJsonText(const QByteArray &text, const std::string &where);

} // namespace pb
