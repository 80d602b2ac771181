#pragma once
// Helpers shared by the CLI commands: option parsing that reports bad input with exit code 2, and
// loading the config named by --config / an argument with its --set overrides.
#include "app/cli/CliCommand.h"
#include "config/RunConfig.h"

#include <QCommandLineParser>
#include <QJsonObject>

namespace pb::cli {

// Parses ctx.args ("prog" is prepended). On error prints it to ctx.err and returns false.
bool parseArgs(QCommandLineParser &parser, CliContext &ctx, const QString &usage);
// Loads `spec` (file or preset:NAME) with every --set PATH=VALUE of the parser (option "set").
RunConfig loadConfigArg(const QCommandLineParser &parser, const QString &spec);
void printJson(CliContext &ctx, const QJsonObject &object, bool compact = false);
// Parses sizes like "512M", "2GiB", "1.5G", "1000000" into bytes; throws InvalidInputError naming `option`.
int64_t parseByteSize(const QString &text, const QString &option);

} // namespace pb::cli
