#pragma once
// The c10d differences between Debian's LibTorch 1.13 and LibTorch 2.x, kept beside the only code
// that includes c10d (so the engine's translation units do not parse the Gloo headers). 2.0 split
// ProcessGroup into a dispatching ProcessGroup over per-device Backends; ProcessGroupGloo and
// ProcessGroupNCCL are Backends there and ProcessGroups before. Their collectives, Options::create,
// the Gloo device helpers, TCPStore(host, TCPStoreOptions) and Work::wait are the same in both.
#include "engine/TorchCompat.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pb::compat {

#if PB_TORCH_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

} // namespace pb::compat
