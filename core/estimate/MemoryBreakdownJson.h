#pragma once
// The one JSON form of an estimate's breakdown (estimate --json, pilot --memory-snapshot).
#include "estimate/MemoryEstimate.h"

#include <QJsonObject>

namespace pb {

QJsonObject toJson(const MemoryBreakdown &breakdown);

} // namespace pb
