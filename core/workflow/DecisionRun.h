#pragma once
// The term decision as the workflow takes it, for the CLI, the Compare tab and the report alike:
// the evidence from the history (a named pilot or the newest pilot of the config, its scaling
// steps), the comparison over the catalog in force, and the decision recorded as a run of kind
// "decision" so the checklist's fourth stage and the report can show it.
#include "catalog/Catalog.h"
#include "config/RunConfig.h"
#include "workflow/Decision.h"

#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;

// The pilot a decision rests on: `pilotRunId` when given (InvalidInputError "--run" when it is not a
// finished pilot in `store`), else the newest finished pilot of the config; nullopt when none.
std::optional<PilotEvidence> findPilotEvidence(const HistoryStore &store, const RunConfig &config, const Catalog &catalog,
                                               std::optional<int64_t> pilotRunId = std::nullopt);
// The same from a database path; a path that does not exist yet means no evidence (unless a run
// is named, which is then an InvalidInputError).
std::optional<PilotEvidence> findPilotEvidence(const QString &historyPath, const RunConfig &config, const Catalog &catalog,
                                               std::optional<int64_t> pilotRunId = std::nullopt);

// Evidence then comparison, in one call.
Comparison decide(const RunConfig &config, const Catalog &catalog, const ComparisonRequest &request, const QString &historyPath,
                  std::optional<int64_t> pilotRunId = std::nullopt);

// What a recorded decision says: the chosen row's card, count, strategy, term and billing, the
// options, total cost and cost per million useful tokens, the planned checkpoint's size and the
// measured rates its window hours rest on, the catalog and the evidence runs.
QJsonObject decisionJson(const Comparison &comparison, int rowIndex, const QJsonObject &evidence);

// Records row `rowIndex` (-1: the recommended row) as a finished run of kind "decision" for the
// config, with the pilot, scaling and restore-check runs it used and the catalog revision it was
// made on; earlier decisions of the config are tagged "superseded" (kept in the history). Throws
// InvalidInputError ("decision") when the row does not exist or does not fit. Returns the run id.
int64_t recordDecision(const QString &historyPath, const RunConfig &config, const Comparison &comparison, int rowIndex = -1);

// Why a recorded decision no longer holds, its reasons joined by "; ": the catalog in force is not
// the one it was made on, or a newer pilot of its config has measured since. Empty: still current.
std::string decisionStaleness(const HistoryStore &store, const RunRecord &decision, const Catalog &catalog);

// The newest decision of the config that was not superseded; nullopt when none.
std::optional<RunRecord> currentDecision(const HistoryStore &store, const std::string &configHash);

} // namespace pb
