#pragma once
// Internal to the engine (includes torch): gpt-oss's attention sinks. Each head has a learned logit
// that joins every query's softmax as one more column and is dropped after it, so the weights of
// the real keys sum to less than 1 (Transformers' GptOss eager_attention_forward).
#include <torch/torch.h>

namespace pb {

// The composite, as Transformers' eager form: q [B, H, T, D], k and v [B, KV, T, D], sinks [H];
// the scores in promote(scores, sinks)'s dtype, the row maximum subtracted, the softmax in that
// dtype, the sink's column dropped. `keyMask` [T, T]: true where a key is seen; undefined: causal.
torch::Tensor sinkEagerAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                                 const torch::Tensor &keyMask);

// The same on a fused kernel, which has no sinks: one key more whose score is the sink. Queries
// gain a dimension of 1 (split in two, see the .cpp), keys 0 there and the sink key sink / scale;
// the sink key's value is 0; the head dimension is padded with zeros to a multiple of 8; a boolean
// mask [T, T + 1] shows every query the sink key. Returns [B, H, T, D].
struct SinkKeyInputs {
    torch::Tensor q, k, v, mask;   // [B, H, T, D'], [B, H, T + 1, D'] (k and v expanded to every head), [T, T + 1]
};
SinkKeyInputs sinkKeyInputs(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                            const torch::Tensor &keyMask);
// scaled_dot_product_attention on sinkKeyInputs where the build has it; elsewhere (LibTorch 1.13)
// the same inputs through a plain masked softmax, so the construction itself is testable.
torch::Tensor sinkKeyAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                               const torch::Tensor &keyMask);

} // namespace pb
