#pragma once
// Activation memory of one micro-batch through the engine's decoder (model/Transformer.cpp), as
// tensors autograd saves for backward: counted per block by walking the block's operations and
// asking, for each one, what its backward node keeps (a matmul keeps its input only when the
// weight trains; autocast makes a separate 16-bit copy of an fp32 input for each projection; the
// math attention path keeps the B x heads x T x T probabilities, SDPA keeps its output and the
// log-sum-exp instead; a sparse layer's MLP keeps its routing tensors and, for the n*k routed
// (token, choice) pairs, the permuted tokens and each expert's SwiGLU intermediates). Bytes are for
// one device with the config's micro-batch.
#include "config/RunConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

namespace activation {
struct ModelFlags;   // estimate/ActivationWalk.h
}

struct ActivationBytes {
    std::vector<int64_t> savedPerBlock;  // kept for backward by each block (full, no recompute)
    std::vector<int64_t> inputSavedPerBlock; // part of savedPerBlock that is the block input itself
    std::vector<int64_t> rebuiltSavingPerBlock; // what a block rebuilt under recompute keeps less than savedPerBlock
    // Grad-mode forward peak of each block above what was live before it (its input included).
    std::vector<int64_t> forwardAbovePerBlock;
    // Backward of each block, above its kept tensors, the incoming gradient and the gradients made
    // before it: at the MLP's multiply, and at the attention's softmax (there the tensors kept
    // after the attention are already freed, so this can be negative).
    std::vector<int64_t> backwardMlpExtraPerBlock;
    std::vector<int64_t> backwardAttentionExtraPerBlock;
    // ... and first of all at the backward of a norm on the MLP's output (OLMo 2, Gemma, GLM-4),
    // everything the block kept still alive: the norm's temporaries.
    std::vector<int64_t> backwardPostNormExtraPerBlock;
    // Autocast copies of the block's weights already released at those two points (their
    // matmuls' backward ran): down_proj's at the MLP, the MLP's and o_proj's at the softmax.
    std::vector<int64_t> backwardMlpCopiesFreedPerBlock;
    std::vector<int64_t> backwardAttentionCopiesFreedPerBlock;
    int64_t blockInputBytes = 0;         // one residual-stream tensor: what a recomputed block keeps
    int64_t blockNoGradPeak = 0;         // live tensors of a block run under no_grad, above its input
    int64_t headSaved = 0;               // final norm and lm_head inputs
    int64_t headOutputAlive = 0;         // final norm output held (not saved) during the loss
    int64_t logitsForwardPeak = 0;       // logits, fp32 copy and log-softmax during the loss
    int64_t logitsSaved = 0;             // what the loss keeps for backward (log-softmax output)
    int64_t logitsBackwardPeak = 0;      // log-softmax output, its gradient and the logits' gradient
    int64_t finalNormBackwardPeak = 0;   // fused path: the final norm's incoming gradient and its backward's temporaries
    // lora_A's 16-bit autocast copies that no matmul keeps (their input needs no gradient); where
    // autocast caches no weight copies (CPU) they do not outlive their matmul.
    int64_t unkeptAutocastCopies = 0;
    std::vector<int64_t> unkeptCopiesUpToBlock;   // the same, of the blocks up to each one
    int64_t inputBytes = 0;              // token ids and targets of one batch (the estimator adds the prefetched ones)
    int64_t sharedTables = 0;            // rotary cos/sin tables of the step and the window mask the layers share
    int64_t rotaryTables = 0;            // of which the fp32 rotary tables (sharedTables less the window mask)
    bool rotaryKeepsTables = false;      // a fused rotary that passes a gradient keeps the fp32 tables to its backward
    // Held from the embedding to the end of the backward: Gemma 4's per-layer inputs [B, T, layers, P]
    // (model.per_layer_input) with what their making keeps, and under recompute the keys and values
    // that shared layers read (model.kv_shared_layers), saved by each of them.
    int64_t stepHeld = 0;
    int64_t noGradHeld = 0;              // the same under no_grad (validation): the inputs and the shared keys and values
    bool fusedAttention = false;
    std::vector<std::string> assumptions;
};

// `libTorch2`: the LibTorch release is 2.x (its autograd keeps less in places than 1.13's).
// `fusedKernels`: train.kernels = fused runs the CUDA kernels (a CUDA build on a CUDA device),
// not their LibTorch composite stand-ins.
ActivationBytes activationBytes(const RunConfig &config, bool fusedAttentionAvailable, bool libTorch2, bool fusedKernels = false);
// The same from flags already read from the config's parameter table (activation::modelFlags), for
// a caller that walks many micro-batches of one config: `flags` must be modelFlags(config, ...) of
// this config up to its micro-batch and sequence length.
ActivationBytes activationBytes(const RunConfig &config, const activation::ModelFlags &flags, bool fusedAttentionAvailable, bool libTorch2,
                                bool fusedKernels = false);

// qlora: the transient of one NF4 base of `numel` weights dequantised to the compute dtype (element
// size `c`) for a matmul: the matrix, and without the CUDA kernel the composite path's scratch.
int64_t nf4DequantisedBytes(int64_t numel, int64_t c, bool kernel);
// Bytes one logit of a fused linear cross-entropy chunk holds at its worst point: the logits in
// the compute dtype `c`, and without the kernel their fp32 copy (and a soft cap's derivative).
int64_t linearCrossEntropyBytesPerLogit(int64_t c, bool fusedKernels, bool softcap = false);
// The tokens per chunk: as many as keep a chunk within 512 MiB at `bytesPerLogit` (the weight
// gradient then takes a few accumulations a step, not one per hidden-sized chunk), on the CUDA
// kernel's path (`kernel`) at least 4,096 or 2 GiB of logits, whichever is fewer; at least 1, at
// most `tokens`.
int64_t linearCrossEntropyChunkTokens(int64_t tokens, int64_t vocab, int64_t bytesPerLogit, bool kernel = false);
// The elements between two rows of a chunk's logits: on the CUDA kernel's path the vocabulary
// rounded up to 8, so that every row is 16-byte aligned and cuBLAS keeps its Hopper GEMMs (Granite's
// 49,159 tokens fell to sm75 kernels, the head's GEMMs 5x slower on an H100); else the vocabulary.
int64_t linearCrossEntropyRowStride(int64_t vocab, bool kernel);

} // namespace pb
