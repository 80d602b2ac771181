// pilotbench: the desktop workbench.
#include "BuildInfo.h"
#include "MainWindow.h"
#include "log/Logging.h"
#include "util/AppPaths.h"

#include <QApplication>
#include <QCommandLineParser>
#include <spdlog/spdlog.h>

int main(int argc, char **argv)
{
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("pilotbench"));
    QApplication::setApplicationName(QStringLiteral("pilotbench"));
    QApplication::setApplicationVersion(QStringLiteral(PILOTBENCH_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("io.pilotbench.PilotBench"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("PilotBench: staged GPU pilots for fine-tuning runs"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOption({QStringLiteral("log-level"), QStringLiteral("trace, debug, info, warn, error, critical or off."), QStringLiteral("level"), QStringLiteral("info")});
    parser.addOption({QStringLiteral("db"), QStringLiteral("History database (default: the application data folder)."), QStringLiteral("file")});
    parser.process(app);

    pb::LoggingOptions logOptions;
    logOptions.level = parser.value(QStringLiteral("log-level")).toStdString();
    if (!pb::initLogging(logOptions))
        return 2;
    spdlog::info("pilotbench {} starting", PILOTBENCH_VERSION);

    const QString database = parser.isSet(QStringLiteral("db")) ? parser.value(QStringLiteral("db")) : pb::defaultDatabasePath();
    pb::ui::MainWindow window(database);
    window.show();
    return app.exec();
}
