#pragma once
// The fixed-term decision: how long the rental window is, which billing (on demand or whole term
// blocks) is cheapest for it, what the options add, and the cost per million useful tokens.
#include "catalog/Catalog.h"
#include "catalog/StepProjection.h"

#include <optional>
#include <string>
#include <vector>

namespace pb {

// Everything besides training that keeps the machines rented, in hours (from the pilot's phases,
// scaled to the job by the caller).
struct WindowInputs {
    double startupHours = 0;           // machine start, environment, model and data loading
    double validationHours = 0;        // all validation passes of the job
    double checkpointHours = 0;        // checkpoint writes and uploads off the machine
    double exportHours = 0;            // final export and upload
};

struct OptionInputs {
    double storageTb = 0;              // persistent storage kept for the billed period
    double egressTb = 0;               // data moved out
    bool support = false;              // paid support for the billed months
};

// One way of paying for a window: on demand, or `blocks` whole terms, optionally with the
// remainder on demand (termId "on_demand" when there is no term).
struct BillingPlan {
    std::string termId;                // "on_demand", "1w", ...
    int blocks = 0;                    // whole term blocks
    double termHours = 0;              // hours of one block
    double onDemandHours = 0;          // billed on demand (per started hour)
    double billedHours = 0;            // blocks x termHours + onDemandHours
    double gpuCost = 0;                // per-GPU-hour prices x gpus x hours
    std::string description;           // "2 x 1 week", "1 x 1 week + 72 h on demand", "240 h on demand"
};

// Every candidate for the window, cheapest first (ties: fewer billed hours). For each term: enough
// whole blocks to cover the window, and (when a remainder is left) the whole blocks that fit plus
// the remainder on demand. On demand is billed per started hour.
std::vector<BillingPlan> billingPlans(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours);
BillingPlan cheapestPlan(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours);
// The plan for one named term ("on_demand" or a catalog term), the cheaper of its two forms.
BillingPlan planForTerm(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours, const std::string &termId);

struct CostInputs {
    double plannedTokens = 0;          // tokens the job trains
    std::optional<double> usefulTokens;// tokens trained successfully; unset: plannedTokens
    double tokensPerSecond = 0;        // for this card and count
    WindowInputs window;
    OptionInputs options;
    std::string termId;                // empty: the cheapest billing; else that term ("on_demand" too)
};

struct CostEstimate {
    std::string cardId;
    int gpus = 1;
    double jobHours = 0;               // plannedTokens / tokensPerSecond / 3600
    double windowHours = 0;            // jobHours + start-up + validation + checkpoints + export
    BillingPlan plan;
    double storageCost = 0;            // storageTb x per TB-month x billedHours / hoursPerMonth
    double egressCost = 0;             // egressTb x per TB
    double supportCost = 0;            // per month x started months of billedHours
    double optionsCost = 0;
    double totalCost = 0;              // plan.gpuCost + optionsCost
    double usefulTokens = 0;
    double costPerMillionTokens = 0;   // totalCost / (usefulTokens / 1e6)
};

// Throws InvalidInputError for non-positive tokens or throughput, negative phases or options,
// an unpriced card count or an unknown term.
CostEstimate estimateCost(const Catalog &catalog, const CardSpec &card, int gpus, const CostInputs &inputs);

// A configuration as the comparison sees it.
struct ConfigurationCost {
    std::string cardId;
    int gpus = 1;
    bool fits = false;                 // the planned micro-batch fits in this card's memory
    FigureBasis stepTimeBasis = FigureBasis::Modelled;
    CostEstimate cost;
    bool meetsDeadline = true;         // windowHours <= deadline (true without a deadline)
    bool recommended = false;
};

struct Recommendation {
    int index = -1;                    // into the rows; -1 when nothing fits (and meets the deadline)
    std::string text;                  // plain language: what and why
};

// Marks the cheapest row (total cost; ties: shorter window, then fewer GPUs) that fits and meets
// the deadline, sets meetsDeadline on every row, and says why in words.
Recommendation recommend(std::vector<ConfigurationCost> &rows, const Catalog &catalog, std::optional<double> deadlineHours);

} // namespace pb
