#pragma once
// The step-time figures of a run from its measured steps, one implementation for our own pilot and
// a watched command: mean, coefficient of variation, nearest-rank percentiles, tokens per second
// and the data-stall fraction.
#include "result/PilotTypes.h"

#include <vector>

namespace pb {

// Nearest-rank percentile of an unsorted sample (p in [0, 100]); 0 for none.
double percentile(std::vector<double> values, double p);

// Fills measuredSteps, stepTimeMeanMs, stepTimeCv, stepTimeP50/P90/P99Ms, tokensPerSecond and
// dataStallFraction of `summary` from `measured` (warm-up steps already left out). Leaves them as
// they are when there is no step.
void summarizeSteps(const std::vector<StepSample> &measured, PilotSummary &summary);

// The largest unit in the last place of the finite values as float32: a float32 loss moves in these
// units, so two runs' losses cannot be seen to differ by less (0 for none).
double float32Resolution(const std::vector<double> &values);

} // namespace pb
