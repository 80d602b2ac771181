#include "estimate/ActivationWalk.h"

namespace pb::activation {

// A sparse layer's MLP of stacked experts (gpt-oss; model/SparseMoe.cpp with model/StackedExperts.cpp)
// on `walk`, the block's walk up to the post-attention norm, whose output ([n, h], element size
// dx2, needing a gradient when y2Grad) it reads. The router's logits (biased where the model has
// the bias), top-k and a softmax over the k (gpt-oss) or over all experts then top-k; the (token,
// choice) pairs sorted by expert, the permuted tokens, one matmul per expert on its slice of the
// stacked gate_up_proj (plus its bias row, which promotes to the bias's dtype), the activation
// (gpt-oss's clamped SwiGLU, or SwiGLU), down_proj (plus bias), the concatenated outputs times the
// pair weights, index_add back into [n, h]. Seen by the peak recorder on CPU per op (tst_cli_pilot's
// gpt_oss rows). The split across experts is taken as even where a per-expert peak depends on it.
SparseMlpBytes stackedSparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive)
{
    const MoeConfig &moe = config.model.moe;
    const int64_t n = walk.n, c = walk.c, h = config.model.hiddenSize;
    const int64_t experts = std::max<int64_t>(moe.experts, 1), k = moe.expertsPerToken;
    const int64_t ei = moe.expertIntermediateSize, nk = n * k;
    const bool mixedCasts = walk.mixed && dx2 == 4;
    const int64_t pd = mixedCasts ? c : dx2;        // the permuted tokens, cast once under autocast
    const Projection &gateUp = layer.stacked.proj[0], &down = layer.stacked.proj[2];
    // Element sizes: a bias row added to a matmul's 16-bit output promotes it to the bias's dtype
    // (an fp32 master under autocast); the logits are autocast's dtype, else flat's.
    const int64_t biasBytes = moe.expertBias ? (gateUp.trainable ? trainableParamBytes(config.train.precision) : frozenParamBytes(config.train.precision)) : c;
    const int64_t dGu = std::max(c, biasBytes), dOut = std::max(c, biasBytes), dWeighted = std::max(dOut, dx2);
    const int64_t dLogits = walk.mixed ? c : dx2;
    SparseMlpBytes out;
    const bool expertsTrain = gateUp.needsGrad() || down.needsGrad();
    out.trains = expertsTrain || layer.router.needsGrad() || layer.routerBiasTrains;
    const bool routerGrad = y2Grad || layer.router.needsGrad() || layer.routerBiasTrains;
    const bool expertsGrad = y2Grad || expertsTrain;

    // The router's linear over flat (under autocast its own 16-bit cast of an fp32 flat).
    if (mixedCasts) {
        BlockWalk routerReads(config, n, !walk.meanKeepsInput, walk.cuda);
        routerReads.linears(h, dx2, {layer.router});
        walk.saved += routerReads.saved;
    } else {
        walk.linears(h, dx2, {layer.router});
    }
    // The routing: the fp32 softmax over every expert (the load-balancing loss differentiates it),
    // the chosen weights' softmax output (gpt-oss) or the renormalisation, topk's indices, `order`.
    if (routerGrad)
        walk.saved += 4 * n * experts + 8 * n * k + (moe.softmaxAfterTopK ? dLogits * n * k : (moe.normalizeTopK ? 4 * n * k + 4 * n : 0)) + 8 * nk;
    const bool tokenKept = expertsGrad || routerGrad;
    if (tokenKept)
        walk.saved += 8 * nk;
    // The permuted tokens: each expert's gate_up matmul keeps its slice when the weights train.
    const bool permutedKept = gateUp.needsGrad();
    if (permutedKept)
        walk.saved += pd * nk * h;
    const int64_t savedAtPermute = walk.saved;
    // The activation keeps, per routed row: gate_up's biased output (the clamps and the gate's view
    // of it), and for the clamped form the clamped gate, sigmoid's output, gate * sigmoid and up + 1;
    // for SwiGLU silu's output. down's matmul keeps the activation (its 16-bit cast) when it trains.
    const int64_t activationKept = expertsGrad ? dGu * nk * (moe.swigluLimit > 0 ? 6 * ei : 3 * ei) : 0;
    walk.saved += activationKept + (down.needsGrad() ? c * nk * ei : 0);
    // cat(outputs) * pairWeights keeps the concatenation when the weights need a gradient, the
    // weights when the outputs do; index_add keeps its source, the weighted outputs cast to flat's
    // dtype (a 16-bit copy where the experts' biases made them fp32 and flat is 16-bit: gpt-oss on
    // the fused path, +64 KiB a layer of its CPU fixture when the fp32 product was counted).
    const int64_t mulKept = (routerGrad ? dOut * nk * h : 0) + (expertsGrad ? dx2 * nk : 0);
    walk.saved += mulKept;
    const int64_t indexAddKept = expertsGrad ? dx2 * nk * h : 0;
    walk.saved += indexAddKept;

    // Grad-mode forward: beside the kept set, SparseMoe::forward's locals (logits, the routing
    // tensors not kept, the permuted tokens, the stacked weights' 16-bit casts are counted with the
    // weights), the norm output and the residual held by the block.
    const int64_t outputs = dOut * nk * h, weighted = dWeighted * nk * h;
    const int64_t common = hAlive + (mixedCasts ? dx2 * n * h : 0) + dLogits * n * experts + (routerGrad ? 0 : 4 * n * experts + 8 * n * k + 8 * nk) +
                           (tokenKept ? 0 : 8 * nk) + (permutedKept ? 0 : pd * nk * h);
    const int64_t perExpert = nk / experts + (nk % experts ? 1 : 0);
    out.forwardPeak = std::max({savedAtPermute + common + (mixedCasts ? dx2 * nk * h : 0),
                                // one expert's activation: gate_up's 16-bit output beside the biased one and its temporaries
                                walk.saved - indexAddKept - mulKept + common + outputs + perExpert * (c * 2 * ei + 2 * dGu * ei),
                                walk.saved - indexAddKept + common + outputs + weighted,
                                walk.saved + common + outputs + weighted + 2 * dx2 * n * h,
                                walk.saved + common + outputs + weighted + dx2 * n * h + 12 * nk * experts});
    out.noGradLive = residual + dx2 * n * h + dLogits * n * experts + 4 * n * experts + 8 * n * k + dx2 * n * k + 16 * nk + dx2 * nk + pd * nk * h +
                     std::max({mixedCasts ? dx2 * nk * h : 0, outputs + perExpert * (c * 2 * ei + 6 * dGu * ei + c * ei + c * h), 2 * outputs + weighted,
                               outputs + weighted + 2 * dx2 * n * h, outputs + weighted + dx2 * n * h + 12 * nk * experts});

    // Backward, in the engine's order: index_add's and the multiply's gradients, the experts from
    // the last to the first (the stacked weights' gradients made at the first, as unbind's backward
    // stacks them), the permuted tokens' gradient scattered back, the router.
    int64_t grads = 0, released = 0, freed = 0, best = 0;
    auto consider = [&](int64_t live) {
        if (live - freed > best) {
            best = live - freed;
            out.backwardExtra = live;
            out.backwardCopiesFreed = freed;
        }
    };
    consider(weighted + (expertsGrad ? weighted : 0) + (routerGrad ? weighted : 0));
    released += mulKept + indexAddKept;
    const int64_t catGrad = expertsGrad ? dOut * nk * h : 0;
    const int64_t pairGrad = routerGrad ? dx2 * nk : 0;
    if (expertsGrad) {
        // At one expert's activation backward: the gradients of its clamps' and products' outputs
        // and of gate_up's biased output (the gate and up halves as two [ne, 2I] scatters).
        consider(catGrad + pairGrad - released + perExpert * (c * h + 5 * dGu * ei + 3 * dGu * 2 * ei));
        grads += layer.stacked.gradBytes[0] + layer.stacked.gradBytes[2];
        freed += layer.stacked.copyBytes[0] + layer.stacked.copyBytes[2];
        released += activationKept + (down.needsGrad() ? c * nk * ei : 0) + (permutedKept ? pd * nk * h : 0);
        // unbind's backward stacks every expert's weight gradients in the compute dtype, cast to
        // the weights' dtype after.
        if (expertsTrain)
            consider(grads + catGrad + pairGrad + (y2Grad ? pd * nk * h : 0) - released);
    }
    int64_t flatGrad = 0;
    if (y2Grad) {
        consider(grads + pairGrad + 2 * pd * nk * h - released + (mixedCasts ? dx2 * nk * h : 0));
        consider(grads + pairGrad + dx2 * nk * h + dx2 * n * h - released);
        flatGrad = dx2 * n * h;
    }
    grads += layer.routerGradBytes;
    freed += layer.routerCopyBytes;
    if (routerGrad)
        consider(grads + flatGrad + 8 * n * experts + (y2Grad ? c * n * h + (mixedCasts ? dx2 * n * h : 0) : 0) - released);
    return out;
}

} // namespace pb::activation
