#include "model/SinkAttention.h"

#include "engine/TorchCompat.h"

#include <limits>

namespace pb {

namespace {

torch::Tensor seenKeys(const torch::Tensor &keyMask, int64_t t, const torch::Device &device)
{
    if (keyMask.defined())
        return keyMask;
    return torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril();
}

} // namespace

torch::Tensor sinkEagerAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                                 const torch::Tensor &keyMask)
{
    const int64_t b = q.size(0), heads = q.size(1), t = q.size(2);
    const int64_t groups = heads / k.size(1);
    torch::Tensor probabilities;
    {
        // Transformers adds its fp32 mask (or the residual dtype's) and concatenates the sinks'
        // column: both promote the scores; the sinks' dtype stands for both here (they train, or
        // not, together with the embedding). Each score-sized intermediate is released as soon as
        // the next exists: at most two of them (and the kept ones) are alive at a time.
        auto scores = torch::matmul(q, compat::expandKvHeads(k, groups).transpose(-2, -1)) * scale;
        const auto type = c10::promoteTypes(scores.scalar_type(), sinks.scalar_type());
        scores = scores.to(type);
        scores.masked_fill_(seenKeys(keyMask, t, q.device()).logical_not(), -std::numeric_limits<double>::infinity());
        auto combined = torch::cat({scores, sinks.to(type).view({1, heads, 1, 1}).expand({b, heads, t, 1})}, -1);
        scores = torch::Tensor();
        combined = combined - std::get<0>(combined.max(-1, /*keepdim=*/true));
        probabilities = torch::softmax(combined, -1).narrow(-1, 0, t);
    }
    return torch::matmul(probabilities, compat::expandKvHeads(v, groups));
}

SinkKeyInputs sinkKeyInputs(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                            const torch::Tensor &keyMask)
{
    const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
    const int64_t groups = heads / k.size(1);
    // Two extra dimensions carry the sink: its value over the scale split into the part q's dtype
    // holds and the rest, each multiplied by a query's 1, so a 16-bit kernel (which accumulates in
    // fp32) sees the sink to about 16 bits rather than 8.
    const int64_t padded = (d + 2 + 7) / 8 * 8;
    const auto type = q.scalar_type();
    const auto wide = c10::promoteTypes(c10::promoteTypes(sinks.scalar_type(), torch::kFloat), type);
    const auto sink = sinks.to(wide).div(scale);
    const auto high = sink.to(type);
    const auto low = (sink - high.to(wide)).to(type);
    const auto ones = torch::ones({b, heads, t, 2}, q.options());
    SinkKeyInputs in;
    in.q = torch::cat({q, ones, torch::zeros({b, heads, t, padded - d - 2}, q.options())}, -1);
    const auto keys = compat::expandKvHeads(k, groups), values = compat::expandKvHeads(v, groups);
    const auto realKeys = torch::cat({keys, torch::zeros({b, heads, t, padded - d}, k.options())}, -1);
    const auto sinkKey = torch::cat({torch::zeros({heads, d}, k.options()), high.unsqueeze(-1), low.unsqueeze(-1), torch::zeros({heads, padded - d - 2}, k.options())}, -1);
    in.k = torch::cat({realKeys, sinkKey.view({1, heads, 1, padded}).expand({b, heads, 1, padded})}, 2);
    in.v = torch::cat({torch::cat({values, torch::zeros({b, heads, t, padded - d}, v.options())}, -1), torch::zeros({b, heads, 1, padded}, v.options())}, 2);
    in.mask = torch::cat({seenKeys(keyMask, t, q.device()), torch::ones({t, 1}, torch::TensorOptions().dtype(torch::kBool).device(q.device()))}, 1);
    return in;
}

torch::Tensor sinkKeyAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &sinks, double scale,
                               const torch::Tensor &keyMask)
{
    const auto in = sinkKeyInputs(q, k, v, sinks, scale, keyMask);
    torch::Tensor out;
#if PB_TORCH_AT_LEAST(2, 1)
    out = at::scaled_dot_product_attention(in.q, in.k, in.v, in.mask, 0.0, /*is_causal=*/false, scale);
#else
    auto scores = torch::matmul(in.q, in.k.transpose(-2, -1)) * scale;
    scores = scores.masked_fill(in.mask.logical_not(), -std::numeric_limits<double>::infinity());
    out = torch::matmul(torch::softmax(scores, -1), in.v);
#endif
    return out.narrow(-1, 0, q.size(3));
}

} // namespace pb
