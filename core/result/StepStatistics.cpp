#include "result/StepStatistics.h"

#include <algorithm>
#include <cmath>

namespace pb {

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

void summarizeSteps(const std::vector<StepSample> &measured, PilotSummary &s)
{
    s.measuredSteps = static_cast<int64_t>(measured.size());
    if (measured.empty())
        return;
    std::vector<double> times;
    double stepSum = 0, waitSum = 0, tokenSum = 0;
    for (const auto &m : measured) {
        times.push_back(m.stepTimeMs);
        stepSum += m.stepTimeMs;
        waitSum += m.dataWaitMs;
        tokenSum += static_cast<double>(m.tokens);
    }
    const double n = static_cast<double>(times.size());
    s.stepTimeMeanMs = stepSum / n;
    double var = 0;
    for (double t : times)
        var += (t - s.stepTimeMeanMs) * (t - s.stepTimeMeanMs);
    s.stepTimeCv = times.size() > 1 && s.stepTimeMeanMs > 0 ? std::sqrt(var / (n - 1)) / s.stepTimeMeanMs : 0;
    s.stepTimeP50Ms = percentile(times, 50);
    s.stepTimeP90Ms = percentile(times, 90);
    s.stepTimeP99Ms = percentile(times, 99);
    s.tokensPerSecond = stepSum > 0 ? tokenSum / (stepSum / 1000.0) : 0;
    s.dataStallFraction = stepSum > 0 ? waitSum / stepSum : 0;
}

double float32Resolution(const std::vector<double> &values)
{
    double unit = 0;
    for (const double v : values) {
        if (!std::isfinite(v))
            continue;
        const float f = std::abs(static_cast<float>(v));
        unit = std::max(unit, static_cast<double>(std::nextafter(f, INFINITY) - f));
    }
    return unit;
}

} // namespace pb
