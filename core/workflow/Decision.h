#pragma once
// The term decision: every catalog card at every card count for one run config, each with the
// multi-GPU strategy that fits (or the one asked for): fit and headroom from the estimator, step
// time from the newest matching pilot (measured on its own card, projected elsewhere) or from the
// estimator's FLOPs at an assumed efficiency, the strategy's exposed communication, the rental
// window from the pilot's measured phases (checkpoints at the measured rate for the planned job's
// checkpoint size), the term cost and the cost per million useful tokens, with the cheapest
// fitting configuration that meets the deadline marked. QtCore only: the CLI, the comparison view
// and the PDF report all call it.
#include "catalog/Catalog.h"
#include "catalog/CostModel.h"
#include "catalog/StepProjection.h"
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"
#include "history/HistoryTypes.h"
#include "workflow/FormatEvidence.h"

#include <QJsonObject>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;

struct ComparisonRequest {
    std::vector<int> gpuCounts;                  // empty: every count the catalog prices
    // Used when gpus > 1 (1 GPU: none). Unset: auto, the cheapest strategy that fits with headroom
    // (DDP where it fits, else ZeRO-1, ZeRO-2 or FSDP).
    std::optional<ParallelStrategy> multiGpuStrategy;
    std::string termId;                          // "": cheapest billing; "on_demand" or a catalog term id
    std::optional<SoftwareStack> stack;          // only cards validated with this stack (unset: all)
    OptionInputs options;                        // storage, egress, support added to every row
    double headroomFraction = 0.10;
    // The pair of gradient buckets ZeRO-1/2 reduce through (PyTorch DDP's bucket_cap_mb by default;
    // DeepSpeed's stage 2 defaults to 5e8 elements, 954 MiB of bf16).
    int64_t bucketBytes = int64_t {25} << 20;
    // Without a pilot: share of the card's dense BF16 peak / bandwidth the step is assumed to reach.
    double assumedComputeEfficiency = 0.40;
    double assumedBandwidthEfficiency = 0.70;
    double uploadGBps = 1.0;                     // checkpoint uploads off the machine
    // Share of the card's datasheet interconnect bandwidth a collective reaches (modelled traffic).
    double interconnectEfficiency = 0.7;
};

// What the comparison takes from one pilot in the history.
struct PilotEvidence {
    int64_t runId = 0;
    std::string configHash;
    std::string deviceLabel;                     // "NVIDIA H200", "cpu (x86_64)"
    std::string cardId;                          // catalog card it ran on (clean match); "" otherwise
    double stepTimeMs = 0;                       // mean measured step
    double flopsPerStep = 0;
    double tokensPerStep = 0;
    double setupMs = 0;
    double validationPassMs = 0;                 // mean of the measured passes (0: none)
    // Checkpoints as rates, so the window scales them to the planned job's size (0: not measured).
    double checkpointWriteBytesPerSecond = 0;    // the pilot's checkpoint writes: bytes / write time
    int64_t checkpointBytes = 0;                 // the pilot's own checkpoint, largest written
    std::optional<int64_t> restoreCheckRunId;    // newest restore check of the same config hash
    double checkpointVerifyBytesPerSecond = 0;   // from that restore check
    double checkpointRestoreBytesPerSecond = 0;
    std::map<int, double> scalingEfficiencyByGpus; // from runs of kind "scale" with the same hash
    std::map<int, ParallelStrategy> scalingStrategyByGpus; // the strategy each of those ran
    std::vector<int64_t> scaleRunIds;            // the scaling steps those came from
    std::string precision = "bf16-mixed";        // train.precision the pilot ran
    // fp8 over bf16-mixed for this run, measured by two pilots on the pilot's device (either may
    // be this one); unset where one of them is missing.
    std::optional<FormatSpeedup> fp8Speedup;
};

// Reads a pilot run's evidence (validations, checkpoints, scale runs and the newest restore check of
// its config from `store`). Throws InvalidInputError("--run", ...) when the run is not a finished
// pilot with a measured step time.
PilotEvidence pilotEvidence(const HistoryStore &store, const RunRecord &run, const Catalog &catalog);
// The newest finished pilot with this config hash that measured steps; nullopt when there is none.
std::optional<RunRecord> newestMatchingPilot(const HistoryStore &store, const std::string &configHash);

struct ComparisonRow {
    std::string cardId;
    std::string cardName;
    int gpus = 1;
    ParallelStrategy strategy = ParallelStrategy::None;
    std::string strategyReason;                  // why this strategy (auto), one sentence
    double commMsPerStep = 0;                    // modelled exposed communication beyond DDP's overlapped all-reduce
    bool fits = false;
    int64_t peakBytes = 0;                       // estimator's device peak (per GPU)
    int64_t usableBytes = 0;                     // capacity less headroom
    int64_t headroomBytes = 0;                   // usable - peak (negative: short by that much)
    int64_t maxMicroBatch = 0;
    double stepTimeMs = 0;
    FigureBasis stepTimeBasis = FigureBasis::Modelled;
    double tokensPerSecond = 0;
    CostEstimate cost;                           // job and window hours, billing, totals
    bool meetsDeadline = true;
    bool recommended = false;
    std::vector<std::string> assumptions;        // of this row's figures
};

struct Comparison {
    std::vector<ComparisonRow> rows;             // by catalog card order, then card count
    int recommendedIndex = -1;
    std::string recommendation;                  // one plain-language paragraph
    std::string catalogDate;
    std::string catalogNotice;
    std::string catalogSource;                   // "built-in" or the file it was read from
    std::string catalogRevision;                 // catalogRevision() of the catalog compared on
    bool autoStrategy = true;
    std::string currency;
    std::string termId;                          // as requested ("" cheapest)
    std::optional<SoftwareStack> stack;          // as requested
    std::optional<double> deadlineHours;
    double plannedTokens = 0;
    std::string configHash;
    std::optional<int64_t> pilotRunId;
    std::vector<int64_t> scaleRunIds;            // the scaling steps whose efficiency was used
    std::optional<int64_t> restoreCheckRunId;    // whose verify and restore rates were used
    std::string pilotDevice;
    std::string pilotKernels;                    // train.kernels the pilot ran ("eager", "fused"): the config's, as the hash matches
    std::string precision;                       // train.precision of the config compared
    std::optional<FormatSpeedup> fp8Speedup;     // measured for this run (the pilot's), used for an fp8 config
    // One checkpoint of the planned job (checkpointBytesFor) and the measured rates it was timed
    // at (bytes per second, 0: not measured); the same for every row.
    int64_t checkpointBytes = 0;
    double checkpointWriteBytesPerSecond = 0;
    double checkpointVerifyBytesPerSecond = 0;
    double checkpointRestoreBytesPerSecond = 0;
    std::vector<std::string> assumptions;        // shared by all rows
};

// Throws InvalidInputError naming the field: "--gpus" (count not priced), "--term" (unknown),
// "job.amount" / "job.dataset_tokens" (no tokens planned).
Comparison compareConfigurations(const RunConfig &config, const Catalog &catalog, const ComparisonRequest &request,
                                 const std::optional<PilotEvidence> &pilot);

// Communication a strategy exposes per optimizer step beyond DDP's all-reduce (which overlaps the
// backward pass and is in the scaling efficiency): ZeRO-1/2 all-gather the updated parameters
// after the step; FSDP all-gathers every parameter before forward and again before backward.
// Ring collectives over the card's interconnect at `efficiency` of its datasheet bandwidth.
double exposedCommMs(ParallelStrategy strategy, int gpus, const RunConfig &config, const CardSpec &card, double efficiency);

// The numerical format of the compared config and what the history measured of FP8 for it, in
// one sentence for the CLI, the Compare tab and the report.
std::string numericFormatText(const Comparison &comparison);

// {"rows": [...], "recommendation", "recommended_index", "catalog_date", "catalog_notice", "currency",
//  "term", "deadline_hours", "planned_tokens", "config_hash", "pilot_run_id", "pilot_device", "restore_check_run_id",
//  "precision", "fp8_speedup" (FormatSpeedup::toJson, or null), "checkpoint_bytes", "checkpoint_write_bytes_per_s", "checkpoint_verify_bytes_per_s", "checkpoint_restore_bytes_per_s",
//  "assumptions"}
QJsonObject toJson(const Comparison &comparison);

} // namespace pb
