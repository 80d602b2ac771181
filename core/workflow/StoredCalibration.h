#pragma once
// The stored pilot residuals the estimator calibrates with (`pilotbench-cli estimate`, the GUI's
// budget): read from the history, and for a catalog card only those measured on a device the
// catalog recognises as that card.
#include "estimate/CardCapacities.h"
#include "estimate/MemoryEstimate.h"

#include <QString>

#include <vector>

namespace pb {

// Every residual in the history at `database`; none when the file does not exist (an estimate
// never creates a history). Throws InvalidInputError for a file that is not a usable history.
std::vector<CalibrationResidual> storedResiduals(const QString &database);
// Residuals whose device name the built-in catalog matches to the same card as `card`'s name.
std::vector<CalibrationResidual> residualsForCard(const std::vector<CalibrationResidual> &all, const CardCapacity &card);

} // namespace pb
