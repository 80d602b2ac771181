#pragma once
// A number with a fixed count of decimals, locale-independent (std::ostringstream in the "C"
// locale), for assumptions and recommendations written as text.
#include <sstream>
#include <string>

namespace pb {

inline std::string fixed(double value, int digits)
{
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(digits);
    s << value;
    return s.str();
}

} // namespace pb
