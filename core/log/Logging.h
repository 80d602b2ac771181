#pragma once
// spdlog everywhere: console (stderr) plus a rotating file in the application data folder, Qt's own
// messages redirected into it, and a ring buffer the GUI's log panel reads.
#include <string>
#include <vector>

namespace pb {

struct LoggingOptions {
    std::string appName = "pilotbench";
    std::string level = "info";      // trace, debug, info, warn, error, critical, off
    bool console = true;
    std::string filePath;            // empty: defaultLogPath()
    // A data-parallel worker's rank (-1: not a worker). spdlog's rotating file sink assumes it is
    // the file's only writer (several processes would rotate it under each other), so each rank
    // writes its own file beside the main one: pilotbench.log -> pilotbench.rank1.log.
    int rank = -1;
};

// The file initLogging writes for these options.
std::string logFilePath(const LoggingOptions &options);
// Returns false (and logs to stderr) when the level name is unknown; the default level is kept then.
bool initLogging(const LoggingOptions &options);
bool setLogLevel(const std::string &level);
// The most recent formatted log lines, oldest first.
std::vector<std::string> recentLogLines(size_t maxLines = 200);

} // namespace pb
