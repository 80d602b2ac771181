#include "estimate/ActivationWalk.h"

namespace pb::activation {

// A sparse layer's MLP on `walk`, the block's walk up to the post-attention norm, whose output
// ([n, h], element size dx2, needing a gradient when y2Grad) it reads. SparseMoe::forward in
// training: the router's logits, softmax in fp32, top-k (renormalised when normalize_top_k), every
// (token, choice) pair sorted by expert (argsort, token = order // k), the permuted copy of the
// tokens, each expert's SwiGLU on its contiguous slice, the concatenated outputs times the pair
// weights, index_add back into [n, h]; the shared expert (and its sigmoid gate) on every token.
// The n*k routed pairs are exact; how they split across experts only moves the per-expert backward
// peaks, for which the split is taken as even. `hAlive`: the post-attention residual when the norm
// does not keep it.
SparseMlpBytes sparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive)
{
    if (config.model.moe.stackedExperts && config.model.moe.scaleExpertInput)
        return inputScaledSparseMlp(config, layer, walk, dx2, y2Grad, residual, hAlive);
    if (config.model.moe.stackedExperts)
        return stackedSparseMlp(config, layer, walk, dx2, y2Grad, residual, hAlive);
    const MoeConfig &moe = config.model.moe;
    const int64_t n = walk.n, c = walk.c, h = config.model.hiddenSize;
    const int64_t experts = std::max<int64_t>(moe.experts, 1), k = moe.expertsPerToken;
    const int64_t ei = moe.expertIntermediateSize, si = moe.sharedExpertIntermediateSize;
    const int64_t nk = n * k;                       // routed (token, choice) pairs, whatever the split
    // Llama 4 scales each expert's input by its weight (flat's dtype), not its output: the outputs
    // are added as they are, in the compute dtype.
    const bool inputScaled = moe.scaleExpertInput;
    const int64_t dOut = inputScaled ? c : std::max(c, dx2); // the experts' output times the weights (flat's dtype): promoted
    const bool mixedCasts = walk.mixed && dx2 == 4; // autocast casts an fp32 input anew for each linear
    const int64_t pd = mixedCasts ? c : dx2;        // the permuted tokens, cast once for all experts under autocast
    const bool hasShared = si > 0, gated = hasShared && moe.sharedExpertGate;
    const bool jitter = moe.routerJitter > 0;
    const Projection &sg = layer.shared.proj[0], &su = layer.shared.proj[1], &sd = layer.shared.proj[2];
    auto tokensOf = [&](size_t e) { // expert e's rows of the permuted tokens under the even split
        const auto i = static_cast<int64_t>(e);
        return nk * (i + 1) / experts - nk * i / experts;
    };
    SparseMlpBytes out;

    bool expertsTrain = false, expertsRead = false;
    // A projection that reads its input tensor itself (an adapter with dropout reads a dropped copy,
    // one over PEFT's cast its own copy; a routed expert's adapter casts nothing).
    const auto readsInput = [&walk, pd](const Projection &p) { return p.trainable || (p.lora && walk.adapterKeepsX(pd)); };
    const auto expertReadsInput = [&walk, pd](const Projection &p) { return p.trainable || (p.lora && !walk.dropsApart(pd)); };
    for (const auto &e : layer.experts) {
        expertsTrain = expertsTrain || e.proj[0].needsGrad() || e.proj[1].needsGrad() || e.proj[2].needsGrad();
        expertsRead = expertsRead || expertReadsInput(e.proj[0]) || expertReadsInput(e.proj[1]);
    }
    const bool sharedTrains = hasShared && (sg.needsGrad() || su.needsGrad() || sd.needsGrad() || (gated && layer.sharedGate.needsGrad()));
    out.trains = expertsTrain || sharedTrains || layer.router.needsGrad();
    const bool routerGrad = y2Grad || layer.router.needsGrad(); // the logits need a gradient
    const bool expertsGrad = y2Grad || expertsTrain;            // the experts' outputs do

    // Router jitter (Mixtral): flat * noise keeps the noise when flat needs a gradient.
    if (jitter && y2Grad)
        walk.saved += dx2 * n * h;
    // flat's own readers: the router, the shared expert's gate and up, its sigmoid gate. Under
    // autocast each keeps its own 16-bit cast; otherwise flat is kept once.
    BlockWalk routerReads(config, n, !walk.meanKeepsInput, walk.cuda), sharedReads(config, n, !walk.meanKeepsInput, walk.cuda);
    // DeepSeek-V3's router reads flat cast to fp32 (a copy where flat is 16-bit), and its matmul
    // keeps that copy's own autocast cast (without autocast, the fp32 copy) for the weight's gradient.
    const bool ownRouterCopy = moe.scoring == RouterScoring::Sigmoid && !inputScaled && dx2 != 4;
    std::vector<Projection> readers;
    if (!ownRouterCopy)
        readers.push_back(layer.router);
    std::vector<Projection> sharedReaders;
    if (hasShared) {
        sharedReaders = {sg, su};
        if (gated)
            sharedReaders.push_back(layer.sharedGate);
        readers.insert(readers.end(), sharedReaders.begin(), sharedReaders.end());
    }
    const bool flatKept = !mixedCasts && std::any_of(readers.begin(), readers.end(), readsInput);
    int64_t sharedReadsKept = 0;
    if (mixedCasts) {
        routerReads.linears(h, dx2, {layer.router});
        sharedReads.linears(h, dx2, sharedReaders);
        sharedReadsKept = sharedReads.saved;
        walk.saved += routerReads.saved + sharedReads.saved;
    } else {
        walk.linears(h, dx2, readers);
        if (ownRouterCopy && layer.router.trainable)
            walk.saved += (walk.mixed ? c : 4) * n * h;
    }
    if (walk.mixed && !y2Grad)
        for (const auto &p : {sg, su})
            out.unkeptCopies += hasShared && p.lora ? 2 * walk.rank * h : 0;
    // softmax(logits, float) keeps its fp32 output; topk its int64 indices; weights / sum keeps the
    // fp32 weights and their sum; the pair weights' index_select keeps `order`.
    if (routerGrad && inputScaled) // Llama 4: topk of the logits keeps its indices, the fp32 sigmoid its output
        walk.saved += 8 * n * k + 4 * n * k + 8 * nk;
    else if (routerGrad && moe.scoring == RouterScoring::Sigmoid) // DeepSeek-V3: sigmoid keeps its output in the logits' dtype, gather its indices
        walk.saved += c * n * experts + 8 * n * k + (moe.normalizeTopK ? c * n * k + c * n : 0) + 8 * nk;
    else if (routerGrad)
        walk.saved += 4 * n * experts + 8 * n * k + (moe.normalizeTopK ? 4 * n * k + 4 * n : 0) + 8 * nk;
    // token = order // k, kept by the permuting index_select and by index_add.
    const bool tokenKept = expertsGrad || routerGrad;
    if (tokenKept)
        walk.saved += 8 * nk;
    // permuted = index_select(flat, token), [n*k, h], cast once to the compute dtype under autocast
    // (the fp32 gather dropped): index_select keeps only its index, but the experts' gate and up
    // read slices of it, so the one tensor is kept.
    const bool permutedKept = expertsRead;
    if (permutedKept)
        walk.saved += pd * nk * h;
    // Llama 4: the gathered tokens times their weights keeps the tokens for the weights' gradient
    // and the weights for the tokens'; the product (cast once under autocast) is what experts read.
    if (inputScaled)
        walk.saved += (routerGrad ? dx2 * nk * h : 0) + (y2Grad ? dx2 * nk : 0);
    const int64_t savedAtPermute = walk.saved;
    // Each expert's SwiGLU on its slice, as the dense MLP: silu keeps gate's output, the product
    // silu(g) and up's output, down its input when it trains.
    std::vector<int64_t> expertKept(layer.experts.size(), 0);
    for (size_t i = 0; i < layer.experts.size(); ++i) {
        const ExpertFlags &e = layer.experts[i];
        BlockWalk ew(config, tokensOf(i), !walk.meanKeepsInput, walk.cuda);
        ew.peftCast = false; // a routed expert's adapters read its slice as it is (LoraLinearImpl::setPeftInputCast)
        ew.linears(h, pd, {e.proj[0], e.proj[1]}, /*inputCounted=*/true);
        const bool gGrad = y2Grad || e.proj[0].needsGrad(), uGrad = y2Grad || e.proj[1].needsGrad();
        ew.saved += (gGrad ? c * ew.n * ei : 0) + (uGrad ? c * ew.n * ei : 0) + (gGrad ? c * ew.n * ei : 0);
        ew.linears(ei, c, {e.proj[2]});
        expertKept[i] = ew.saved;
        walk.saved += ew.saved;
        if (walk.mixed && !y2Grad)
            for (int role : {0, 1})
                out.unkeptCopies += e.proj[role].lora ? 2 * walk.rank * h : 0;
    }
    // cat(outputs) * pairWeights: keeps the concatenation ([n*k, h], compute dtype) when the
    // weights need a gradient, the weights ([n*k, 1], flat's dtype) when the outputs do.
    const int64_t mulKept = inputScaled ? 0 : (routerGrad ? c * nk * h : 0) + (expertsGrad ? dx2 * nk : 0);
    walk.saved += mulKept;
    const int64_t savedAfterMul = walk.saved;
    // index_add's source gradient is grad.index_select(index).expand_as(source): autograd keeps the
    // weighted outputs themselves (seen by the peak recorder, LibTorch 1.13 and 2.11 alike).
    const int64_t outputs = c * nk * h, weighted = inputScaled ? 0 : dOut * nk * h;
    const int64_t indexAddKept = expertsGrad ? (inputScaled ? outputs : weighted) : 0;
    walk.saved += indexAddKept;
    // index_add into zeros_like(flat) keeps `token` and its source, both counted above. The shared expert: the dense MLP of width
    // shared_expert_intermediate_size; its gate's sigmoid keeps its output, and the product keeps
    // that output (the same tensor) and the shared expert's output.
    int64_t sharedKept = 0;
    if (hasShared) {
        const int64_t before = walk.saved;
        const bool gGrad = y2Grad || sg.needsGrad(), uGrad = y2Grad || su.needsGrad();
        walk.saved += (gGrad ? c * n * si : 0) + (uGrad ? c * n * si : 0) + (gGrad ? c * n * si : 0);
        walk.linears(si, c, {sd});
        if (gated) {
            const bool sigGrad = y2Grad || layer.sharedGate.needsGrad();
            const bool sGrad = gGrad || uGrad || sd.needsGrad();
            walk.saved += (sigGrad || sGrad ? c * n : 0) + (sigGrad ? c * n * h : 0);
        }
        sharedKept = walk.saved - before;
    }

    // Grad-mode forward: beside the kept set, the locals of SparseMoe::forward stay alive until it
    // returns (logits, the routing tensors not kept, the permuted tokens, every expert's output,
    // the weighted outputs), with the norm output and the residual held by the block.
    const int64_t common = hAlive + (flatKept ? 0 : dx2 * n * h) + (jitter ? dx2 * n * h : 0) + c * n * experts +
                           (routerGrad ? 0 : 4 * n * experts + 8 * n * k + 8 * nk) +
                           (dx2 != 4 || !(moe.normalizeTopK && routerGrad) ? dx2 * n * k : 0) + (tokenKept ? 0 : 8 * nk) +
                           (expertsGrad ? 0 : dx2 * nk) + (permutedKept ? 0 : pd * nk * h);
    out.forwardPeak = std::max({savedAtPermute + common + (mixedCasts ? dx2 * nk * h : 0), // the gather beside its cast
                                savedAfterMul + common + outputs + (routerGrad ? 0 : outputs) + weighted, // the multiply (and the concatenation)
                                savedAfterMul + common + outputs + weighted + 2 * dOut * n * h,           // index_add: zeros and its result
                                // out + s (on CPU, s cast to out's dtype first where they differ: the mixed-dtype add copies)
                                hasShared ? walk.saved - indexAddKept + common + outputs + weighted + 2 * dx2 * n * h + c * n * h + (!walk.cuda && dx2 != c ? dx2 * n * h : 0) : 0,
                                // the load-balancing statistics: one_hot(chosen) in int64 and its fp32 copy
                                walk.saved - indexAddKept + common + outputs + weighted + dx2 * n * h + 12 * nk * experts});

    // Under no_grad (recompute's forward) nothing is kept: the residual, the norm output, the
    // routing tensors, the permuted tokens, and at worst the last expert's intermediates, the
    // multiply, index_add, the shared expert or the statistics.
    int64_t largest = 0;
    for (size_t i = 0; i < layer.experts.size(); ++i)
        largest = std::max(largest, tokensOf(i));
    const int64_t noGradBase = residual + dx2 * n * h * (jitter ? 2 : 1) + c * n * experts + 4 * n * experts + 8 * n * k + dx2 * n * k +
                               16 * nk + dx2 * nk + pd * nk * h;
    out.noGradLive = noGradBase + std::max({mixedCasts ? dx2 * nk * h : 0, outputs + 4 * c * largest * ei, 2 * outputs + weighted, outputs + weighted + 2 * dx2 * n * h,
                                            hasShared ? outputs + weighted + dx2 * n * h + 4 * c * n * si + c * n * h + (gated ? c * n * h : 0) : 0,
                                            outputs + weighted + dx2 * n * h + 12 * nk * experts});

    // Backward, in the engine's order: the shared expert first (made last), then index_add's
    // gradient, the multiply, the experts from the last to the first, the permuted tokens' gradient
    // scattered back, and the router. Each point: this layer's weight gradients made so far and the
    // live gradients, less the kept tensors already released; the peak is the worst point.
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
        grads += layer.shared.gradBytes[0] + layer.shared.gradBytes[1] + layer.sharedGateGradBytes;
        freed += layer.shared.copyBytes[0] + layer.shared.copyBytes[1] + layer.sharedGateCopyBytes;
        released += sharedKept + sharedReadsKept;
        flatGrad = y2Grad ? dx2 * n * h : 0;
    }
    // index_add's backward gathers the weighted outputs' gradient ([n*k, h]); the multiply makes the
    // outputs' gradient and, for the weights, the full product before it is summed to [n*k, 1].
    if (!inputScaled)
        consider(grads + flatGrad - released + weighted + (expertsGrad ? weighted : 0) + (routerGrad ? weighted : 0));
    released += mulKept + indexAddKept;
    int64_t catGrad = expertsGrad ? c * nk * h : 0;    // split into the experts' views
    const int64_t pairGrad = routerGrad ? dx2 * nk : 0;
    int64_t permutedGrad = 0;
    if (expertsGrad)
        for (size_t i = layer.experts.size(); i-- > 0;) {
            const ExpertFlags &e = layer.experts[i];
            const int64_t ne = tokensOf(i);
            grads += e.gradBytes[2];
            freed += e.copyBytes[2];
            // At its multiply, as the dense MLP: the product's gradient (replacing the product when
            // down kept it), silu(g)'s and up's.
            consider(grads + flatGrad + catGrad + pairGrad + permutedGrad - released + 3 * c * ne * ei - (e.proj[2].needsGrad() ? c * ne * ei : 0));
            if (i == 0)
                catGrad = 0;   // its last view consumed
            grads += e.gradBytes[0] + e.gradBytes[1];
            freed += e.copyBytes[0] + e.copyBytes[1];
            released += expertKept[i] + (i == 0 && permutedKept ? pd * nk * h : 0);
            if (y2Grad) {
                // gate's and up's input gradients, the second added into the first where split's
                // backward keeps each expert's until the last.
                consider(grads + flatGrad + catGrad + pairGrad + permutedGrad + 2 * pd * ne * h - released);
                permutedGrad += pd * ne * h;
            }
        }
    if (y2Grad) {
        // split's backward concatenates them; under autocast the cast's backward makes flat's dtype.
        consider(grads + flatGrad + pairGrad + 2 * pd * nk * h - released);
        if (mixedCasts)
            consider(grads + flatGrad + pairGrad + (pd + dx2) * nk * h - released);
        // Llama 4's input multiply: the incoming gradient, the tokens' and, for the weights, the
        // full product before it is summed to [n*k, 1].
        if (inputScaled)
            consider(grads + flatGrad + pairGrad + (routerGrad ? 3 : 2) * dx2 * nk * h - released);
        permutedGrad = dx2 * nk * h;
        // index_select's backward scatters it back into a zero [n, h].
        consider(grads + flatGrad + pairGrad + permutedGrad + dx2 * n * h - released);
        flatGrad = dx2 * n * h;
    }
    // The router: softmax's gradient in and out ([n, E] fp32), then the linear's input gradient
    // (and its fp32 cast under autocast).
    grads += layer.routerGradBytes;
    freed += layer.routerCopyBytes;
    if (routerGrad)
        consider(grads + flatGrad + 8 * n * experts + (y2Grad ? c * n * h + (mixedCasts ? dx2 * n * h : 0) : 0) - released);
    return out;
}

} // namespace pb::activation
