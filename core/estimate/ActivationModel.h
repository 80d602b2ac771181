#pragma once
// Activation memory of one micro-batch through the engine's decoder (model/Transformer.cpp), as
// tensors autograd saves for backward: counted per block by walking the block's operations and
// asking, for each one, what its backward node keeps (a matmul keeps its input only when the
// weight trains; autocast makes a separate 16-bit copy of an fp32 input for each projection; the
// math attention path keeps the B x heads x T x T probabilities, SDPA keeps its output and the
// log-sum-exp instead). Bytes are for one device with the config's micro-batch.
#include "config/RunConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pb {

struct ActivationBytes {
    std::vector<int64_t> savedPerBlock;  // kept for backward by each block (full, no recompute)
    int64_t blockInputBytes = 0;         // what a recomputed block keeps (its input)
    int64_t blockForwardExtra = 0;       // transient above a block's saved tensors while it runs forward
    int64_t blockNoGradPeak = 0;         // live tensors of a block run under no_grad (recompute's forward)
    int64_t blockBackwardExtra = 0;      // transient gradients while one block runs backward
    int64_t headSaved = 0;               // final norm and lm_head inputs
    int64_t logitsForwardPeak = 0;       // logits, fp32 copy and log-softmax during the loss
    int64_t logitsSaved = 0;             // what the loss keeps for backward (log-softmax output)
    int64_t logitsBackwardPeak = 0;      // log-softmax output, its gradient and the logits' gradient
    int64_t inputBytes = 0;              // token ids and targets of the step plus the prefetched batches
    int64_t sharedTables = 0;            // rotary cos/sin tables of the step
    bool fusedAttention = false;
    std::vector<std::string> assumptions;
};

ActivationBytes activationBytes(const RunConfig &config, bool fusedAttentionAvailable);

} // namespace pb
