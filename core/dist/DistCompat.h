#pragma once
// The c10d differences between Debian's LibTorch 1.13 and LibTorch 2.x, kept beside the only code
// that includes c10d (so the engine's translation units do not parse the Gloo headers). 2.0 split
// ProcessGroup into a dispatching ProcessGroup over per-device Backends; ProcessGroupGloo and
// ProcessGroupNCCL are Backends there and ProcessGroups before. Their collectives, Options::create,
// the Gloo device helpers, TCPStore(host, TCPStoreOptions) and Work::wait are the same in both.
#include "engine/TorchCompat.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if PB_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

// A LibTorch built with a backend may still ship without that backend's own headers (a PyTorch
// wheel has no Gloo headers; nccl.h comes in a separate package): the backend is then left out
// here, and asking for it is an error at run time instead of a build that breaks.
#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define PB_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>)
#define PB_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pb::compat {

#if PB_TORCH_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

} // namespace pb::compat
