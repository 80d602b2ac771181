#include "estimate/GatedDeltaNetWalk.h"

#include <algorithm>
#include <vector>

namespace pb::activation {

// The layer as LibTorch 1.13 / 2.x autograd sees it, op by op, for B x T tokens (`walk.n`), the
// projections in the compute dtype `c` (autocast's), the rule in float32 on T padded to a multiple of
// the chunk (64). Everything scales with T: the chunk's C x C tensors are per chunk, not T x T.
GatedDeltaNetBytes gatedDeltaNet(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx1, bool y1Grad, int64_t b, int64_t t,
                                 bool fusedKernels, int64_t &unkeptCopies)
{
    const LinearAttention &l = config.model.linear;
    const int64_t n = walk.n, c = walk.c, f = 4;
    const int64_t hk = l.keyHeads, hv = l.valueHeads, dk = l.keyHeadDim, dv = l.valueHeadDim, w = l.convKernel;
    const int64_t keyDim = l.keyDim(), valueDim = l.valueDim(), channels = l.convChannels(), h = config.model.hiddenSize;
    const int64_t perKey = hv / std::max<int64_t>(1, hk), kr = hv * dk;   // q and k repeated per value head
    constexpr int64_t chunk = 64;
    const int64_t tp = (t + chunk - 1) / chunk * chunk, np = b * tp, chunks = tp / chunk, bh = b * hv;
    auto proj = [&](const char *name) {
        const auto it = layer.proj.find(name);
        return it == layer.proj.end() ? Projection {} : it->second;
    };
    const bool interleaved = l.layout == LinearAttentionLayout::QkvzBa;
    const std::vector<Projection> readers = interleaved ? std::vector<Projection> {proj("in_proj_qkvz"), proj("in_proj_ba")}
                                                        : std::vector<Projection> {proj("in_proj_qkv"), proj("in_proj_z"), proj("in_proj_b"), proj("in_proj_a")};
    walk.linears(h, dx1, readers, false, false, y1Grad);
    if (walk.mixed && !y1Grad)
        for (const auto &p : readers)
            unkeptCopies += p.lora ? 2 * walk.rank * h : 0;
    GatedDeltaNetBytes out;
    out.grad = y1Grad || std::any_of(readers.begin(), readers.end(), [](const Projection &p) { return p.needsGrad(); }) || layer.convTrains ||
               layer.decayTrains;
    const int64_t y1Alive = walk.mixed && dx1 == 4 ? 4 * n * h : 0;
    // The projections' outputs, counted whole through the layer (z and a keep them whole where they
    // are views, one value head per key head; else their copies and the conv's input stand in).
    const int64_t projected = c * n * (2 * keyDim + 2 * valueDim + 2 * hv);
    // Under no_grad nothing is kept, but the rule's locals live until it returns (model/
    // GatedDeltaRule.cpp): the layer's z, beta, a, the conv's SiLU output, g and the repeated q and k;
    // in the rule, in fp32 over the padded T, k, v, beta, the scaled q, vBeta, kBeta, the summed g,
    // the decays, the scores, the inverse, the masked q k^T scores, q * exp(g) and k * exp(gLast - g)
    // (the C x C four per chunk), the value and kCumDecay in the matmuls' dtype, the masks and the
    // chunk ends' decay.
    const int64_t m = walk.mixed ? c : f;   // the rule's matmuls: autocast's dtype, else fp32
    const int64_t copy = walk.mixed ? c : 0; // an operand's autocast copy (without it the operand itself)
    // With one value head per key head, z and a are views that keep in_proj_qkvz's and in_proj_ba's
    // whole outputs; otherwise reshape copies them.
    const bool viewsOfProjections = interleaved && perKey == 1;
    const int64_t zAndA = viewsOfProjections ? c * n * (2 * keyDim + 2 * valueDim) + 2 * c * n * hv : c * n * valueDim + c * n * hv;
    const int64_t ruleLocals = zAndA + c * n * hv + c * n * channels + 4 * n * hv + (perKey > 1 ? 2 * c * n * kr : 0) +
                               f * np * (5 * kr + 2 * valueDim + 2 * hv) + 4 * f * np * chunk * hv + 2 * chunk * chunk + m * np * (valueDim + kr) +
                               f * bh * chunks;
    const int64_t state = f * bh * dk * dv;
    int64_t loopPeak = 0;
    if (config.train.kernels == KernelPath::Fused) {
        // The chunk loop's node: fp32 copies of kCumDecay and the value beside the scan's outputs
        // (the state entering each chunk, the final one, the new values) and, without the CUDA
        // kernel, the composite scan's state, its product with the decay, the next state and one
        // chunk's new values; or, the copies released, the output and the second matmul's product.
        const int64_t scanOut = state * chunks + state + f * np * valueDim;
        loopPeak = std::max((m != f ? f * np * (valueDim + kr) : 0) + scanOut + (fusedKernels ? 0 : 3 * state + f * bh * chunk * dv),
                            scanOut + 2 * f * np * valueDim);
    } else {
        // In the last chunk: every chunk's output (the matmuls' dtype), the state entering it, its
        // product with the decay and the next state, the new values, k * exp(gLast - g)'s product
        // with them and, under autocast, that 16-bit product's fp32 cast which CPU's mixed-dtype add
        // makes (a CUDA kernel casts in registers: one state over there). Or at the output's
        // contiguous copy: the outputs, their stack, the state, then the cast to the input's dtype
        // where that differs.
        loopPeak = std::max(m * np * valueDim + 3 * state + m * bh * chunk * dv + m * bh * dk * dv + (m != f ? state : 0),
                            state + 2 * m * np * valueDim + m * n * valueDim + (m != c ? c * n * valueDim : 0));
    }
    out.noGradLive = dx1 * n * h + ruleLocals + loopPeak;
    if (!out.grad) {
        walk.linears(valueDim, c, {proj("out_proj")}, false, false, false);
        out.forwardAbove = walk.saved + out.noGradLive;
        out.backwardAt = walk.saved;
        return out;
    }
    // beta = sigmoid(b): its output. The causal conv keeps its input ([q | k | v], a new tensor) and
    // SiLU its input: the conv's whole output over T + kernel - 1 positions.
    walk.saved += c * n * hv + c * n * channels + c * b * channels * (t + w - 1);
    // g = -exp(A_log) * softplus(a.float() + dt_bias): softplus keeps its fp32 input, the product
    // its output where A_log trains.
    walk.saved += 4 * n * hv + (layer.decayTrains ? 4 * n * hv : 0);
    // L2 norm of q and k (x * rsqrt(sum(x^2))): x itself (the repeated copies, or views of SiLU's
    // output keeping it whole) and the per-row rsqrt.
    walk.saved += (perKey > 1 ? 2 * c * n * kr : c * n * channels) + 2 * c * n * hv;
    // The rule in fp32 over the padded T: v and beta (kept by v * beta), k and beta (k * beta), the
    // scaled q (per chunk q * exp(g)), kBeta (kBeta * exp(g)); exp(g) and the decays' exponential
    // and its masked copy ([chunk, chunk] per chunk).
    walk.saved += f * np * (valueDim + hv) + f * np * kr + f * np * kr + f * np * kr + f * np * hv + 2 * f * np * chunk * hv;
    // The matmuls' operands: under autocast 16-bit copies of kBeta and k (their product with the
    // decay keeps the 16-bit product too), of the inverse (fp32, kept by itself) twice, of vBeta and
    // of kBeta * exp(g); without it (fp32, pure bf16: the rule runs in fp32) the matmuls keep the
    // fp32 tensors themselves, so vBeta and kBeta * exp(g) are kept and nothing else is added.
    // kCumDecay (the matmuls' dtype): kept by the loop's matmuls where there is more than one chunk,
    // by the fused loop's node always. The two masks (bool, C x C) are kept by masked_fill.
    const bool fusedLoop = config.train.kernels == KernelPath::Fused;
    const int64_t kCumDecayKept = fusedLoop || chunks > 1 ? m * np * kr : 0;
    walk.saved += 2 * copy * np * kr + m * np * chunk * hv + f * np * chunk * hv + 2 * copy * np * chunk * hv + m * np * valueDim + m * np * kr +
                  kCumDecayKept + 2 * chunk * chunk;
    const int64_t beforeLoop = walk.saved;
    int64_t atStack = 0;
    if (fusedLoop || !walk.mixed) {
        // The batched terms (16-bit copies of q and k under autocast, their product kept by the
        // decay's product, exp(g) and exp(gLast - g), the chunk ends' decay), then in fp32 the masked
        // scores, q * exp(g), k * exp(gLast - g), the state entering each chunk and the new values:
        // kept by the fused loop's node, or without autocast by the loop's own matmuls (each chunk's
        // view keeps its whole tensor). There, with one chunk, the final state is dropped and with
        // its update k * exp(gLast - g), that exponential and the end decay.
        const int64_t endKept = fusedLoop || chunks > 1 ? 1 : 0;
        walk.saved += chunks * (2 * copy * bh * chunk * dk + m * bh * chunk * chunk + (1 + endKept) * 4 * bh * chunk + endKept * 4 * bh) +
                      chunks * f * bh * (chunk * chunk + (1 + endKept) * chunk * dk + dk * dv + chunk * dv);
    }
    if (fusedLoop) {
        // In the node: fp32 copies of kCumDecay and the value during the scan (and without the CUDA
        // kernel the composite scan's state, its product with the decay, the next state and one
        // chunk's new values), or its two products at the output's sum; the value and the final
        // state beside them.
        const int64_t inNode = std::max((m != f ? f * np * kr + f * np * valueDim : 0) + (fusedKernels ? 0 : 3 * state + f * bh * chunk * dv),
                                        2 * f * np * valueDim) + m * np * valueDim + f * bh * dk * dv;
        atStack = walk.saved + inNode + projected + y1Alive;
    } else {
        if (walk.mixed) {
            // Per chunk: 16-bit copies of q and k, their product (kept by the decay's product) and
            // the masked scores' copy, two 16-bit copies of the state, the new values, exp(g); after
            // the first chunk, q * exp(g)'s copy; for all but the last, the fp32 state, k * exp(gLast -
            // g)'s copy and that exponential.
            walk.saved += chunks * (2 * c * bh * chunk * dk + 2 * c * bh * chunk * chunk + 2 * c * bh * dk * dv + c * bh * chunk * dv + 4 * bh * chunk) +
                          (chunks - 1) * (c * bh * chunk * dk + 4 * bh * dk * dv + c * bh * chunk * dk + 4 * bh * chunk);
        }
        // At the loop's end: the chunks' outputs, their stack and the value (the matmuls' dtype).
        atStack = walk.saved + 3 * m * np * valueDim + projected + y1Alive;
    }
    const int64_t afterLoop = walk.saved;
    // z's gradient (made by the gated norm's backward, waiting for the projections' backward, the
    // last in the layer) is alive at both points below.
    const bool zGrad = y1Grad || proj(interleaved ? "in_proj_qkvz" : "in_proj_z").needsGrad();
    const int64_t zGradient = zGrad ? c * n * valueDim : 0;
    // The backward of the masked q k^T scores (computed for all chunks before the loop, on both
    // paths), once the loop's and the output's gradients have been made: still kept, what was saved
    // before them (less the scaled q, kept by q * exp(g) alone under autocast, and kCumDecay, kept
    // by the loop alone) and their own (the 16-bit q and k and their product, or in fp32 the
    // product); the gradients made for earlier tensors (q's and k's in fp32, the value's and
    // kCumDecay's, g's); then masked_fill's gradient, the product's gradients for the decays and
    // for q k^T (fp32, its input in fp32 where the product is 16-bit) and that one's cast to the
    // matmul's dtype. The peak recorder on CPU, one qwen3_next layer at vocabulary 16 under
    // bf16-mixed: -9.2% (eager) and -4.1% (fused) without this point.
    const int64_t atScoresBackward = zGradient + beforeLoop - (walk.mixed ? f * np * kr : 0) - kCumDecayKept + 2 * copy * np * kr +
                                     m * np * chunk * hv + 2 * f * np * kr + m * np * (valueDim + kr) + f * np * hv + 3 * f * np * chunk * hv +
                                     (m != f ? m * np * chunk * hv : 0);
    // Then the inverse's backward, after the value's and kCumDecay's matmuls have made its gradient:
    // their operands released (the 16-bit inverse twice, vBeta's and kBeta * exp(g)'s copies, or
    // in fp32 those two themselves), the scores' too; alive, the gradients of q, k, kBeta, vBeta, g
    // and the decays (fp32), then the inverse's gradient, X^T G, X^T G X^T and its lower part
    // (fp32, X's). In fp32 this is the peak (-3.2% and -4.9% without it, full and LoRA, on CPU).
    const int64_t atInverseBackward = zGradient + beforeLoop - 2 * copy * np * chunk * hv - m * np * (valueDim + kr) - kCumDecayKept - f * np * kr +
                                      3 * f * np * kr + f * np * valueDim + f * np * hv + 5 * f * np * chunk * hv;
    const int64_t scoresOrInverseBackward = std::max(atScoresBackward, atInverseBackward);
    // The gated RMSNorm over Dv (fp32): h = x.float() (kept by pow and the rsqrt product; pow's
    // output too where mean keeps its input), rsqrt's output; weight * h' keeps h' cast back where the
    // weight trains; the product (the weight's dtype) and silu(z.float())'s output kept by the gate's
    // product, silu's fp32 input.
    const int64_t dw = layer.gatedNormTrains ? trainableParamBytes(config.train.precision) : frozenParamBytes(config.train.precision);
    walk.saved += 4 * n * valueDim + (walk.meanKeepsInput ? 4 * n * valueDim : 0) + 4 * n * hv + (layer.gatedNormTrains ? c * n * valueDim : 0) +
                  std::max(c, dw) * n * valueDim + 4 * n * valueDim + 4 * n * valueDim;
    const int64_t atNorm = walk.saved + c * n * valueDim + 3 * 4 * n * valueDim + projected + y1Alive;
    walk.linears(valueDim, c, {proj("out_proj")});
    out.forwardAbove = std::max(atStack, atNorm);
    if (fusedLoop) {
        // The node's backward, its saved tensors alive: the output's gradient (fp32, padded), then
        // during the scan kCumDecay's fp32 copy (under autocast), intra^T dOut, the state's gradient entering each
        // chunk, the new values' and the final one; at its end the new values' and the four inputs'
        // gradients (fp32) with the 16-bit casts of kCumDecay's and the value's (under autocast).
        const int64_t states = f * bh * chunks * dk * dv;
        const int64_t scan = (m != f ? f * np * kr : 0) + f * np * valueDim + states + f * np * valueDim + f * bh * dk * dv;
        const int64_t end = f * np * valueDim + 3 * f * np * kr + f * np * chunk * hv + (m != f ? m * np * kr + m * np * valueDim : 0);
        out.backwardAt = std::max(afterLoop + f * np * valueDim + std::max({scan, f * np * valueDim + 2 * states + f * np * kr, end}),
                                  scoresOrInverseBackward);
        return out;
    }
    // Backward through the chunk loop: every select's gradient is the whole tensor's, accumulated:
    // q's and k's (fp32), the value's and kCumDecay's (the matmuls' dtype), the decays' and g's (fp32), and one
    // more of the largest being added.
    out.backwardAt = std::max(beforeLoop + 2 * f * np * kr + m * np * valueDim + m * np * kr + f * np * chunk * hv + f * np * hv +
                                  std::max(f * np * chunk * hv, f * np * kr),
                              scoresOrInverseBackward);
    return out;
}

} // namespace pb::activation
