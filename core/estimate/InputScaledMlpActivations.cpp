#include "estimate/ActivationWalk.h"

namespace pb::activation {

// Llama 4's sparse MLP (model/SparseMoe.cpp with scale_expert_input and model/StackedExperts.cpp)
// on `walk`, the block's walk up to the post-attention norm, whose output ([n, h], element size dx2,
// needing a gradient when y2Grad) it reads. The router's logits (autocast's dtype, else flat's), top-k
// of them, the sigmoid of the chosen in fp32; the (token, choice) pairs sorted by expert; the
// gathered tokens times their weights (flat's dtype, cast once under autocast) as the experts' input;
// one matmul per expert on its slice of gate_up_proj, SwiGLU, down_proj; the outputs index_added as
// they are into [n, h] in the compute dtype; the shared expert on every token, added to them. No
// load-balancing statistics need a gradient (Llama4ForCausalLM adds no auxiliary loss). The split
// across experts is taken as even where a per-expert peak depends on it.
SparseMlpBytes inputScaledSparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive)
{
    const MoeConfig &moe = config.model.moe;
    const int64_t n = walk.n, c = walk.c, h = config.model.hiddenSize;
    const int64_t experts = std::max<int64_t>(moe.experts, 1), k = moe.expertsPerToken;
    const int64_t ei = moe.expertIntermediateSize, si = moe.sharedExpertIntermediateSize, nk = n * k;
    const bool mixedCasts = walk.mixed && dx2 == 4;
    const int64_t pd = mixedCasts ? c : dx2;        // the scaled tokens as the experts read them
    const int64_t dLogits = walk.mixed ? c : dx2;
    const bool hasShared = si > 0;
    const Projection &gateUp = layer.stacked.proj[0], &down = layer.stacked.proj[2];
    const Projection &sg = layer.shared.proj[0], &su = layer.shared.proj[1], &sd = layer.shared.proj[2];
    SparseMlpBytes out;
    const bool expertsTrain = gateUp.needsGrad() || down.needsGrad();
    const bool sharedTrains = hasShared && (sg.needsGrad() || su.needsGrad() || sd.needsGrad());
    out.trains = expertsTrain || sharedTrains || layer.router.needsGrad();
    const bool routerGrad = y2Grad || layer.router.needsGrad();
    const bool expertsGrad = y2Grad || expertsTrain;

    // flat's readers: the router and the shared expert's gate and up (each its own 16-bit cast of an
    // fp32 flat under autocast; otherwise flat kept once).
    std::vector<Projection> sharedReaders;
    if (hasShared)
        sharedReaders = {sg, su};
    int64_t sharedReadsKept = 0;
    if (mixedCasts) {
        BlockWalk routerReads(config, n, !walk.meanKeepsInput, walk.cuda), sharedReads(config, n, !walk.meanKeepsInput, walk.cuda);
        routerReads.linears(h, dx2, {layer.router});
        sharedReads.linears(h, dx2, sharedReaders);
        sharedReadsKept = sharedReads.saved;
        walk.saved += routerReads.saved + sharedReads.saved;
    } else {
        std::vector<Projection> readers {layer.router};
        readers.insert(readers.end(), sharedReaders.begin(), sharedReaders.end());
        walk.linears(h, dx2, readers);
    }
    if (walk.mixed && !y2Grad)
        for (const auto &p : {sg, su})
            out.unkeptCopies += hasShared && p.lora ? 2 * walk.rank * h : 0;
    // topk keeps its indices, the fp32 sigmoid its output, the weights' index_select `order`.
    if (routerGrad)
        walk.saved += 8 * n * k + 4 * n * k + 8 * nk;
    const bool tokenKept = expertsGrad || routerGrad;
    if (tokenKept)
        walk.saved += 8 * nk; // token, kept by the gather and by index_add
    // The multiply keeps the gathered tokens for the weights' gradient and the weights for the
    // tokens'; the experts' gate_up matmul keeps its (cast) input when the stacked weights train.
    const int64_t inputMulKept = (routerGrad ? dx2 * nk * h : 0) + (y2Grad ? dx2 * nk : 0);
    walk.saved += inputMulKept;
    const bool scaledKept = gateUp.needsGrad();
    if (scaledKept)
        walk.saved += pd * nk * h;
    const int64_t savedAtPermute = walk.saved;
    // SwiGLU per routed row: gate_up's output (the halves' views), silu's output; down keeps the
    // product when it trains.
    const int64_t activationKept = expertsGrad ? c * nk * 3 * ei : 0;
    walk.saved += activationKept + (down.needsGrad() ? c * nk * ei : 0);
    // index_add keeps its source, the experts' outputs.
    const int64_t outputs = c * nk * h;
    const int64_t indexAddKept = expertsGrad ? outputs : 0;
    walk.saved += indexAddKept;
    // The shared expert, as the dense MLP of width si: silu keeps gate's output, the product silu(g)
    // and up's output, down its input when it trains.
    int64_t sharedKept = 0;
    if (hasShared) {
        const int64_t before = walk.saved;
        const bool gGrad = y2Grad || sg.needsGrad(), uGrad = y2Grad || su.needsGrad();
        walk.saved += (gGrad ? c * n * si : 0) + (uGrad ? c * n * si : 0) + (gGrad ? c * n * si : 0);
        walk.linears(si, c, {sd});
        sharedKept = walk.saved - before;
    }

    // Grad-mode forward: beside the kept set, SparseMoe::forward's locals (logits, the routing
    // tensors not kept, the gathered and scaled tokens), the norm output and the residual.
    const int64_t common = hAlive + (mixedCasts ? dx2 * n * h : 0) + dLogits * n * experts + (routerGrad ? 0 : 8 * n * k + 8 * nk) + (tokenKept ? 0 : 8 * nk) +
                           (routerGrad ? 0 : dx2 * nk * h) + (scaledKept ? 0 : pd * nk * h);
    const int64_t perExpert = nk / experts + (nk % experts ? 1 : 0);
    out.forwardPeak = std::max({savedAtPermute + common + (mixedCasts ? dx2 * nk * h : 0), // the scaled tokens beside their cast
                                walk.saved - indexAddKept - sharedKept + common + outputs + perExpert * 4 * c * ei,
                                walk.saved - sharedKept + common + outputs + 2 * c * n * h,  // index_add: zeros and its result
                                walk.saved + common + 3 * c * n * h,                          // shared + routed
                                walk.saved + common + c * n * h + 12 * nk * experts});        // one_hot statistics
    out.noGradLive = residual + dx2 * n * h + dLogits * n * experts + 8 * n * k + 4 * n * k + 16 * nk + dx2 * nk + dx2 * nk * h + pd * nk * h +
                     std::max({outputs + perExpert * 4 * c * ei, outputs + 2 * c * n * h, c * n * h + 4 * c * n * si + 2 * c * n * h,
                               c * n * h + 12 * nk * experts});

    // Backward, in the engine's order: the shared expert (made last), index_add's gradient (the
    // outputs'), the experts, the multiply, the gather's scatter back, the router.
    int64_t grads = 0, released = 0, freed = 0, best = 0;
    auto consider = [&](int64_t live) {
        if (live - freed > best) {
            best = live - freed;
            out.backwardExtra = live;
            out.backwardCopiesFreed = freed;
        }
    };
    int64_t flatGrad = 0;
    if (hasShared) {
        grads += layer.shared.gradBytes[2];
        freed += layer.shared.copyBytes[2];
        consider(grads + 3 * c * n * si - (sd.needsGrad() ? c * n * si : 0));
        grads += layer.shared.gradBytes[0] + layer.shared.gradBytes[1];
        freed += layer.shared.copyBytes[0] + layer.shared.copyBytes[1];
        released += sharedKept + sharedReadsKept;
        flatGrad = y2Grad ? dx2 * n * h : 0;
    }
    const int64_t outGrad = expertsGrad ? c * nk * h : 0;
    const int64_t pairGrad = routerGrad ? dx2 * nk : 0;
    consider(grads + flatGrad + outGrad - released);
    released += indexAddKept;
    if (expertsGrad) {
        // At one expert's activation backward: the gradients of the product, silu's and gate_up's output.
        consider(grads + flatGrad + outGrad + pairGrad - released + perExpert * (c * h + 4 * c * ei + 2 * c * 2 * ei));
        grads += layer.stacked.gradBytes[0] + layer.stacked.gradBytes[2];
        freed += layer.stacked.copyBytes[0] + layer.stacked.copyBytes[2];
        released += activationKept + (down.needsGrad() ? c * nk * ei : 0) + (scaledKept ? pd * nk * h : 0);
        if (expertsTrain)
            consider(grads + flatGrad + outGrad + pairGrad + (y2Grad ? pd * nk * h : 0) - released);
    }
    if (y2Grad || routerGrad) {
        // The multiply: its incoming gradient (cast back to flat's dtype), the tokens' and, for the
        // weights, the full product before it is summed to [n*k, 1].
        consider(grads + flatGrad + pairGrad + (mixedCasts ? pd * nk * h : 0) + (y2Grad ? 2 : 1) * dx2 * nk * h + (routerGrad ? dx2 * nk * h : 0) - released);
        released += inputMulKept;
    }
    if (y2Grad) {
        // index_select's backward scatters the tokens' gradient back into a zero [n, h].
        consider(grads + flatGrad + pairGrad + dx2 * nk * h + dx2 * n * h - released);
        flatGrad += dx2 * n * h;
    }
    grads += layer.routerGradBytes;
    freed += layer.routerCopyBytes;
    if (routerGrad)
        consider(grads + flatGrad + 4 * n * k * 2 + 4 * n * experts + (y2Grad ? c * n * h + (mixedCasts ? dx2 * n * h : 0) : 0) - released);
    return out;
}

} // namespace pb::activation
