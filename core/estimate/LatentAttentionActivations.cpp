#include "estimate/LatentAttentionWalk.h"

namespace pb::activation {

LatentAttentionBytes latentAttention(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx1, bool y1Grad, bool fusedAvailable,
                                     int64_t &unkeptCopies)
{
    const ModelShape &m = config.model;
    const LatentAttention &l = m.latent;
    const int64_t b = config.train.microBatch, t = config.train.seqLen, n = walk.n, c = walk.c, h = m.hiddenSize, heads = m.attentionHeads;
    const int64_t qk = l.qkHeadDim(), qkDim = heads * qk, vDim = heads * l.vHeadDim, kvDim = heads * (l.qkNopeHeadDim + l.vHeadDim);
    const int64_t rope = l.qkRopeHeadDim, compressedDim = l.kvLoraRank + rope;
    const int64_t scores = c * b * heads * t * t;
    auto proj = [&](const char *name) {
        const auto it = layer.proj.find(name);
        return it == layer.proj.end() ? Projection {} : it->second;
    };
    // The latent norms train with the model (full fine-tuning); their weights are stored as the others.
    const bool normTrains = config.train.mode == TrainMode::Full;
    const int64_t normWeightBytes = normTrains ? trainableParamBytes(config.train.precision) : frozenParamBytes(config.train.precision);
    // The softmax scale is qk_head_dim^-0.5 unless YaRN's mscale_all_dim changes it; SDPA without a
    // scale argument, or no SDPA, then takes Transformers' eager form (model/LatentAttention.cpp).
    const bool rescaled = m.ropeScaling.type != RopeScalingType::None && m.ropeScaling.mscaleAllDim != 0 && m.ropeScaling.factor > 1;
    const bool eagerForm = usesEagerAttentionForm(0.0, fusedAvailable, false, rescaled);
    const bool fusedKernel = fusedAvailable && !eagerForm;
    LatentAttentionBytes out;
    out.outputWidth = vDim;
    out.fusedKernel = fusedKernel;

    // The block norm's output feeds the query's first projection and kv_a_proj_with_mqa.
    const auto first = l.qLoraRank > 0 ? proj("q_a_proj") : proj("q_proj"), kvA = proj("kv_a_proj_with_mqa"), kvB = proj("kv_b_proj");
    walk.linears(h, dx1, {first, kvA}, false, false, y1Grad);
    if (walk.mixed && !y1Grad)
        for (const auto &p : {first, kvA})
            unkeptCopies += p.lora ? 2 * walk.rank * h : 0;
    bool qGrad = y1Grad || first.needsGrad();
    int64_t latentNormOut = 0; // the norms' outputs, alive only while their projection runs
    if (l.qLoraRank > 0) {
        // q_a_layernorm over the query latent (its output promoted to an fp32 weight's dtype), then q_b_proj.
        const auto qB = proj("q_b_proj");
        bool normGrad = false;
        const int64_t dq = walk.norm(l.qLoraRank, c, qGrad, normTrains, normWeightBytes, normGrad);
        walk.linears(l.qLoraRank, dq, {qB}, false, false, normGrad);
        if (walk.mixed && !normGrad)
            unkeptCopies += qB.lora ? 2 * walk.rank * l.qLoraRank : 0;
        qGrad = normGrad || qB.needsGrad();
        latentNormOut = std::max(latentNormOut, dq * n * l.qLoraRank);
    }
    // kv_a_layernorm over the key/value latent, then kv_b_proj up to every head's key and value.
    const bool kvAGrad = y1Grad || kvA.needsGrad();
    bool kvNormGrad = false;
    const int64_t dkv = walk.norm(l.kvLoraRank, c, kvAGrad, normTrains, normWeightBytes, kvNormGrad);
    walk.linears(l.kvLoraRank, dkv, {kvB}, false, false, kvNormGrad);
    if (walk.mixed && !kvNormGrad)
        unkeptCopies += kvB.lora ? 2 * walk.rank * l.kvLoraRank : 0;
    const bool kvGrad = kvNormGrad || kvB.needsGrad();
    latentNormOut = std::max(latentNormOut, dkv * n * l.kvLoraRank);
    out.grad = qGrad || kvGrad || kvAGrad;

    // The rotary part: the tables cast once to the compute dtype (the fused rotary reads the fp32
    // ones, and so does the eager one over an fp32 input, as Transformers does).
    const bool fusedRotary = config.train.kernels == KernelPath::Fused;
    const int64_t rotaryCasts = !fusedRotary && c != 4 && dx1 != 4 && !config.model.traits.ropeFp32 ? 2 * c * t * rope : 0;
    // Alive in the attention's frame, not kept: the projections' outputs (queries, the compressed
    // latent with the rotary key, every head's key and value), the turned rotary query, and the
    // concatenated query and key.
    const int64_t frame = c * n * (qkDim + compressedDim + kvDim + heads * rope) + 2 * c * n * qkDim;
    const int64_t y1Alive = walk.mixed && dx1 == 4 ? 4 * n * h : 0;
    if (out.grad) {
        if (fusedKernel) {
            // SDPA keeps the query and key as given, the value (a view of kv_b_proj's output, whose
            // whole storage stays), its output and the fp32 log-sum-exp.
            walk.saved += c * n * 2 * qkDim + c * n * kvDim + c * n * vDim + 4 * b * heads * t + rotaryCasts;
            out.atAttention = walk.saved;
            out.forwardAbove = walk.saved + y1Alive + frame - c * n * kvDim;
        } else {
            // Math path: the bmms keep contiguous copies of the query, the key and the value; the
            // softmax keeps its output (eager form: the fp32 probabilities and their cast), which
            // the second bmm keeps too; masked_fill keeps the T x T mask.
            const int64_t probabilities = eagerForm && c != 4 ? scores * 4 / c + scores : scores;
            walk.saved += c * n * (2 * qkDim + vDim) + t * t + probabilities + rotaryCasts;
            out.atAttention = walk.saved;
            // At the second bmm: the masked scores and the output beside the kept set and the frame.
            out.forwardAbove = walk.saved + scores + c * n * vDim + frame + y1Alive;
        }
    } else {
        out.atAttention = walk.saved;
    }
    out.forwardAbove = std::max(out.forwardAbove, walk.saved + latentNormOut + y1Alive);
    // Backward at the softmax: its input and output gradients (eager: two fp32 ones, the 16-bit
    // probabilities released) and the value's gradient in place of the value, which the second bmm
    // alone kept (peak recorder on CPU, the deepseek_v3 fixture with recompute: one [n, v width]
    // above it with both); the fused kernel's q, k, v gradients.
    const int64_t eagerGrads = 2 * (scores / c) * 4 - (c != 4 ? scores : 0);
    out.softmaxGrads = fusedKernel ? c * n * (2 * qkDim + vDim) : (eagerForm ? eagerGrads : 2 * scores);
    // Under no_grad: the block norm's output, the frame, the table casts and, at the second bmm,
    // the scores, the probabilities, the value's copy, the output and the mask.
    out.noGradLive = dx1 * n * h + frame + rotaryCasts + (fusedKernel ? c * n * vDim : 2 * scores + 2 * c * n * vDim + t * t);
    return out;
}

} // namespace pb::activation
