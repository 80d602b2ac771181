#pragma once
// Precompiled header for the few translation units that include torch.
#include <torch/torch.h>
