#pragma once
#include <QString>

namespace pb {

// The application data folder, $XDG_DATA_HOME/pilotbench (~/.local/share/pilotbench), created on
// first use. Not QStandardPaths::AppDataLocation: that is <organisation>/<application>, and both
// are "pilotbench", which made ~/.local/share/pilotbench/pilotbench.
QString appDataDir();
// The configuration folder, $XDG_CONFIG_HOME/pilotbench (~/.config/pilotbench), not created here.
QString appConfigDir();
// Where versions before these two kept their folders: appDataDir() + "/pilotbench" and
// appConfigDir() + "/pilotbench".
QString legacyAppDataDir();
QString legacyAppConfigDir();
// The embedded default history database inside appDataDir(). A history left in legacyAppDataDir()
// (history.sqlite with its -wal, -shm or -journal) is moved here, once, when there is none here
// yet; one here is never overwritten. Should the move fail, the legacy one is returned.
QString defaultDatabasePath();
// The rotating log file inside appDataDir().
QString defaultLogPath();

} // namespace pb
