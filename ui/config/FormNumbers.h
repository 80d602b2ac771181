#pragma once
// How the run-config form reads and writes a number typed in a line edit (the job's sizes, the
// traits' scales): "1e13" as readily as the digits, no clamping or rounding, so a value from a file
// comes back unchanged.
#include <QLocale>
#include <QString>

#include <cmath>
#include <optional>

namespace pb::ui {

inline std::optional<double> parseNumber(QString text)
{
    text.remove(QLatin1Char('_')).remove(QLatin1Char(' '));
    bool ok = false;
    const double v = QLocale::c().toDouble(text, &ok);
    return ok ? std::optional<double>(v) : std::nullopt;
}

// Shortest text that reads back as the same double; digits rather than an exponent where that
// stays short, since token counts are read digit by digit.
inline QString formatNumber(double v)
{
    const double a = std::fabs(v);
    const char format = a == 0 || (a >= 1e-4 && a < 1e16) ? 'f' : 'g';
    return QString::number(v, format, QLocale::FloatingPointShortest);
}

} // namespace pb::ui
