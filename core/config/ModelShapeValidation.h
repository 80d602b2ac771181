#pragma once
#include "config/ConfigChecker.h"
#include "config/RunConfig.h"

namespace pb::validation {

// The model block's rules (shape, attention, rotary, norms, traits, mixture, latent and linear
// attention); shapeOk: whether the shape is sound enough to count its parameters.
void checkModel(Checker &k, const RunConfig &c, bool &shapeOk);

} // namespace pb::validation
