#include "catalog/CostModel.h"
#include "util/Units.h"
#include "util/FixedText.h"

#include "util/Errors.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pb {
namespace {

// Guards whole-hour and whole-block rounding against binary noise (240.0000000001 h is 240 h).
constexpr double kEpsilon = 1e-9;

double startedUnits(double amount) { return std::ceil(amount - kEpsilon); }


std::string hoursText(double hours) { return formatDuration(hours * 3600).toStdString(); }

std::string money(const Catalog &catalog, double value) { return fixed(value, 2) + " " + catalog.currency; }

void requireNonNegative(const char *where, double value)
{
    if (!std::isfinite(value) || value < 0)
        throw InvalidInputError(where, "must be zero or more");
}

BillingPlan onDemandPlan(const CardSpec &card, int gpus, double windowHours)
{
    BillingPlan plan;
    plan.termId = "on_demand";
    plan.onDemandHours = startedUnits(windowHours);
    plan.billedHours = plan.onDemandHours;
    plan.gpuCost = plan.onDemandHours * card.onDemandPerGpuHour(gpus) * gpus;
    plan.description = fixed(plan.onDemandHours, 0) + " h on demand";
    return plan;
}

// The term's two forms: whole blocks covering the window, and (when something is left over)
// the blocks that fit plus the remainder on demand.
std::vector<BillingPlan> termPlans(const TermSpec &term, const CardSpec &card, int gpus, double windowHours)
{
    std::vector<BillingPlan> out;
    const double perHour = card.termPerGpuHour(term.id, gpus);
    BillingPlan covering;
    covering.termId = term.id;
    covering.termHours = term.hours;
    covering.blocks = static_cast<int>(std::max(1.0, startedUnits(windowHours / term.hours)));
    covering.billedHours = covering.blocks * term.hours;
    covering.gpuCost = covering.billedHours * perHour * gpus;
    covering.description = std::to_string(covering.blocks) + " x " + term.label;
    out.push_back(covering);

    const double whole = std::floor(windowHours / term.hours + kEpsilon);
    const double remainder = windowHours - whole * term.hours;
    if (whole >= 1 && remainder > kEpsilon) {
        BillingPlan mixed;
        mixed.termId = term.id;
        mixed.termHours = term.hours;
        mixed.blocks = static_cast<int>(whole);
        mixed.onDemandHours = startedUnits(remainder);
        mixed.billedHours = whole * term.hours + mixed.onDemandHours;
        mixed.gpuCost = (whole * term.hours * perHour + mixed.onDemandHours * card.onDemandPerGpuHour(gpus)) * gpus;
        mixed.description = std::to_string(mixed.blocks) + " x " + term.label + " + " + fixed(mixed.onDemandHours, 0) + " h on demand";
        out.push_back(mixed);
    }
    return out;
}

bool cheaper(const BillingPlan &a, const BillingPlan &b)
{
    if (std::abs(a.gpuCost - b.gpuCost) > 1e-6)
        return a.gpuCost < b.gpuCost;
    return a.billedHours < b.billedHours;
}

void checkWindow(const Catalog &catalog, int gpus, double windowHours)
{
    if (!std::isfinite(windowHours) || windowHours <= 0)
        throw InvalidInputError("window_hours", "must be a positive number of hours");
    if (!catalog.hasGpuCount(gpus))
        throw InvalidInputError("gpus", std::to_string(gpus) + " is not a card count the catalog prices");
}

} // namespace

std::vector<BillingPlan> billingPlans(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours)
{
    checkWindow(catalog, gpus, windowHours);
    std::vector<BillingPlan> plans {onDemandPlan(card, gpus, windowHours)};
    for (const auto &term : catalog.terms) {
        for (auto &plan : termPlans(term, card, gpus, windowHours))
            plans.push_back(std::move(plan));
    }
    std::stable_sort(plans.begin(), plans.end(), cheaper);
    return plans;
}

BillingPlan cheapestPlan(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours)
{
    return billingPlans(catalog, card, gpus, windowHours).front();
}

BillingPlan planForTerm(const Catalog &catalog, const CardSpec &card, int gpus, double windowHours, const std::string &termId)
{
    checkWindow(catalog, gpus, windowHours);
    if (termId == "on_demand")
        return onDemandPlan(card, gpus, windowHours);
    auto plans = termPlans(catalog.term(termId), card, gpus, windowHours);
    std::stable_sort(plans.begin(), plans.end(), cheaper);
    return plans.front();
}

CostEstimate estimateCost(const Catalog &catalog, const CardSpec &card, int gpus, const CostInputs &in)
{
    if (!std::isfinite(in.plannedTokens) || in.plannedTokens <= 0)
        throw InvalidInputError("job.tokens", "the planned job must train a positive number of tokens");
    if (!std::isfinite(in.tokensPerSecond) || in.tokensPerSecond <= 0)
        throw InvalidInputError("tokens_per_second", "must be positive");
    requireNonNegative("window.startup_hours", in.window.startupHours);
    requireNonNegative("window.validation_hours", in.window.validationHours);
    requireNonNegative("window.checkpoint_hours", in.window.checkpointHours);
    requireNonNegative("window.export_hours", in.window.exportHours);
    requireNonNegative("options.storage_tb", in.options.storageTb);
    requireNonNegative("options.egress_tb", in.options.egressTb);
    const double useful = in.usefulTokens.value_or(in.plannedTokens);
    if (!std::isfinite(useful) || useful <= 0 || useful > in.plannedTokens * (1 + kEpsilon))
        throw InvalidInputError("job.useful_tokens", "must be positive and at most the planned tokens");

    CostEstimate e;
    e.cardId = card.id;
    e.gpus = gpus;
    e.jobHours = in.plannedTokens / in.tokensPerSecond / 3600.0;
    e.windowHours = e.jobHours + in.window.startupHours + in.window.validationHours + in.window.checkpointHours + in.window.exportHours;
    e.plan = in.termId.empty() ? cheapestPlan(catalog, card, gpus, e.windowHours) : planForTerm(catalog, card, gpus, e.windowHours, in.termId);
    const CatalogOptions &o = catalog.options;
    // Storage and support stay attached for everything billed, including unused term hours.
    e.storageCost = in.options.storageTb * o.storagePerTbMonth * e.plan.billedHours / o.hoursPerMonth;
    e.egressCost = in.options.egressTb * o.egressPerTb;
    e.supportCost = in.options.support ? o.supportPerMonth * startedUnits(e.plan.billedHours / o.hoursPerMonth) : 0.0;
    e.optionsCost = e.storageCost + e.egressCost + e.supportCost;
    e.totalCost = e.plan.gpuCost + e.optionsCost;
    e.usefulTokens = useful;
    e.costPerMillionTokens = e.totalCost / (useful / 1e6);
    return e;
}

Recommendation recommend(std::vector<ConfigurationCost> &rows, const Catalog &catalog, std::optional<double> deadlineHours)
{
    Recommendation r;
    for (auto &row : rows) {
        row.recommended = false;
        row.meetsDeadline = !deadlineHours || row.cost.windowHours <= *deadlineHours + kEpsilon;
    }
    auto better = [&](const ConfigurationCost &a, const ConfigurationCost &b) {
        if (std::abs(a.cost.totalCost - b.cost.totalCost) > 1e-6)
            return a.cost.totalCost < b.cost.totalCost;
        if (std::abs(a.cost.windowHours - b.cost.windowHours) > 1e-9)
            return a.cost.windowHours < b.cost.windowHours;
        return a.gpus < b.gpus;
    };
    int runnerUp = -1;
    int fitting = 0;
    int fastestFitting = -1;
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const auto &row = rows[static_cast<size_t>(i)];
        if (!row.fits)
            continue;
        ++fitting;
        if (fastestFitting < 0 || row.cost.windowHours < rows[static_cast<size_t>(fastestFitting)].cost.windowHours)
            fastestFitting = i;
        if (!row.meetsDeadline)
            continue;
        if (r.index < 0 || better(row, rows[static_cast<size_t>(r.index)])) {
            runnerUp = r.index;
            r.index = i;
        } else if (runnerUp < 0 || better(row, rows[static_cast<size_t>(runnerUp)])) {
            runnerUp = i;
        }
    }
    auto label = [&](const ConfigurationCost &row) {
        const CardSpec *card = catalog.find(row.cardId);
        return (card ? card->name : row.cardId) + " x" + std::to_string(row.gpus);
    };
    const std::string source = " Prices are from the locally modelled catalog of " + catalog.modelledOn + ", not a quote.";
    if (fitting == 0) {
        r.text = "No configuration fits: the planned micro-batch does not fit in the memory of any card in the catalog. Reduce the micro-batch or the sequence length, or enable recomputation, LoRA or sharding.";
        return r;
    }
    if (r.index < 0) {
        const auto &fast = rows[static_cast<size_t>(fastestFitting)];
        r.text = "Nothing that fits meets the deadline of " + hoursText(*deadlineHours) + ": the fastest fitting configuration, " + label(fast) + ", needs a rental window of "
                 + hoursText(fast.cost.windowHours) + ". Move the deadline or plan fewer tokens." + source;
        return r;
    }
    auto &best = rows[static_cast<size_t>(r.index)];
    best.recommended = true;
    std::string text = "Rent " + label(best) + " (" + best.cost.plan.description + "): it fits, finishes in a " + hoursText(best.cost.windowHours) + " rental window"
                       + (deadlineHours ? " (deadline " + hoursText(*deadlineHours) + ")" : std::string()) + " and is the cheapest option that does, at "
                       + money(catalog, best.cost.totalCost) + " in total or " + money(catalog, best.cost.costPerMillionTokens) + " per million useful tokens.";
    if (runnerUp >= 0) {
        const auto &next = rows[static_cast<size_t>(runnerUp)];
        text += " The next cheapest, " + label(next) + ", costs " + money(catalog, next.cost.totalCost - best.cost.totalCost) + " more";
        text += next.cost.windowHours < best.cost.windowHours ? " but finishes " + hoursText(best.cost.windowHours - next.cost.windowHours) + " sooner." : ".";
    }
    if (best.stepTimeBasis == FigureBasis::Modelled)
        text += " Its step time is modelled, not measured on that card: confirm it with a pilot before reserving the term.";
    r.text = text + source;
    return r;
}

} // namespace pb
