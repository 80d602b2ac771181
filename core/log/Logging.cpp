#include "log/Logging.h"

#include "util/AppPaths.h"

#include <QString>
#include <QtGlobal>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

namespace pb {
namespace {

std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> &ringSink()
{
    static auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(500);
    return sink;
}

void qtMessageToSpdlog(QtMsgType type, const QMessageLogContext &, const QString &message)
{
    const std::string text = message.toStdString();
    switch (type) {
    case QtDebugMsg: spdlog::debug("[qt] {}", text); break;
    case QtInfoMsg: spdlog::info("[qt] {}", text); break;
    case QtWarningMsg: spdlog::warn("[qt] {}", text); break;
    case QtCriticalMsg: spdlog::error("[qt] {}", text); break;
    case QtFatalMsg: spdlog::critical("[qt] {}", text); spdlog::default_logger()->flush(); std::abort();
    }
}

} // namespace

bool setLogLevel(const std::string &level)
{
    const auto parsed = spdlog::level::from_str(level);
    // from_str maps unknown names to `off`; only accept `off` when it was asked for.
    if (parsed == spdlog::level::off && level != "off")
        return false;
    spdlog::set_level(parsed);
    return true;
}

std::string logFilePath(const LoggingOptions &options)
{
    const QString path = options.filePath.empty() ? defaultLogPath() : QString::fromStdString(options.filePath);
    if (options.rank < 0)
        return path.toStdString();
    const QString rank = QStringLiteral(".rank%1").arg(options.rank);
    // Before the extension of the file name (not of a folder on the way to it).
    const qsizetype slash = path.lastIndexOf(QLatin1Char('/'));
    const qsizetype dot = path.lastIndexOf(QLatin1Char('.'));
    return (dot > slash + 1 ? QString(path).insert(dot, rank) : path + rank).toStdString();
}

bool initLogging(const LoggingOptions &options)
{
    std::vector<spdlog::sink_ptr> sinks;
    std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> console;
    if (options.console) {
        console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        sinks.push_back(console);
    }
    try {
        const std::string path = logFilePath(options);
        sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(path, 5 * 1024 * 1024, 3));
    } catch (const spdlog::spdlog_ex &e) {
        std::fprintf(stderr, "pilotbench: cannot open the log file: %s\n", e.what());
    }
    sinks.push_back(ringSink());
    auto logger = std::make_shared<spdlog::logger>(options.appName, sinks.begin(), sinks.end());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e [%l] [%t] %v");
    // Terminals and the GUI panel get short lines; the file keeps dates and thread ids.
    if (console)
        console->set_pattern("%^[%l]%$ %v");
    ringSink()->set_pattern("%H:%M:%S.%e %l %v");
    spdlog::set_default_logger(logger);
    spdlog::flush_on(spdlog::level::warn);
    spdlog::flush_every(std::chrono::seconds(2));
    qInstallMessageHandler(qtMessageToSpdlog);
    if (!setLogLevel(options.level)) {
        spdlog::set_level(spdlog::level::info);
        spdlog::error("unknown --log-level '{}' (use trace, debug, info, warn, error, critical or off)", options.level);
        return false;
    }
    return true;
}

std::vector<std::string> recentLogLines(size_t maxLines) { return ringSink()->last_formatted(maxLines); }

} // namespace pb
