#pragma once
// Job and rental-window hours as the Compare tab and its chart show them: in the unit that reads.
#include <QString>

namespace pb::ui {

inline QString hoursText(double hours)
{
    const double seconds = hours * 3600;
    if (seconds < 1)
        return QString::number(seconds * 1000, 'f', 1) + QStringLiteral(" ms");
    if (seconds < 120)
        return QString::number(seconds, 'f', 1) + QStringLiteral(" s");
    if (seconds < 7200)
        return QString::number(seconds / 60, 'f', 1) + QStringLiteral(" min");
    return QString::number(hours, 'f', 1) + QStringLiteral(" h");
}

} // namespace pb::ui
