#pragma once
// Helpers shared by the CLI commands: option parsing that reports bad input with exit code 2, and
// loading the config named by --config / an argument with its --set overrides.
#include "app/cli/CliCommand.h"
#include "config/RunConfig.h"

#include <QCommandLineParser>
#include <QJsonObject>

#include <cstdint>
#include <limits>

namespace pb::cli {

// Parses ctx.args. On an error prints it to ctx.err and returns false; on -h, --help or
// --help-all prints the help, whose usage line names ctx.command, and returns false with
// parser.isSet("help") true.
bool parseArgs(QCommandLineParser &parser, CliContext &ctx, const QString &usage);
// Loads `spec` (file or preset:NAME) with every --set PATH=VALUE of the parser (option "set").
RunConfig loadConfigArg(const QCommandLineParser &parser, const QString &spec);
void printJson(CliContext &ctx, const QJsonObject &object, bool compact = false);
// Parses sizes like "512M", "2GiB", "1.5GB", "1000000" into bytes, as coreutils does: K, M, G, T
// and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000; case does not matter.
// Throws InvalidInputError naming `option`.
int64_t parseByteSize(const QString &text, const QString &option);
// An integer option >= minimum (and <= maximum, the type's range); throws InvalidInputError("--name")
// naming the lower bound otherwise.
int64_t int64OptionAtLeast(const QCommandLineParser &parser, const QString &name, int64_t minimum,
                           int64_t maximum = std::numeric_limits<int64_t>::max());
int intOptionAtLeast(const QCommandLineParser &parser, const QString &name, int minimum);

} // namespace pb::cli
