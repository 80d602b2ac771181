#include "util/AppPaths.h"

#include <QDir>
#include <QStandardPaths>

namespace pb {

QString appDataDir()
{
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty())
        dir = QDir::homePath() + QStringLiteral("/.local/share/pilotbench");
    QDir().mkpath(dir);
    return dir;
}

QString defaultDatabasePath() { return appDataDir() + QStringLiteral("/history.sqlite"); }

QString defaultLogPath() { return appDataDir() + QStringLiteral("/pilotbench.log"); }

} // namespace pb
