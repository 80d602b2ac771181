#pragma once
// Shared by `scale` and `scale-worker`.
#include <QCommandLineParser>

namespace pb::cli {

// Set by `scale` in its workers' environment: a worker with it dies with its launcher.
inline constexpr const char *kScaleLauncherPidVariable = "PB_SCALE_LAUNCHER_PID";

// An integer option >= minimum; throws InvalidInputError("--name") otherwise.
int scaleIntOption(const QCommandLineParser &parser, const QString &name, int minimum);

} // namespace pb::cli
