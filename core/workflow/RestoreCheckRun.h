#pragma once
// The restoration proof as a recorded run, the one way both front ends take it: a run of kind
// "restore-check" begun before the proof, ended with its verdict and the proof's JSON; an error
// during the proof is recorded as failed (or cancelled) and then propagates.
#include "workflow/RestoreCheck.h"

#include <QJsonObject>
#include <QString>

#include <cstdint>

namespace pb {

struct RecordedRestoreCheck {
    int64_t runId = 0;
    RestoreCheckResult result;
    QJsonObject json;                    // toJson(result) plus run_id
};

// Throws InvalidInputError for bad input (nothing recorded when the database cannot be opened).
RecordedRestoreCheck runRecordedRestoreCheck(const RunConfig &config, const RestoreCheckOptions &options, const QString &databasePath);

} // namespace pb
