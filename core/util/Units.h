#pragma once
// Byte sizes as people read them, written one way everywhere (CLI, GUI, report, messages). JSON
// keeps the integer bytes; this is only for text.
#include <QString>

#include <cstdint>

namespace pb {

// "512 bytes", "1.50 KiB", "5.84 MiB", "80.0 GiB" (precision 1): powers of 1024 with IEC names,
// `precision` decimals once a unit applies. Digits in the C locale, so the CLI's output, logs and
// the report read the same on every machine (no group separators, '.' as the decimal point).
QString formatBytes(int64_t bytes, int precision = 2);

} // namespace pb
