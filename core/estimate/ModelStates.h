#pragma once
// Weights, gradients and optimizer state from the parameter table (config/ParameterTable.h), so
// the counts are the engine's own. Bytes are for one full replica; MemoryEstimator shards them.
#include "config/RunConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct ModelStateBytes {
    int64_t frozenWeights = 0;
    int64_t trainableWeights = 0;        // master copies (fp32 under fp32 and mixed precision)
    int64_t autocastCopies = 0;          // 16-bit casts of trainable matrices cached by autocast
    int64_t gradients = 0;
    int64_t optimizerStates = 0;
    int64_t optimizerStepTemporary = 0;  // largest transient of one parameter's update
    int64_t largestParamBytes = 0;       // largest single parameter as stored
    int64_t perLayerGradientBytes = 0;   // gradients of one decoder block (the largest)
    int64_t perLayerCopyBytes = 0;       // autocast copies of one decoder block (the largest)
    int64_t allLayerCopyBytes = 0;       // ... of every decoder block
    // Per decoder block, in layer order: its gradients and its autocast copies (blocks differ in
    // Gemma 4: global layers twice as wide, E2B's double-wide MLPs; a mixture's dense layers).
    std::vector<int64_t> gradientBytesByBlock, copyBytesByBlock;
    int64_t headGradientBytes = 0;       // gradients of the final norm and lm_head (made first in backward)
    int64_t embeddingGradientBytes = 0;  // gradient of the embedding (made last in backward)
    int64_t largestGatheredBlockBytes = 0; // the largest decoder block as stored, NF4 bases left out (FSDP's gather)
    // The root unit of FSDP (everything outside the decoder blocks: embedding, final norm, head,
    // Gemma 4's per-layer tables) as stored, and its trainable part's gradients.
    int64_t rootWeightBytes = 0, rootGradientBytes = 0;
    int64_t headCopyBytes = 0;           // autocast copy of lm_head (the embedding is not cast)
    int64_t lmHeadCopyBytes = 0;         // ... of lm_head's own weight alone (Gemma 4's per-layer projection apart)
    int64_t largestNf4Numel = 0;         // qlora: the largest NF4 base (weights), quantised whole at construction
    int64_t nf4Weights = 0;              // part of frozenWeights: qlora's NF4 bases, held whole on every rank
    int64_t trainableParams = 0;
    int64_t totalParams = 0;
    // What CUDA's caching allocator adds to the weights it holds (cudaCachingBlockBytes over every
    // parameter as stored): frozen and trainable.
    int64_t frozenBlockRounding = 0, trainableBlockRounding = 0;
    std::vector<std::string> assumptions;
};

// Bytes per element of a trainable parameter, its gradient and each optimizer state.
// The bytes CUDA's caching allocator counts as allocated for a fresh request of `bytes`: a request
// of 10 MiB or more gets a segment rounded up to 2 MiB, and the rest of it stays with the block
// unless more than 1 MiB is left (CUDACachingAllocator: get_allocation_size, should_split). A 2048 x
// 1408 fp32 expert matrix (11 MiB) holds 12 MiB.
int64_t cudaCachingBlockBytes(int64_t bytes);
int64_t trainableParamBytes(Precision precision);
int64_t frozenParamBytes(Precision precision);
int64_t optimizerStateBytes(Precision precision);
bool usesAutocast(Precision precision);

ModelStateBytes modelStateBytes(const RunConfig &config);

} // namespace pb
