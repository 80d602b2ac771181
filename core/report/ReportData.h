#pragma once
// Everything the PDF report of one run shows, read from the history in one go: the run, its
// samples, phases, validations and checkpoints, the restore checks and scaling steps of the same
// config, the estimator's prediction for the device it ran on, and the card comparison. Parts that
// cannot be computed keep their reason in text, so the report says why instead of failing.
#include "catalog/Catalog.h"
#include "workflow/Decision.h"
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"
#include "history/HistoryTypes.h"

#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;

struct ReportData {
    RunRecord run;
    std::optional<RunConfig> config;       // unset when the stored config no longer parses
    std::string configError;
    ParamCounts params;
    SampleSeries samples;
    std::vector<PhaseMark> phases;
    std::vector<ValidationResult> validations;
    std::vector<CheckpointWrite> checkpoints;
    std::vector<RunRecord> restoreChecks;  // kind restore-check, same config hash, newest first
    std::vector<RunRecord> scaleRuns;      // kind scale, same config hash, newest first
    std::optional<RunRecord> decision;     // newest recorded decision of the same config, not superseded
    std::string decisionStale;             // why it is out of date (decisionStaleness); empty: current
    std::optional<MemoryEstimate> estimate;// for the device the run used
    std::string estimateError;
    Catalog catalog;
    std::optional<Comparison> comparison;  // with this run as the pilot
    std::string comparisonError;
    std::vector<BillingPlan> recommendedPlans; // the term decision of the recommended row
};

// The estimator's prediction for `config` on the device `run` used (its recorded environment).
MemoryEstimate estimateForRun(const RunConfig &config, const RunRecord &run);

// Throws InvalidInputError("--run", ...) when the run does not exist.
ReportData loadReportData(const HistoryStore &store, int64_t runId, const Catalog &catalog);

} // namespace pb
