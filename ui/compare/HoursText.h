#pragma once
// Job and rental-window hours as the Compare tab and its chart show them: in the unit that reads.
#include "util/Units.h"

#include <QString>

namespace pb::ui {

inline QString hoursText(double hours) { return formatDuration(hours * 3600); }

} // namespace pb::ui
