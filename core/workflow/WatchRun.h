#pragma once
// A watched command as evidence, the way both front ends record it: a run of kind "watch" in the
// history with the command, its samples (rank 0's steps), validations and checkpoint writes, the
// devices it ran on matched against the catalog, and, when a run config is given, the estimator's
// prediction and the model FLOPs beside what was measured. The command's log stays in its run folder.
#include "config/RunConfig.h"
#include "watch/WatchedCommand.h"

#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <functional>
#include <optional>

namespace pb {

struct WatchRunRequest {
    watch::WatchOptions options;         // options.runDir "": a fresh folder under the data folder
    std::optional<RunConfig> config;     // the job's definition, when the user gives one
    QString database;
    // Told the run's history id once it is begun, before the command starts, so a front end can
    // name the run in every event it shows.
    std::function<void(int64_t runId)> runBegun;
};

struct RecordedWatch {
    int64_t runId = 0;
    watch::WatchResult result;
    QJsonObject json;                    // the stored summary, plus run_id
};

// Throws InvalidInputError before anything is recorded (a missing program, a bad --env); afterwards
// every outcome is a verdict in the result and in the history.
RecordedWatch runRecordedWatch(WatchRunRequest request, watch::WatchObserver &observer);

// The probe module's folder: beside the installed program (share/pilotbench/python), else the
// source tree's resources/python; "" when neither exists.
QString probeModuleDir();

} // namespace pb
