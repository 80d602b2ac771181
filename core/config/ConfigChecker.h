#pragma once
// Internal to the run config's validation (RunConfigValidation.cpp, ModelShapeValidation.cpp,
// CheckedParameterCount.cpp): the issue collector and checked arithmetic.
#include "config/RunConfigValidation.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace pb::validation {

// The parameter table lists every layer, so an absurd layer count must be refused before it is built.
// Counts and element totals must stay exact in a double (JSON, the estimator's arithmetic): 2^53.
inline constexpr int64_t kMaxExact = int64_t(1) << 53;

// Checked arithmetic: nullopt once a result leaves [0, 2^53].
inline std::optional<int64_t> mul(std::optional<int64_t> a, std::optional<int64_t> b)
{
    int64_t r = 0;
    if (!a || !b || __builtin_mul_overflow(*a, *b, &r) || r > kMaxExact)
        return std::nullopt;
    return r;
}

inline std::optional<int64_t> add(std::optional<int64_t> a, std::optional<int64_t> b)
{
    int64_t r = 0;
    if (!a || !b || __builtin_add_overflow(*a, *b, &r) || r > kMaxExact)
        return std::nullopt;
    return r;
}

inline std::string shortNumber(double d)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", d);
    return buffer;
}

class Checker final {
public:
    std::vector<ValidationIssue> issues;

    void require(bool ok, const std::string &field, const std::string &message)
    {
        if (!ok)
            issues.push_back({field, message});
    }
    bool positive(int64_t v, const std::string &field)
    {
        require(v > 0, field, "must be a positive integer, got " + std::to_string(v));
        return v > 0;
    }
    void nonNegative(int64_t v, const std::string &field)
    {
        require(v >= 0, field, "must be 0 or more, got " + std::to_string(v));
    }
    void range(double v, double lo, bool loInclusive, double hi, bool hiInclusive, const std::string &field)
    {
        const bool ok = std::isfinite(v) && (loInclusive ? v >= lo : v > lo) && (hiInclusive ? v <= hi : v < hi);
        require(ok, field, "must lie in " + std::string(loInclusive ? "[" : "(") + shortNumber(lo) + ", " + shortNumber(hi) + (hiInclusive ? "]" : ")") + ", got " + shortNumber(v));
    }
};

} // namespace pb::validation
