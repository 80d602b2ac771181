// pilotbench-cli: the headless workbench. `pilotbench-cli COMMAND --help` for each command.
#include "app/cli/CliCommand.h"
#include "app/cli/PilotPrinter.h"
#include "log/Logging.h"
#include "engine/Environment.h"
#include "BuildInfo.h"
#include "util/Errors.h"

#include <QCoreApplication>
#include <QGuiApplication>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace pb::cli {
std::vector<CliCommand> &commands()
{
    static std::vector<CliCommand> all;
    return all;
}
} // namespace pb::cli

namespace {

void printHelp(QTextStream &out)
{
    out << "pilotbench-cli " << PILOTBENCH_VERSION << " - staged GPU pilots for fine-tuning runs\n\n"
        << "Usage: pilotbench-cli [--log-level LEVEL] COMMAND [OPTIONS]\n"
        << "       pilotbench-cli --version | --help\n\nCommands:\n";
    auto sorted = pb::cli::commands();
    std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) { return a.name < b.name; });
    for (const auto &c : sorted)
        out << "  " << c.name.leftJustified(16) << c.summary << '\n';
    out << "\nRun 'pilotbench-cli COMMAND --help' for a command's options.\n"
        << "Exit codes: 0 done (fits), 1 failure, 2 invalid input, 3 does not fit, 4 cancelled.\n";
}

// The command's name as argv holds it ("" when there is none).
const char *commandName(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--log-level") == 0) {
            ++i;
            continue;
        }
        if (argv[i][0] != '-')
            return argv[i];
    }
    return "";
}

// Only `report` and `export` paint (QPdfWriter needs a QGuiApplication); every other command stays headless.
bool commandNeedsGui(int argc, char **argv)
{
    const char *name = commandName(argc, argv);
    return std::strcmp(name, "report") == 0 || std::strcmp(name, "export") == 0;
}

// A scale-worker is one of several processes running at once (one per rank, under `scale`,
// torchrun or srun); its rank, from the launcher's RANK, gives it a log file of its own.
int workerRank(const QStringList &args)
{
    if (args.isEmpty() || args.first() != QLatin1String("scale-worker"))
        return -1;
    bool ok = false;
    const int rank = qEnvironmentVariableIntValue("RANK", &ok);
    return ok && rank >= 0 ? rank : -1;
}

std::unique_ptr<QCoreApplication> makeApplication(int &argc, char **argv)
{
    if (!commandNeedsGui(argc, argv))
        return std::make_unique<QCoreApplication>(argc, argv);
    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    return std::make_unique<QGuiApplication>(argc, argv);
}

// A run command's signal handler goes in before anything else runs: from the executable's
// .preinit_array, which the dynamic linker calls before any shared library's initialisers
// (LibTorch's operator registrations take most of the half second before main). A SIGTERM while a
// pilot starts then cancels it (exit 4) instead of killing it (143).
void installHandlersFirst(int argc, char **argv, char ** /*envp*/) { pb::cli::installEarlyInterruptHandler(commandName(argc, argv)); }
__attribute__((section(".preinit_array"), used)) void (*preinitHandlers)(int, char **, char **) = &installHandlersFirst;

} // namespace

int main(int argc, char **argv)
{
    const std::unique_ptr<QCoreApplication> application = makeApplication(argc, argv);
    QCoreApplication &app = *application;
    QCoreApplication::setOrganizationName(QStringLiteral("pilotbench"));
    QCoreApplication::setApplicationName(QStringLiteral("pilotbench"));
    QCoreApplication::setApplicationVersion(QStringLiteral(PILOTBENCH_VERSION));

    QStringList args = app.arguments().mid(1);
    std::string level = "info";
    // --log-level is global and may stand anywhere; take it out before the command sees its args.
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--log-level") && i + 1 < args.size()) {
            level = args[i + 1].toStdString();
            args.remove(i, 2);
            break;
        }
        if (args[i].startsWith(QLatin1String("--log-level="))) {
            level = args[i].mid(12).toStdString();
            args.removeAt(i);
            break;
        }
    }
    pb::LoggingOptions logOptions;
    logOptions.appName = "pilotbench-cli";
    logOptions.level = level;
    logOptions.rank = workerRank(args);
    if (!pb::initLogging(logOptions))
        return static_cast<int>(pb::ExitCode::InvalidInput);

    QTextStream out(stdout);
    QTextStream err(stderr);
    if (args.isEmpty() || args.first() == QLatin1String("--help") || args.first() == QLatin1String("-h") || args.first() == QLatin1String("help")) {
        printHelp(out);
        return args.isEmpty() ? static_cast<int>(pb::ExitCode::InvalidInput) : 0;
    }
    if (args.first() == QLatin1String("--version") || args.first() == QLatin1String("-v")) {
        out << QString::fromStdString(pb::buildInfoText()) << '\n';
        return 0;
    }
    const QString name = args.takeFirst();
    for (const auto &command : pb::cli::commands()) {
        if (command.name != name)
            continue;
        pb::cli::CliContext ctx {args, out, err, name};
        try {
            const int code = command.run(ctx);
            out.flush();
            return code;
        } catch (const pb::PilotBenchError &e) {
            out.flush();
            err << "error: " << e.what() << '\n';
            return static_cast<int>(e.code());
        } catch (const std::exception &e) {
            out.flush();
            err << "error: " << e.what() << '\n';
            spdlog::error("{} failed: {}", name.toStdString(), e.what());
            return static_cast<int>(pb::ExitCode::Failure);
        }
    }
    err << "error: unknown command '" << name << "'. Run 'pilotbench-cli --help' for the list.\n";
    return static_cast<int>(pb::ExitCode::InvalidInput);
}
