#include "model/GatedDeltaRule.h"

#include "model/GatedDeltaScan.h"

#include <cmath>
#include <vector>

namespace pb {

namespace {

// The row recurrence's result with the inverse's derivative as its backward (see the header).
struct UnitLowerInverseFunction : public torch::autograd::Function<UnitLowerInverseFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &a)
    {
        // One batched unit-triangular solve (I - A) X = I, where Transformers' loop updates one row
        // at a time: that is C (64) launches of five kernels per layer, and the card's qwen3-next
        // step was bound by launches (10,819 kernels for 59 ms of kernel time in a 205 ms step).
        // The same inverse, rounded differently: float64 tests see no difference, fp32 ~1e-7.
        const auto eye = torch::eye(a.size(-1), a.options());
        const auto x = torch::linalg_solve_triangular(-a.tril(-1), eye.expand(a.sizes()), /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
        ctx->save_for_backward({x});
        return x;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        // X = (I - A)^-1, so dX = X dA X and dL/dA = X^T G X^T; A's diagonal and upper part never
        // reach X.
        const auto x = ctx->get_saved_variables()[0];
        const auto xt = x.transpose(-2, -1);
        return {torch::matmul(torch::matmul(xt, grads[0]), xt).tril(-1)};
    }
};

torch::ScalarType computeType(const torch::Tensor &t) { return c10::promoteTypes(t.scalar_type(), torch::kFloat); }

// [B, T, H, ...] -> [B, H, T, ...] in `type`.
torch::Tensor headsFirst(const torch::Tensor &t, torch::ScalarType type) { return t.transpose(1, 2).contiguous().to(type); }

void checkShapes(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &g, const torch::Tensor &beta,
                 const torch::Tensor &initialState)
{
    TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), "gated delta rule: q and k must be [B, T, H, Dk], got ", q.sizes(), " and ", k.sizes());
    TORCH_CHECK(v.dim() == 4 && v.size(0) == q.size(0) && v.size(1) == q.size(1) && v.size(2) == q.size(2),
                "gated delta rule: v must be [B, T, H, Dv] with q's B, T, H, got ", v.sizes());
    TORCH_CHECK(g.sizes() == q.sizes().slice(0, 3) && beta.sizes() == g.sizes(), "gated delta rule: g and beta must be [B, T, H], got ", g.sizes(),
                " and ", beta.sizes());
    if (initialState.defined())
        TORCH_CHECK(initialState.dim() == 4 && initialState.size(0) == q.size(0) && initialState.size(1) == q.size(2)
                        && initialState.size(2) == q.size(3) && initialState.size(3) == v.size(3),
                    "gated delta rule: the initial state must be [B, H, Dk, Dv], got ", initialState.sizes());
}

} // namespace

torch::Tensor gatedDeltaL2Norm(const torch::Tensor &x, double eps) { return x * torch::rsqrt((x * x).sum(-1, /*keepdim=*/true) + eps); }

torch::Tensor unitLowerInverse(const torch::Tensor &a) { return UnitLowerInverseFunction::apply(a); }

GatedDeltaRuleResult chunkGatedDeltaRule(const torch::Tensor &qIn, const torch::Tensor &kIn, const torch::Tensor &vIn, const torch::Tensor &gIn,
                                         const torch::Tensor &betaIn, int64_t chunkSize, const torch::Tensor &initialState,
                                         bool outputFinalState, bool l2NormQk, bool fusedLoop)
{
    checkShapes(qIn, kIn, vIn, gIn, betaIn, initialState);
    TORCH_CHECK(chunkSize > 0, "gated delta rule: the chunk size must be positive");
    const auto outputType = qIn.scalar_type();
    const auto type = computeType(qIn);
    // Transformers normalises before the cast, in the input's dtype.
    auto q = headsFirst(l2NormQk ? gatedDeltaL2Norm(qIn) : qIn, type);
    auto k = headsFirst(l2NormQk ? gatedDeltaL2Norm(kIn) : kIn, type);
    auto v = headsFirst(vIn, type);
    auto g = headsFirst(gIn, type);
    auto beta = headsFirst(betaIn, type);
    const int64_t b = k.size(0), heads = k.size(1), t = k.size(2), dk = k.size(3), dv = v.size(3);

    // Zeros to a multiple of the chunk: a padded token has no key, value or beta and a decay of 1,
    // so it changes neither the real tokens' outputs nor the state.
    const int64_t pad = (chunkSize - t % chunkSize) % chunkSize;
    if (pad > 0) {
        q = torch::constant_pad_nd(q, {0, 0, 0, pad});
        k = torch::constant_pad_nd(k, {0, 0, 0, pad});
        v = torch::constant_pad_nd(v, {0, 0, 0, pad});
        beta = torch::constant_pad_nd(beta, {0, pad});
        g = torch::constant_pad_nd(g, {0, pad});
    }
    const int64_t chunks = (t + pad) / chunkSize;
    if (chunks == 0) {
        GatedDeltaRuleResult empty;
        empty.output = torch::zeros({b, 0, heads, dv}, vIn.options().dtype(outputType));
        if (outputFinalState)
            empty.finalState = initialState.defined() ? initialState.to(v.options()) : torch::zeros({b, heads, dk, dv}, v.options());
        return empty;
    }
    q = q * (1.0 / std::sqrt(static_cast<double>(dk)));
    const auto vBeta = v * beta.unsqueeze(-1);
    const auto kBeta = k * beta.unsqueeze(-1);
    auto inChunks = [&](const torch::Tensor &x) { return x.reshape({b, heads, chunks, chunkSize, x.size(-1)}); };
    q = inChunks(q);
    k = inChunks(k);
    const auto kBetaC = inChunks(kBeta), vBetaC = inChunks(vBeta);
    // The decays within a chunk: cumulative from its start; decay[i, j] = exp(g_i - g_j) for j <= i
    // (the difference masked before the exponential, so the upper part cannot overflow).
    g = g.reshape({b, heads, chunks, chunkSize}).cumsum(-1);
    const auto decay = (g.unsqueeze(-1) - g.unsqueeze(-2)).tril().exp().tril();
    const auto boolOptions = torch::TensorOptions().dtype(torch::kBool).device(q.device());
    const auto diagonalAndUpper = torch::ones({chunkSize, chunkSize}, boolOptions).triu(0);
    const auto strictlyUpper = torch::ones({chunkSize, chunkSize}, boolOptions).triu(1);

    // The chunk's keys against each other: T = (I + strictly-lower(beta k k^T decay))^-1.
    const auto attn = -(torch::matmul(kBetaC, k.transpose(-1, -2)) * decay).masked_fill(diagonalAndUpper, 0);
    const auto inverse = unitLowerInverse(attn);
    const auto value = torch::matmul(inverse, vBetaC);
    const auto kCumDecay = torch::matmul(inverse, kBetaC * g.exp().unsqueeze(-1));

    // Everything that does not read the state, for all chunks at once; the loop keeps only what
    // carries the state from one chunk to the next. Each batched tensor is unbound once: a select
    // per chunk would give each chunk's gradient the whole tensor's size in the backward.
    const auto intraAll = (torch::matmul(q, k.transpose(-1, -2)) * decay).masked_fill(strictlyUpper, 0);
    const auto gLast = g.narrow(-1, chunkSize - 1, 1);   // [B, H, N, 1]
    const auto qDecayed = q * g.exp().unsqueeze(-1);
    const auto kToEnd = (k * (gLast - g).exp().unsqueeze(-1)).transpose(-1, -2);
    GatedDeltaRuleResult result;
    if (fusedLoop) {
        const auto loop = fusedChunkLoop(kCumDecay, value, qDecayed, intraAll, kToEnd, gLast.exp().squeeze(-1),
                                         initialState.defined() ? initialState.to(v.options()) : initialState);
        // To q's dtype before the transpose's copy: one 16-bit copy under autocast, not an fp32 one.
        const auto out = loop.output.reshape({b, heads, chunks * chunkSize, dv}).narrow(2, 0, t).to(outputType);
        result.output = out.transpose(1, 2).contiguous();
        if (outputFinalState)
            result.finalState = loop.finalState;
        return result;
    }
    const auto endDecay = gLast.exp().unsqueeze(-1);     // [B, H, N, 1, 1]
    const auto intra = intraAll.unbind(2), qd = qDecayed.unbind(2), kEnd = kToEnd.unbind(2), values = value.unbind(2),
               kCum = kCumDecay.unbind(2), ends = endDecay.unbind(2);
    auto state = initialState.defined() ? initialState.to(v.options()) : torch::zeros({b, heads, dk, dv}, v.options());
    std::vector<torch::Tensor> outputs;
    outputs.reserve(static_cast<size_t>(chunks));
    for (size_t i = 0; i < static_cast<size_t>(chunks); ++i) {
        const auto vNew = values[i] - torch::matmul(kCum[i], state);
        outputs.push_back(torch::matmul(qd[i], state) + torch::matmul(intra[i], vNew));
        state = state * ends[i] + torch::matmul(kEnd[i], vNew);
    }
    auto out = torch::stack(outputs, 2).reshape({b, heads, chunks * chunkSize, dv}).narrow(2, 0, t);
    result.output = out.transpose(1, 2).contiguous().to(outputType);
    if (outputFinalState)
        result.finalState = state;
    return result;
}

GatedDeltaRuleResult recurrentGatedDeltaRule(const torch::Tensor &qIn, const torch::Tensor &kIn, const torch::Tensor &vIn, const torch::Tensor &gIn,
                                             const torch::Tensor &betaIn, const torch::Tensor &initialState, bool outputFinalState, bool l2NormQk)
{
    checkShapes(qIn, kIn, vIn, gIn, betaIn, initialState);
    const auto outputType = qIn.scalar_type();
    const auto type = computeType(qIn);
    auto q = headsFirst(l2NormQk ? gatedDeltaL2Norm(qIn) : qIn, type);
    const auto k = headsFirst(l2NormQk ? gatedDeltaL2Norm(kIn) : kIn, type);
    const auto v = headsFirst(vIn, type);
    const auto g = headsFirst(gIn, type);
    const auto beta = headsFirst(betaIn, type);
    const int64_t b = k.size(0), heads = k.size(1), t = k.size(2), dk = k.size(3), dv = v.size(3);
    q = q * (1.0 / std::sqrt(static_cast<double>(dk)));

    auto state = initialState.defined() ? initialState.to(v.options()) : torch::zeros({b, heads, dk, dv}, v.options());
    std::vector<torch::Tensor> outputs;
    outputs.reserve(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) {
        const auto qt = q.select(2, i), kt = k.select(2, i), vt = v.select(2, i);
        state = state * g.select(2, i).exp().unsqueeze(-1).unsqueeze(-1);
        const auto remembered = (state * kt.unsqueeze(-1)).sum(-2);   // S^T k [B, H, Dv]
        const auto delta = (vt - remembered) * beta.select(2, i).unsqueeze(-1);
        state = state + kt.unsqueeze(-1) * delta.unsqueeze(-2);
        outputs.push_back((state * qt.unsqueeze(-1)).sum(-2));
    }
    GatedDeltaRuleResult result;
    const auto out = t > 0 ? torch::stack(outputs, 2) : torch::zeros({b, heads, 0, dv}, v.options());
    result.output = out.transpose(1, 2).contiguous().to(outputType);
    if (outputFinalState)
        result.finalState = state;
    return result;
}

} // namespace pb
