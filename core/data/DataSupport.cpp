#include "data/DataSupport.h"

#include <utility>

namespace pb::data {

uint64_t SplitMix64::below(uint64_t bound)
{
    if (bound <= 1)
        return 0;
    // 128-bit product: the high half is uniform in [0, bound) once the low half clears the threshold.
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        const unsigned __int128 product = static_cast<unsigned __int128>(next()) * bound;
        if (static_cast<uint64_t>(product) >= threshold)
            return static_cast<uint64_t>(product >> 64);
    }
}

void seededShuffle(std::vector<int64_t> &values, uint64_t seed)
{
    SplitMix64 rng(mix64(seed));
    for (size_t i = values.size(); i > 1; --i) {
        const size_t j = static_cast<size_t>(rng.below(i));
        std::swap(values[i - 1], values[j]);
    }
}

std::string groupThousands(int64_t value)
{
    const bool negative = value < 0;
    const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
    const std::string digits = std::to_string(magnitude);
    std::string out;
    const size_t n = digits.size();
    for (size_t i = 0; i < n; ++i) {
        if (i > 0 && (n - i) % 3 == 0)
            out.push_back(',');
        out.push_back(digits[i]);
    }
    return negative ? "-" + out : out;
}

std::string baseName(const std::string &path)
{
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace pb::data
