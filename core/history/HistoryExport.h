#pragma once
// Moving runs between machines: a pilot run headless on a rented server is exported there and imported
// at home. JSON holds everything (run row, samples column by column, phases, validation, checkpoint
// writes); CSV holds the samples only, one line per step, for spreadsheets and plotting tools.
#include "history/HistoryTypes.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

namespace pb {

class HistoryStore;

constexpr int kHistoryExportFormatVersion = 1;

// {"format": "pilotbench-history-export", "format_version": 1, "exported_at", "host", "runs": [...]}.
// Throws InvalidInputError for an unknown run id.
QJsonObject exportRunsJson(const HistoryStore &store, const std::vector<int64_t> &runIds);
// One run with its phases, validations, checkpoints and (optionally) samples: an export's entry and
// what `history show --json` prints.
QJsonObject runJson(const HistoryStore &store, int64_t runId, bool withSamples);
// Both write atomically (QSaveFile) and throw PilotBenchError naming the file on I/O failure.
void writeRunsJson(const HistoryStore &store, const std::vector<int64_t> &runIds, const QString &file);
// Header "run_id,step,phase,step_time_ms,..."; numbers in the shortest form that reads back exactly.
void writeSamplesCsv(const HistoryStore &store, const std::vector<int64_t> &runIds, const QString &file);

struct ImportResult {
    std::vector<int64_t> importedRunIds;   // new local ids, in file order
    QStringList skipped;                   // one message per run already present (same uuid)
};

// One run as an export holds it, read but not yet stored.
struct ExportedRun {
    RunRecord run;                         // id 0; originHost and originRunId already set
    int64_t exportedId = -1;               // its id in the export (-1 when absent)
    std::vector<StepSample> samples;
    std::vector<PhaseMark> phases;
    std::vector<ValidationResult> validations;
    std::vector<CheckpointWrite> checkpoints;
};

// Reads an export's runs without touching a database. A malformed one is refused with
// InvalidInputError naming `file` and the field, as importRunsJson describes.
std::vector<ExportedRun> parseRunsExport(const QByteArray &json, const QString &file);

// Imports every run of an export in one transaction (all or nothing). Each gets a new local id and
// keeps its original id and host (origin_run_id, origin_host). A run whose uuid is already here is
// skipped with a message. A malformed file is refused with InvalidInputError naming the file and
// the field ("runs[0].samples.loss[12]: must be a number"), and nothing is written.
ImportResult importRunsJson(HistoryStore &store, const QString &file);

} // namespace pb
