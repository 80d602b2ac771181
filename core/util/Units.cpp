#include "util/Units.h"

#include <QLocale>

namespace pb {

QString formatBytes(int64_t bytes, int precision)
{
    return QLocale::c().formattedDataSize(static_cast<qint64>(bytes), precision, QLocale::DataSizeIecFormat);
}

} // namespace pb
