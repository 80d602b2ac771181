#include "util/Units.h"

#include <QLocale>

namespace pb {

QString formatBytes(int64_t bytes, int precision)
{
    return QLocale::c().formattedDataSize(static_cast<qint64>(bytes), precision, QLocale::DataSizeIecFormat);
}

QString formatDuration(double seconds)
{
    const QLocale c = QLocale::c();
    if (seconds < 1e-3)
        return c.toString(seconds * 1e6, 'f', 2) + QStringLiteral(" \u00b5s");
    if (seconds < 1)
        return c.toString(seconds * 1e3, 'f', 1) + QStringLiteral(" ms");
    if (seconds < 120)
        return c.toString(seconds, 'f', 1) + QStringLiteral(" s");
    if (seconds < 7200)
        return c.toString(seconds / 60, 'f', 1) + QStringLiteral(" min");
    if (seconds < 72 * 3600)
        return c.toString(seconds / 3600, 'f', 1) + QStringLiteral(" h");
    return c.toString(seconds / 86400, 'f', 1) + QStringLiteral(" days");
}

} // namespace pb
