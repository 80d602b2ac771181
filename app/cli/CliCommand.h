#pragma once
// A CLI command is a name, a one-line summary and a function over its own arguments. Each command
// file registers itself with a static CliRegistration, so adding one touches no shared file.
#include <QString>
#include <QStringList>
#include <QTextStream>

#include <functional>
#include <vector>

namespace pb::cli {

struct CliContext {
    QStringList args;            // arguments after the command name
    QTextStream &out;            // stdout: results (JSON or human text)
    QTextStream &err;            // stderr: errors
    QString command;             // as typed, with the subcommand once one is taken: "config show"
};

struct CliCommand {
    QString name;                // e.g. "config", "history", "pilot"
    QString summary;
    std::function<int(CliContext &)> run; // returns an ExitCode value
};

std::vector<CliCommand> &commands();

struct CliRegistration {
    explicit CliRegistration(CliCommand command) { commands().push_back(std::move(command)); }
};

} // namespace pb::cli
