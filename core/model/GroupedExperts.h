#pragma once
// Internal to the engine (includes torch): per-expert MLPs (Mixtral, Qwen2/3-MoE, OLMoE,
// DeepSeek-V3, GLM-4.5) run as one grouped GEMM per projection, as Transformers 5 runs them, while
// each expert keeps its own parameters under the hub's names. Their weights are views of the
// layer's pools (config/ParameterTable.h): gate and up rows of every expert form one [E, 2I, H]
// matrix, the down weights one [E, H, I], which the GEMM reads in place.
#include "model/Transformer.h"

namespace pb {

// Every expert of `experts` on its rows of x [N, H] (expert 0's counts[0] rows first, as
// SparseMoe permutes them), unweighted: [N, H]. Undefined when they cannot run grouped, and the
// caller loops over the experts instead: adapters, NF4 or float8 projections, an activation other
// than SwiGLU, weights no longer laid out as their pools (a sharded model's flat views), or x not
// a CUDA bfloat16 tensor (the grouped GEMM's case), unless PILOTBENCH_EXPERTS=grouped asks for the
// grouped autograd path with one matmul per expert (how CPU tests check its gradients).
torch::Tensor groupedExperts(const std::vector<Mlp> &experts, const torch::Tensor &x, c10::ArrayRef<int64_t> counts);

} // namespace pb
