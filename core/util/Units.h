#pragma once
// Byte sizes and durations as people read them, written one way everywhere (CLI, GUI, report,
// messages). JSON keeps the numbers; this is only for text.
#include <QString>

#include <cstdint>

namespace pb {

// "512 bytes", "1.50 KiB", "5.84 MiB", "80.0 GiB" (precision 1): powers of 1024 with IEC names,
// `precision` decimals once a unit applies. Digits in the C locale, so the CLI's output, logs and
// the report read the same on every machine (no group separators, '.' as the decimal point).
QString formatBytes(int64_t bytes, int precision = 2);

// A duration in the unit that reads, one decimal: "7.74 µs" (two below a millisecond), "30.2 ms",
// "12.5 s", "4.2 min", "10.5 h", "3.2 days" (from 72 h). A job of seconds is never "0.0 h".
QString formatDuration(double seconds);

} // namespace pb
