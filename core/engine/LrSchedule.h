#pragma once
// Learning rate at a step: linear warm-up, then constant, cosine or linear decay to
// minLrRatio * lr at totalSteps. A pure function of the step, so a restored run needs only the
// step counter to continue the schedule exactly (no scheduler object to step on load).
#include "config/RunConfig.h"

#include <algorithm>
#include <cmath>

namespace pb {

inline double learningRateAt(const OptimizerConfig &optimizer, const ScheduleConfig &schedule, int64_t step)
{
    const double base = optimizer.lr;
    if (schedule.warmupSteps > 0 && step < schedule.warmupSteps)
        return base * static_cast<double>(step + 1) / static_cast<double>(schedule.warmupSteps);
    if (schedule.kind == ScheduleKind::Constant)
        return base;
    const double span = std::max<double>(1.0, static_cast<double>(schedule.totalSteps - schedule.warmupSteps));
    const double progress = std::clamp(static_cast<double>(step - schedule.warmupSteps) / span, 0.0, 1.0);
    const double floor = base * schedule.minLrRatio;
    if (schedule.kind == ScheduleKind::Linear)
        return floor + (base - floor) * (1.0 - progress);
    return floor + (base - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

} // namespace pb
