#pragma once
// The staged pilot's checklist and its rules: memory budget (a fitting pilot), one scaling step,
// the restoration proof and the recorded term decision. Each stage passes on its best evidence (the
// newest passing run of exactly the config in question); the GUI's checklist and `pilotbench-cli checklist` both
// evaluate it here.
#include <QString>
#include <QStringList>

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;
class Catalog;

// Stale: a recorded decision whose catalog or evidence changed since (not a pass).
enum class StageState { Missing, Failed, Passed, Stale };
const char *toString(StageState state); // "missing", "failed", "passed", "stale"

struct StageSpec {
    const char *title;                   // untranslated; context "Checklist"
    const char *rule;
    QStringList kinds;                   // run kinds that are evidence for it
};

struct StageStatus {
    StageState state = StageState::Missing;
    int64_t runId = 0;
    QString evidence;                    // one line a person reads
};

constexpr int kChecklistStages = 4;
const std::vector<StageSpec> &checklistStages();

// `model`: runs recorded under it ("" any model); `configHash`: only runs of this config count
// ("" any config of the model). A stage passes on its newest passing run (later runs that did not
// pass are listed, not counted against it); the decision stage is Stale when `catalog` (the one in
// force) or the evidence changed since it was recorded. Throws what the store throws.
StageStatus evaluateStage(const HistoryStore &store, int index, const QString &model, const std::string &configHash, const Catalog *catalog = nullptr);
std::vector<StageStatus> evaluateChecklist(const HistoryStore &store, const QString &model, const std::string &configHash, const Catalog *catalog = nullptr);

} // namespace pb
