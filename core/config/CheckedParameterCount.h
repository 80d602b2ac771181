#pragma once
#include "config/RunConfig.h"

#include <cstdint>
#include <optional>

namespace pb::validation {

// The model's parameter count as parameterTable() would list it, in checked arithmetic and without
// listing anything: nullopt where a product or sum leaves [0, 2^53].
std::optional<int64_t> checkedParameterCount(const RunConfig &c);

} // namespace pb::validation
