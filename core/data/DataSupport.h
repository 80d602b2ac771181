#pragma once
// Small helpers shared by the data sources: a portable seeded generator (std:: distributions and
// std::shuffle differ between standard libraries, and a restored run must see the same data on
// any build), readable numbers for descriptions, and file names for messages.
#include <cstdint>
#include <string>
#include <vector>

namespace pb::data {

// SplitMix64 finaliser: a good 64-bit mix, used both as a hash of (seed, index) and as a stream.
inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

class SplitMix64 final {
public:
    explicit SplitMix64(uint64_t seed) : m_state(seed) {}
    uint64_t next()
    {
        m_state += 0x9e3779b97f4a7c15ULL;
        uint64_t z = m_state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, bound) by Lemire's multiply-shift with rejection, so no modulo bias.
    uint64_t below(uint64_t bound);

private:
    uint64_t m_state;
};

// The same permutation on every platform for a given seed (Fisher-Yates driven by SplitMix64).
void seededShuffle(std::vector<int64_t> &values, uint64_t seed);

// 1234567 -> "1,234,567"
std::string groupThousands(int64_t value);
// "/a/b/tokens.bin" -> "tokens.bin"
std::string baseName(const std::string &path);

} // namespace pb::data
