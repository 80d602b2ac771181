#pragma once
// The history as the GUI and the CLI read it: one connection of its own, opened through the checks of
// openHistory (corrupt, newer and foreign files refused untouched; older ones migrated). Use a store
// only on the thread that created it; each thread that reads makes its own.
#include "result/PilotTypes.h"
#include "history/HistoryTypes.h"

#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace pb {

namespace history { class Connection; }

class HistoryStore final {
public:
    // ReadOnlyWhereNeeded: for commands that only read; a history this user cannot write opens
    // read-only (history::openHistoryForReading) and the annotating calls below refuse, naming it.
    enum class Access { ReadWrite, ReadOnlyWhereNeeded };
    // Throws InvalidInputError naming the path (corrupt, newer, foreign) or PilotBenchError.
    explicit HistoryStore(const QString &path, Access access = Access::ReadWrite);
    ~HistoryStore();
    Q_DISABLE_COPY_MOVE(HistoryStore)

    static int schemaVersion();
    const QString &path() const;
    bool readOnly() const;

    // Newest first.
    std::vector<RunRecord> listRuns(const RunFilter &filter = {}) const;
    std::optional<RunRecord> findRun(int64_t id) const;
    // Throws InvalidInputError("run <id>", ...) when there is none.
    RunRecord run(int64_t id) const;

    SampleSeries samples(int64_t runId) const;            // columns for plotting
    std::vector<StepSample> sampleList(int64_t runId) const; // exact values, for export
    int64_t sampleCount(int64_t runId) const;
    std::vector<SampleSeries> curves(const std::vector<int64_t> &runIds) const; // overlay
    std::vector<PhaseMark> phases(int64_t runId) const;
    std::vector<ValidationResult> validations(int64_t runId) const;
    std::vector<CheckpointWrite> checkpoints(int64_t runId) const;

    std::vector<ConfigDifference> diffConfigs(int64_t leftRunId, int64_t rightRunId) const;

    // One pinned baseline per model: pinning a run unpins the model's previous one.
    void pinBaseline(int64_t runId);
    void unpinBaseline(int64_t runId);
    std::optional<int64_t> pinnedBaseline(const QString &model) const;
    void setTags(int64_t runId, const QStringList &tags);
    void addTag(int64_t runId, const QString &tag);
    void setNotes(int64_t runId, const QString &notes);

    history::Connection &connection() const; // for export/import and the evidence tables

private:
    void requireWritable() const;
    std::unique_ptr<history::Connection> m_connection;
};

} // namespace pb
