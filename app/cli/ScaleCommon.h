#pragma once
// Shared by `scale` and `scale-worker`.
#include <QCommandLineParser>

namespace pb::cli {

// An integer option >= minimum; throws InvalidInputError("--name") otherwise.
int scaleIntOption(const QCommandLineParser &parser, const QString &name, int minimum);

} // namespace pb::cli
