#pragma once
#include <QString>

namespace pb {

// The application data folder (QStandardPaths::AppDataLocation), created on first use.
QString appDataDir();
// The embedded default history database inside appDataDir().
QString defaultDatabasePath();
// The rotating log file inside appDataDir().
QString defaultLogPath();

} // namespace pb
