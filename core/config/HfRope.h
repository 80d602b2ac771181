#pragma once
// The rotary positions of a Hugging Face config.json, in either form Transformers writes: the older
// `rope_theta` + `rope_scaling`, or Transformers 5's `rope_parameters` (one object, or one per layer
// type: full_attention, sliding_attention).
#include "config/RunConfig.h"

#include <QJsonObject>

#include <string>

namespace pb {

struct HfRope {
    double theta = 10000.0;
    RopeScaling scaling;
    double localTheta = 0;         // sliding layers' own unscaled base; 0: none given
    double partialRotary = 0;      // partial_rotary_factor found inside rope_parameters; 0: none
};

// `defaultTheta`: the type's config class default. `localThetaKey`: the legacy key of the sliding
// layers' base (Gemma 3's rope_local_base_freq), or nullptr. Types whose frequencies change at run
// time (dynamic) are refused by name.
// `defaultLocalTheta`: the sliding layers' base when their rope entry or key gives none (0: the global one).
HfRope hfRope(const QJsonObject &json, const std::string &where, double defaultTheta, const char *localThetaKey = nullptr, double defaultLocalTheta = 0);

} // namespace pb
