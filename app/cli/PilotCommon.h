#pragma once
// Shared by the commands that run pilots (pilot, restore-check, scale): the common options and
// the device's peak FLOP/s from the catalog (for MFU).
#include "engine/PilotEngine.h"

#include <QCommandLineParser>

namespace pb::cli {

void addPilotOptions(QCommandLineParser &parser);
// Reads --device, --steps, --warmup, --memory-limit, --threads, --checkpoint-dir.
PilotOptions pilotOptionsFrom(const QCommandLineParser &parser);
QString databaseFrom(const QCommandLineParser &parser);

} // namespace pb::cli
