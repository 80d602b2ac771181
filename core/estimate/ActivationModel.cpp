#include "estimate/ActivationModel.h"

#include "config/AttentionKernels.h"
#include "config/Nf4Format.h"
#include "estimate/ActivationWalk.h"
#include "estimate/GatedDeltaNetWalk.h"
#include "estimate/LatentAttentionWalk.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace pb {

// The walk's pieces (estimate/ActivationWalk.h), internal to the estimator.
using namespace activation;

namespace {
// Whether the fused path folds each block's output add into the next norm (model/Transformer.h's
// DecoderBlockImpl::defersOutputAdd): a norm before attention, nothing after the output's add.
bool layersFoldOutputAdd(const ModelShape &m)
{
    return !blockNormNames(m).beforeAttention.empty() && m.traits.perLayerInput == 0 && !m.traits.layerScalar;
}
} // namespace

int64_t nf4DequantisedBytes(int64_t numel, int64_t c, bool kernel)
{
    if (numel == 0)
        return 0;
    // The composite path (model/Nf4.cpp) works a slice of 2^20 weights at a time: their codes as
    // int64, the block maxima repeated per weight and its index, the looked-up values and their
    // product (20 bytes a weight), beside the fp32 maxima of the whole matrix and their parts.
    const int64_t slice = std::min<int64_t>(numel, 1 << 20);
    const int64_t blocks = (numel + kNf4BlockSize - 1) / kNf4BlockSize;
    return c * numel + (kernel ? 0 : 20 * slice + 3 * 4 * blocks);
}

int64_t linearCrossEntropyBytesPerLogit(int64_t c, bool fusedKernels, bool softcap)
{
    // softcap without the kernel: tanh's derivative of the chunk, in the logits' dtype, beside them
    // (the kernel recomputes it in its second pass).
    return (fusedKernels || c == 4 ? c : c + 4) + (softcap && !fusedKernels ? c : 0);
}

int64_t linearCrossEntropyChunkTokens(int64_t tokens, int64_t vocab, int64_t bytesPerLogit, bool kernel)
{
    constexpr int64_t budget = 512LL * 1024 * 1024;
    const int64_t perToken = std::max<int64_t>(1, vocab * bytesPerLogit);
    int64_t chunk = budget / perToken;
    // Every chunk's weight-gradient GEMM reads and writes the head's whole fp32 [vocab, hidden]
    // gradient: about 280 / chunk tokens of that GEMM's time on an H100, whatever the widths. On the
    // kernel's path a chunk takes at least 4,096 tokens (7%), or 2 GiB of logits where that is fewer:
    // a Gemma-3-12B step ran 1.082x faster at 4,096 than at the budget's 1,024 (H100,
    // bench_probe_overhead --loss-chunk-ab 4096), for 1.5 GiB more at its 262,144 tokens of vocabulary.
    if (kernel)
        chunk = std::max(chunk, std::min<int64_t>(4096, (2LL << 30) / perToken));
    return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(tokens, 1));
}

int64_t linearCrossEntropyRowStride(int64_t vocab, bool kernel) { return kernel ? (vocab + 7) / 8 * 8 : vocab; }

ActivationBytes activationBytes(const RunConfig &config, bool fusedAttentionAvailable, bool libTorch2, bool fusedKernels)
{
    return activationBytes(config, modelFlags(config, parameterTable(config)), fusedAttentionAvailable, libTorch2, fusedKernels);
}

ActivationBytes activationBytes(const RunConfig &config, const ModelFlags &flags, bool fusedAttentionAvailable, bool libTorch2, bool fusedKernels)
{
    const ModelShape &m = config.model;
    const TrainConfig &train = config.train;
    const int64_t b = train.microBatch, t = train.seqLen, n = b * t;
    const int64_t h = m.hiddenSize, heads = m.attentionHeads;
    const int64_t vocab = m.vocabSize;
    const int64_t c = train.precision == Precision::Fp32 ? 4 : 2;
    // Element size of a parameter as the engine stores it: trainable fp32 masters (bf16 under pure
    // bf16), frozen ones in the compute dtype.
    auto paramBytes = [&](bool trains) { return trains ? trainableParamBytes(train.precision) : frozenParamBytes(train.precision); };
    const bool fused = fusedAttentionAvailable && train.attention != AttentionImpl::Math;
    const int64_t scores = c * b * heads * t * t;   // one B x heads x T x T tensor

    ActivationBytes out;
    out.fusedAttention = fused;
    const bool embeddingTrains = flags.embeddingTrains, finalNormTrains = flags.finalNormTrains, headTrains = flags.headTrains;
    const std::vector<LayerFlags> &layers = flags.layers;
    // PEFT's enable_input_require_grads: recomputed blocks over a frozen embedding ask for grad.
    bool gradFlows = embeddingTrains || (train.recompute && !embeddingTrains);
    // The residual stream keeps the embedding's dtype: adding a 16-bit block output to an fp32
    // stream stays fp32, and a frozen 16-bit embedding (LoRA under autocast) makes it 16-bit.
    const int64_t r = paramBytes(embeddingTrains);

    const ModelTraits &traits = m.traits;
    // The dense MLP's form: the fused gated activation (SwiGLU, GeGLU), on separate gate and up
    // projections or on a fused gate_up_proj's output (fusedGatedActivationPacked).
    const bool fusedGate = train.kernels == KernelPath::Fused && m.activation != ActivationKind::Gelu;
    int64_t noGradPeak = 0;
    bool anySparse = false;
    int64_t layerIndex = -1;

    // Gemma 4's per-layer inputs (model.per_layer_input): [n, layers, P] in the wider of the table's
    // dtype and the compute dtype, needing a gradient where the table trains or the projection of the
    // (gradient-carrying) embedding does; each layer reads its slice.
    const int64_t pli = traits.perLayerInput;
    const int64_t dp = std::max(c, paramBytes(flags.perLayerTableTrains));
    const bool pliGrad = pli > 0 && (flags.perLayerTableTrains || flags.perLayerNormTrains || flags.perLayerModelProjection.needsGrad() || gradFlows);
    // Gemma 4's shared keys and values: per source layer, the bytes of its keys and values (and
    // with them their gradients in backward).
    std::map<int64_t, int64_t> sharedKvBytes;
    // Whether a sliding layer reads the shared window mask (not all of them on flash's own window).
    bool slidingOnMask = false;
    for (const auto &layer : layers) {
        ++layerIndex;
        const int64_t inter = m.intermediateAt(layerIndex);
        const bool sharedKv = m.kvShared(layerIndex);
        // The layer's attention shapes (Gemma 4's global layers have their own).
        const int64_t hd = m.headDimAt(layerIndex), kvHeads = m.kvHeadsAt(layerIndex);
        const int64_t qDim = heads * hd, kvDim = kvHeads * hd;
        const int64_t groups = std::max<int64_t>(1, heads / std::max<int64_t>(1, kvHeads));
        const int64_t rotaryDim = m.rotaryDimAt(layerIndex);
        const bool plainRotary = rotaryDim == hd && !traits.ropeInterleaved;   // the fused rotary's form
        const bool rescaled = !usesDefaultAttentionScale(m, hd);
        const bool hasRope = traits.usesRope(layerIndex);
        const bool sliding = m.usesSliding(layerIndex);
        // A window, or Llama 4's chunks where the sequence spans more than one (the engine's mask).
        const bool window = sliding || (traits.usesChunks(layerIndex) && t > traits.attentionChunk);
        // cos/sin cast per layer to the compute dtype (none for a layer without rotary).
        const int64_t rotaryCasts = c != 4 && hasRope && !traits.ropeFp32 ? 2 * c * t * rotaryDim : 0;
        // Transformers' eager attention (model/Transformer.cpp's eagerAttention) where the fused kernel
        // cannot take the layer: soft-capped logits, or a window or scale without a fused kernel.
        // gpt-oss's sinks: Transformers' eager composite without a fused kernel, else the kernel
        // with one more key (model/SinkAttention.h), on every layer.
        const bool eagerForm = traits.attentionSinks ? !fused : usesEagerAttentionForm(traits.attentionSoftcap, fused, window, rescaled);
        // Soft-capped scores on the fused path of a CUDA device: the capped softmax's kernel
        // (model/FusedOps.h's cappedSoftmax) between the two bmms, which keeps the scores and two
        // fp32 numbers a row where eager kept tanh's output, the fp32 probabilities and a mask.
        const bool cappedKernel = fusedKernels && train.kernels == KernelPath::Fused && traits.attentionSoftcap > 0 && !traits.attentionSinks;
        const int64_t rowStats = cappedKernel ? 8 * b * heads * t : 0;
        // The composite's [B, heads, T, T + 1] tensors, in the dtype the sinks promote the scores to
        // (fp32 for trained sinks under autocast, else the compute dtype).
        const int64_t sinkDtype = traits.attentionSinks ? std::max(c, layer.sinksTrain ? trainableParamBytes(train.precision) : frozenParamBytes(train.precision)) : 0;
        const int64_t sinkScores = sinkDtype * b * heads * t * (t + 1);
        const bool layerFused = fused && !eagerForm;
        auto proj = [&](const char *name) {
            const auto it = layer.proj.find(name);
            return it == layer.proj.end() ? Projection {} : it->second;
        };
        BlockWalk walk(config, n, libTorch2, fusedKernels);
        bool y1Grad = false;
        int64_t dx1 = r;
        if (layer.normExists[0]) {
            dx1 = walk.norm(h, r, gradFlows, layer.normTrains[0], paramBytes(layer.normTrains[0]), y1Grad, true);
        } else {
            // Post-norm (OLMo 2): q, k, v read the block's input itself.
            y1Grad = gradFlows;
        }
        const auto q = proj("q_proj"), k = proj("k_proj"), v = proj("v_proj"), o = proj("o_proj"), qkvFused = proj("qkv_proj");
        const std::vector<Projection> qkvReaders = traits.fusedQkv ? std::vector<Projection> {qkvFused} : std::vector<Projection> {q, k, v};
        // fp8: q, k, v (and gate, up) cast their input once for all (LoraLinearImpl::forwardShared).
        const bool float8Shared = isFp8(config.train.precision) && train.mode != TrainMode::Qlora;
        // (Only where one of them keeps it as it is: an adapter whose dropout runs apart, or one over
        // PEFT's cast, keeps a copy of its own.)
        if (!layer.normExists[0] && !(walk.mixed && r == 4) && walk.keepsInputItself(qkvReaders, r))
            walk.inputSaved += r * n * h;
        // Rebuilt under recompute, the block's input is a leaf that requires grad, and autocast
        // caches the cast of such a tensor: q, k and v of a post-norm block share one 16-bit copy
        // of an fp32 input where the first forward made one each (peak recorder on CPU, the olmo2
        // parity config, full fine-tuning under bf16-mixed: the rebuilt block 2 copies lighter).
        int64_t rebuiltSaving = 0;
        if (!layer.normExists[0] && walk.mixed && r == 4) {
            // (fp8's shared cast of q, k and v is a plain cast, made once in either forward.)
            const auto castFor = std::count_if(qkvReaders.begin(), qkvReaders.end(),
                                               [float8Shared](const Projection &p) { return p.lora || (p.trainable && !p.float8Input && !float8Shared); });
            rebuiltSaving = castFor > 1 ? (castFor - 1) * c * n * h : 0;
        }
        // Gated DeltaNet (model.linear_attention) has a walk of its own (gatedDeltaNet above); the
        // attention's below runs on no projection of this layer and is replaced by it.
        const bool linearLayer = m.linear.linear(layerIndex);
        const int64_t savedBeforeAttention = walk.saved;
        // DeepSeek-V3's latent attention has a walk of its own (estimate/LatentAttentionWalk.h).
        const bool latent = m.latent.enabled();
        LatentAttentionBytes mla;
        if (latent)
            mla = latentAttention(config, layer, walk, dx1, y1Grad, fused, out.unkeptAutocastCopies);
        else
            walk.linears(h, dx1, qkvReaders, false, float8Shared, y1Grad);
        bool qkvGrad = latent ? mla.grad : y1Grad || std::any_of(qkvReaders.begin(), qkvReaders.end(), [](const Projection &p) { return p.needsGrad(); });
        // A matmul keeps its weight only to pass a gradient to its input: over an input that
        // needs none (LoRA's first block without recompute), lora_A's 16-bit copy is not kept.
        if (walk.mixed && !y1Grad && !latent)
            for (const auto &p : qkvReaders)
                out.unkeptAutocastCopies += p.lora ? 2 * walk.rank * h : 0;
        // q/k norm (model.qk_norm): an RMSNorm on the projections' outputs (compute dtype) before
        // the rotary, per head (rows of head_dim) or over the whole projection. Its output takes the
        // weight's dtype where that is wider (an fp32 master under autocast), and so do q and k
        // after the rotary (k is promoted by q's tables).
        int64_t dq = c, dk = c, dkr = c;
        if (m.qkNorm == QkNorm::Head || m.qkNorm == QkNorm::Full) {
            const bool perHead = m.qkNorm == QkNorm::Head;
            BlockWalk qWalk(config, perHead ? n * heads : n, libTorch2), kWalk(config, perHead ? n * kvHeads : n, libTorch2);
            bool qOut = false, kOut = false;
            dq = qWalk.norm(perHead ? hd : qDim, c, y1Grad || q.needsGrad(), layer.qNormTrains, paramBytes(layer.qNormTrains), qOut);
            dk = kWalk.norm(perHead ? hd : kvDim, c, y1Grad || k.needsGrad(), layer.kNormTrains, paramBytes(layer.kNormTrains), kOut);
            walk.saved += qWalk.saved + (sharedKv ? 0 : kWalk.saved); // a shared layer has no k norm
            dkr = std::max(dk, dq);
            qkvGrad = qkvGrad || qOut || kOut;
        }
        const int64_t savedThroughQkNorm = walk.saved;   // what the block still keeps when the q norm's backward runs
        // cos/sin are cast to q's dtype: the compute dtype, or, for an fp32 q under a 16-bit compute
        // dtype, fp32 (no copy of the fp32 tables of an fp32 residual stream). The eager path turns
        // q and k by the tables in the attention input's dtype, as Transformers does: over an fp32
        // input, the fp32 tables themselves, shared by every layer.
        // The fused rotary (q and k of one dtype) reads the fp32 tables as they are.
        const bool fusedRotary = train.kernels == KernelPath::Fused && dq == dk && plainRotary;
        // ... and keeps them for its backward (model/FusedOps.cpp's RotaryFunction) where q or k
        // takes a gradient: past the blocks, to the loss (peak recorder on CPU, LoRA on the fused
        // path without recompute: the tables alive at the chunked loss).
        out.rotaryKeepsTables = out.rotaryKeepsTables || (fusedRotary && hasRope && !latent && !linearLayer && qkvGrad);
        // Llama 4's L2 norm of q and k after the rotary (rotary layers): x.float() * rsqrt(mean(x^2) + eps)
        // keeps its fp32 input (autocast's copy, or the fp32 rotary output itself), the per-row
        // rsqrt and, where mean keeps its input (LibTorch 1.13), the fp32 squares; its output, cast
        // back, is what attention reads.
        if (m.qkNorm == QkNorm::L2 && hasRope && qkvGrad)
            walk.saved += 4 * n * (qDim + kvDim) * (walk.meanKeepsInput ? 2 : 1) + 4 * b * t * (heads + kvHeads);
        // Gemma 4's value norm (model.value_norm): v.float() * rsqrt(mean(v^2) + eps), cast back. It
        // keeps the fp32 values (v itself when fp32; k_proj's output, already kept by the k norm,
        // where the values are the keys' projection in fp32), the per-row rsqrt and, where mean keeps
        // its input (LibTorch 1.13), the squares.
        if (traits.valueNorm && qkvGrad && !linearLayer && !latent && !sharedKv) {
            const bool sharedWithKeyNorm = c == 4 && m.valuesFromKeys(layerIndex) && (m.qkNorm == QkNorm::Head || m.qkNorm == QkNorm::Full);
            walk.saved += (sharedWithKeyNorm ? 0 : 4 * n * kvDim) + (walk.meanKeepsInput ? 4 * n * kvDim : 0) + 4 * b * t * kvHeads;
        }
        const int64_t layerRotaryCasts = !hasRope || fusedRotary || traits.ropeFp32 || (train.kernels == KernelPath::Eager && dx1 == 4) ? 0 : dq == 4 && c != 4 ? (r == 4 ? 0 : 2 * 4 * t * rotaryDim) : rotaryCasts;
        // An fp32 q has no fused GQA kernel (flash takes 16-bit only, memory-efficient has no GQA),
        // so the engine expands k and v to all heads before SDPA (compat::groupedCausalAttention):
        // the kernel keeps the expanded copies and the projections' own k and v stay alive beside
        // them. q is fp32 under fp32, and under autocast after a q_norm with an fp32 weight.
        // A window goes to SDPA as a mask, and the kernels that take one have no grouped heads either.
        // (So does a head wider than the grouped-head kernels take: Gemma 4's global heads.)
        // A sliding layer on the fused path of a CUDA device takes flash's own window instead
        // (model/WindowedAttention.h): grouped heads as they are, where q, k and v are 16-bit.
        const bool windowKernel = fusedKernels && libTorch2 && train.kernels == KernelPath::Fused && sliding && layerFused &&
                                  !traits.attentionSinks && c != 4 && dq == c && dkr == c && hd <= kSharedHeadsMaxHeadDim && hd % 8 == 0;
        const bool expandedKv = layerFused && (dq == 4 || (window && !windowKernel) || hd > kSharedHeadsMaxHeadDim) && groups > 1;
        // One key/value head expands as a view (stride 0 over the heads), which the CUDA kernels read
        // as it is: no copies (peak recorder on an H100, Gemma 4 E2B LoRA at 2048 x 4: each global
        // layer 112 MiB lighter than copies, a sliding one on the mask 56).
        const bool expandedCopies = expandedKv && (kvHeads > 1 || !fusedKernels);
        // The math path's bmms fold the batch and the heads into one dimension: a view of the
        // expanded heads only where there is one key/value head and one sequence, and no cast of k
        // to the product's dtype (peak recorder on CPU, an E2B-shaped model, LoRA: copies at
        // micro-batch 2, none at 1).
        const bool mathViews = kvHeads == 1 && b == 1 && groups > 1 && dkr == c;
        // A [T, T] boolean mask given to SDPA on a CUDA device becomes an additive one in q's dtype,
        // which the memory-efficient kernel keeps for its backward: one a layer (the same H100 rows,
        // 8 MiB a sliding layer).
        const int64_t additiveMask = fusedKernels && layerFused && window && !windowKernel && !cappedKernel ? c * t * t : 0;
        slidingOnMask = slidingOnMask || (sliding && !windowKernel && !cappedKernel);
        const int64_t kvKept = expandedCopies ? qDim : kvDim;
        // q after the rotary, k after the rotary and v as the projection made them: alive in the
        // attention's frame while the kernel runs, though not what autograd keeps (under autocast
        // the kernels keep 16-bit casts of an fp32 q and k).
        // (A shared layer's k and v are its source's, alive anyway.)
        const int64_t qkvAlive = n * (dq * qDim + (sharedKv ? 0 : dkr * kvDim + c * kvDim));
        // The capped kernel's products read q, k, v where the projections and the rotary left them,
        // of one dtype (model/HeadLayoutProducts.h): what they keep is q, k and v themselves (not
        // copies beside them), and no copy of k and v is alive at the second.
        const bool headLayout = cappedKernel && dq == c && dkr == c && !traits.fusedQkv && b * groups <= 64;
        if (m.kvSource(layerIndex))
            sharedKvBytes[layerIndex] = n * (dkr + c) * kvDim;
        const int64_t expandedAlive = expandedCopies ? (dkr + c) * n * qDim : 0;
        // Under autocast the fp32 norm output is alive but not kept (each projection keeps its cast).
        const int64_t y1Alive = walk.mixed && dx1 == 4 ? 4 * n * h : 0;
        int64_t forwardAbove = latent ? mla.forwardAbove : 0, atAttention = latent ? mla.atAttention : 0;
        if (qkvGrad && !latent) {
            if (layerFused) {
                // SDPA keeps q, k, v as given (GQA heads shared through enable_gqa), its output
                // (laid out [B, T, heads, hd], so o_proj's input is a view of it) and the fp32 log-sum-exp.
                if (traits.attentionSinks) {
                    // The sink key's form: q padded to D' (a multiple of 8 past hd + 2), k and v
                    // expanded to every head with one key more, the padded output and the
                    // log-sum-exp, and the [T, T + 1] mask (boolean, and the kernel's additive copy).
                    const int64_t padded = (hd + 2 + 7) / 8 * 8;
                    walk.saved += c * b * heads * (2 * t * padded + 2 * (t + 1) * padded) + 4 * b * heads * t + (1 + c) * t * (t + 1) + layerRotaryCasts;
                } else
                walk.saved += c * n * (qDim + (sharedKv && !expandedCopies ? 0 : 2 * kvKept)) + c * n * qDim + 4 * b * heads * t + layerRotaryCasts + additiveMask;
                // A fused qkv_proj's v is a view of its whole output, so the kernel keeping v keeps
                // the q and k columns' storage too (q and k are new tensors after the rotary).
                if (traits.fusedQkv && !expandedCopies)
                    walk.saved += c * n * (qDim + kvDim);
                atAttention = walk.saved;
                // Beside them: the own k and v of expanded heads, and an fp32 q and k (expanded)
                // whose 16-bit casts the kernel keeps.
                forwardAbove = walk.saved + y1Alive + (expandedCopies ? (dkr + c) * n * kvDim : 0) + (dq != c ? dq * n * qDim : 0) +
                               (dkr != c ? dkr * n * kvKept : 0);
            } else {
                // Math path: the bmms keep contiguous copies of q and of k, v expanded to all heads
                // (the rotary output is laid out [B, T, heads, hd]); the softmax keeps its output,
                // which the second bmm keeps too; masked_fill keeps the T x T mask.
                // Transformers' eager form (softmax in fp32, rounded back) keeps the fp32
                // probabilities and their cast, and a soft-cap's tanh keeps its output.
                // gpt-oss's composite: the softmax over [scores, sink] in the dtype the sinks promote
                // the scores to (fp32 for trained sinks under autocast, else the compute dtype),
                // its 16-bit cast for the product with v, and max's indices.
                const int64_t probabilities = traits.attentionSinks ? sinkScores + (sinkDtype != c ? scores : 0) + 8 * b * heads * t
                                              : eagerForm && c != 4 && !cappedKernel ? scores * 4 / c + scores
                                                                                     : scores;
                // The cap's kept tanh output, or the kernel's kept scores and row statistics.
                const int64_t capped = traits.attentionSoftcap > 0 ? scores + rowStats : 0;
                // The capped kernel's bmms read the shared key/value heads as they are
                // (model/FusedOps.h's groupedHeadsAttention): q, k and v at their own widths (the
                // tensors themselves where headLayout, else contiguous copies), not expanded.
                const int64_t mathKv = mathViews ? (sharedKv ? 0 : 2 * kvDim) : 2 * qDim;
                walk.saved += c * n * (cappedKernel ? qDim + 2 * kvDim : qDim + mathKv) + (cappedKernel ? 0 : t * t) + layerRotaryCasts + probabilities + capped;
                atAttention = walk.saved;
                // At the second bmm: the masked scores (the kernel's are the kept ones) and the output
                // beside the kept set, and q, k, v as the rotary left them (the kept ones themselves
                // where headLayout; and an fp32 k expanded, cast for the bmm).
                forwardAbove = walk.saved + (cappedKernel ? 0 : scores) + c * n * qDim + (headLayout ? 0 : qkvAlive) + y1Alive +
                               (dkr == c ? 0 : cappedKernel ? dkr * n * kvDim : groups > 1 ? dkr * n * qDim : 0);
                // The sinks' composite holds two [T, T + 1] tensors at a time (the concatenation and
                // its shifted copy, then that and the softmax), none beside the product with v.
                if (traits.attentionSinks)
                    forwardAbove = std::max(walk.saved - probabilities + 2 * sinkScores + 8 * b * heads * t, walk.saved + c * n * qDim) + qkvAlive + y1Alive;
            }
        }
        if (traits.attentionOutputGate && !linearLayer && qkvGrad) {
            // Qwen3NextAttention's output gate: q_proj's gate half copied out, sigmoid's output kept,
            // and the attention's merged output kept by the gate's product, whose result o_proj keeps
            // (a new tensor, never a view of the kernel's output).
            // (The fused kernel's output, of which the merged tensor is a view, is already counted.)
            walk.saved += c * n * qDim + ((latent ? mla.fusedKernel : layerFused) ? 0 : c * n * qDim);
        }
        walk.linears(latent ? mla.outputWidth : qDim, c, {o}, (latent ? mla.fusedKernel : layerFused) && qkvGrad && !traits.attentionOutputGate, false,
                     qkvGrad);
        bool attnGrad = qkvGrad || o.needsGrad();
        GatedDeltaNetBytes gdn;
        if (linearLayer) {
            walk.saved = savedBeforeAttention;
            gdn = gatedDeltaNet(config, layer, walk, dx1, y1Grad, b, t, fusedKernels, out.unkeptAutocastCopies);
            qkvGrad = gdn.grad;
            attnGrad = gdn.grad || proj("out_proj").needsGrad();
            forwardAbove = gdn.forwardAbove;
            atAttention = gdn.backwardAt;
        }
        if (layer.normExists[1]) { // a norm on attention's output (OLMo 2, Gemma, GLM-4)
            bool outGrad = false;
            walk.norm(h, c, attnGrad, layer.normTrains[1], paramBytes(layer.normTrains[1]), outGrad);
            attnGrad = outGrad;
        }
        bool y2Grad = false;
        int64_t dx2 = r;
        if (layer.normExists[2]) {
            dx2 = walk.norm(h, r, attnGrad || gradFlows, layer.normTrains[2], paramBytes(layer.normTrains[2]), y2Grad);
        } else {
            // Post-norm: the MLP reads the residual stream itself (its linears keep it).
            y2Grad = attnGrad || gradFlows;
        }
        int64_t mlpBackward = 0, mlpLive = 0;
        SparseMlpBytes sparse;
        if (layer.sparse) {
            anySparse = true;
            // The post-attention residual is kept by the norm when fp32 and needing a gradient
            // (by the fused norm in any dtype).
            const int64_t hAlive = (attnGrad || gradFlows) && (r == 4 || walk.kernelsFused) ? 0 : r * n * h;
            sparse = sparseMlp(config, layer, walk, dx2, y2Grad, r * n * h, hAlive);
            out.unkeptAutocastCopies += sparse.unkeptCopies;
        } else if (m.activation == ActivationKind::Gelu) {
            const auto up = proj("up_proj"), down = proj("down_proj");
            walk.linears(h, dx2, {up}, false, false, y2Grad);
            if (y2Grad || up.needsGrad())
                walk.saved += c * n * inter;            // gelu keeps its input
            walk.linears(inter, c, {down}, false, false, y2Grad || up.needsGrad());
            // Backward: gelu's output gradient (replacing the down input when that was kept), then
            // up's output gradient.
            mlpBackward = 2 * c * n * inter - (down.needsGrad() ? c * n * inter : 0);
            mlpLive = 2 * c * n * inter;
        } else {
            // Gated: silu or gelu(gate) * up; a fused gate_up_proj's two halves are views of one
            // output, which keeps the same bytes as the two outputs.
            const auto fusedGateUp = proj("gate_up_proj");
            const auto gate = traits.fusedGateUp ? fusedGateUp : proj("gate_proj"), up = traits.fusedGateUp ? fusedGateUp : proj("up_proj");
            const auto down = proj("down_proj");
            walk.linears(h, dx2, traits.fusedGateUp ? std::vector<Projection> {fusedGateUp} : std::vector<Projection> {gate, up}, false, float8Shared,
                         y2Grad);
            const bool gGrad = y2Grad || gate.needsGrad(), uGrad = y2Grad || up.needsGrad();
            if (fusedGate) // the fused gated activation keeps gate's and up's outputs
                walk.saved += gGrad || uGrad ? 2 * c * n * inter : 0;
            else
                walk.saved += (gGrad ? c * n * inter : 0)  // silu keeps gate's output
                              + (uGrad ? c * n * inter : 0) // silu(g) * up keeps silu(g) when up needs grad
                              + (gGrad ? c * n * inter : 0);// ... and up's output when gate needs grad
            walk.linears(inter, c, {down}, false, false, gGrad || uGrad);
            // Backward: down's input gradient (replacing the product when down kept it), then
            // the gradients of gate's and up's outputs are made while the kept inputs are held.
            mlpBackward = 3 * c * n * inter - (down.needsGrad() ? c * n * inter : 0);
            // A fused gate_up_proj gathers its halves' gradients into one [n, 2 x inter] tensor; the
            // packed activation's kernel writes them there, its composite beside one temporary.
            if (traits.fusedGateUp && (gGrad || uGrad) && !(fusedGate && fusedKernels))
                mlpBackward += c * n * inter;
            // Under no_grad: gate's and up's outputs and the product (eager: silu(g) beside them).
            mlpLive = (fusedGate ? 3 : 4) * c * n * inter;
        }
        int64_t postNormBackward = 0;
        if (layer.normExists[3]) { // a norm on the MLP's output
            bool outGrad = false;
            const bool mlpGrad = y2Grad || (layer.sparse ? sparse.trains : proj("down_proj").needsGrad());
            walk.norm(h, c, mlpGrad, layer.normTrains[3], paramBytes(layer.normTrains[3]), outGrad);
            if (mlpGrad || layer.normTrains[3])
                postNormBackward = walk.postNormBackward(h, c, r, layer.normTrains[3], fusedKernels);
        }
        // Gemma 4's per-layer input after the MLP's residual add: per_layer_input_gate reads the
        // stream, gelu keeps the gate's output, the product with the layer's input keeps both
        // factors (the input is the step's [n, layers, P] tensor, held anyway), per_layer_projection
        // reads the product (the wider dtype of the two), post_per_layer_input_norm its output.
        int64_t perLayerSaved = 0;
        if (pli > 0) {
            const int64_t before = walk.saved;
            const bool streamGrad = gradFlows || attnGrad || y2Grad || (layer.sparse ? sparse.trains : proj("down_proj").needsGrad());
            const auto gateP = proj("per_layer_input_gate"), projP = proj("per_layer_projection");
            walk.linears(h, r, {gateP});
            const bool gGrad = streamGrad || gateP.needsGrad();
            if (gGrad)
                walk.saved += c * n * pli;             // gelu keeps its input
            if (pliGrad)
                walk.saved += c * n * pli;             // the product keeps gelu's output
            const int64_t dprod = pliGrad || gGrad ? std::max(c, dp) : c;
            walk.linears(pli, dprod, {projP});
            bool normOut = false;
            walk.norm(h, c, gGrad || pliGrad || projP.needsGrad(), layer.perLayerNormTrains, paramBytes(layer.perLayerNormTrains), normOut);
            perLayerSaved = walk.saved - before;
        }
        // qlora: a base exists dequantised only while its own matmul runs (model/Nf4.cpp; without
        // the kernel, the composite path's scratch too), so it adds a point of its own rather
        // than sitting under the others: in the forward at down_proj (everything the block keeps,
        // the matrix), in the backward at down_proj's input gradient (the matrix and that
        // gradient) and at o_proj's (the same, above what the attention keeps).
        const int64_t dequantAttention = nf4DequantisedBytes(layer.nf4AttentionNumel, c, fusedKernels);
        const int64_t dequantMlp = nf4DequantisedBytes(layer.nf4MlpNumel, c, fusedKernels);
        // down_proj's input: the MLP's intermediate, or one expert's share of the routed tokens.
        const int64_t downInput = layer.sparse ? c * (n * m.moe.expertsPerToken / std::max<int64_t>(1, m.moe.experts)) * m.moe.expertIntermediateSize : c * n * inter;
        // fp8 (model/Fp8Linear.cpp): casting a base to float8 holds the float8 copy, and without the
        // cast kernel its fp32 values and their clamp too (9 bytes a weight), in the forward. In the
        // backward the kernel casts the base straight into its transposed float8 copy; without it
        // the base is first transposed (4 bytes a weight for an fp32 master, 2 for a frozen 16-bit
        // one). Beside it, the float8 output gradient and the input gradient.
        const int64_t castBytes = fusedKernels ? 1 : 9;
        const int64_t transposeBytes = fusedKernels ? 0 : (train.mode == TrainMode::Full ? 4 : 2);
        const int64_t float8Forward = castBytes * std::max(layer.float8AttentionNumel, layer.float8MlpNumel);
        const int64_t float8BackwardMlp =
            layer.float8MlpNumel > 0 ? layer.downGradBytes + (transposeBytes + castBytes) * layer.float8MlpNumel + n * h + downInput : 0;
        const int64_t float8BackwardAttention =
            layer.float8AttentionNumel > 0 ? (transposeBytes + castBytes) * layer.float8AttentionNumel + n * h + c * n * qDim : 0;
        out.savedPerBlock.push_back(walk.saved);
        out.inputSavedPerBlock.push_back(walk.inputSaved);
        out.rebuiltSavingPerBlock.push_back(rebuiltSaving);
        // A Gated DeltaNet block holds its norm output (where no projection keeps it as is) and the
        // layer's output (out_proj's, 16-bit) until it returns: beside the sparse MLP's peak (seen by
        // the peak recorder on CPU in a rebuilt block's forward under recompute).
        const int64_t heldByBlock = linearLayer && layer.sparse ? (walk.mixed && dx1 == 4 ? 4 * n * h : 0) + c * n * h : 0;
        out.forwardAbovePerBlock.push_back(std::max({forwardAbove, walk.saved, sparse.forwardPeak + heldByBlock, dequantMlp > 0 ? walk.saved + dequantMlp : 0,
                                                     float8Forward > 0 ? walk.saved + float8Forward : 0}) -
                                           walk.inputSaved);
        // (The per-layer input's kept tensors are released by the time the MLP's backward runs.)
        const int64_t mlpExtra = (layer.sparse ? sparse.backwardExtra : layer.downGradBytes + mlpBackward) - perLayerSaved;
        out.backwardMlpExtraPerBlock.push_back(
            std::max({mlpExtra, dequantMlp > 0 ? layer.downGradBytes + dequantMlp + downInput : 0, float8BackwardMlp}));
        out.backwardPostNormExtraPerBlock.push_back(postNormBackward - perLayerSaved);
        out.backwardMlpCopiesFreedPerBlock.push_back(layer.sparse ? sparse.backwardCopiesFreed : layer.downCopyBytes);
        out.backwardAttentionCopiesFreedPerBlock.push_back(layer.afterAttentionCopyBytes);
        // Attention's backward: what is kept up to the softmax, the gradients of everything after
        // it, and at the softmax's backward its input and output gradients (plus, on the math
        // path, the expanded v's gradient, v's own on the capped kernel's; or q, k, v's gradients
        // from the fused kernel).
        // Soft-capped eager attention (Gemma 2), seen by the peak recorder on an H200: at the cap's
        // backward three fp32 score-sized gradients are alive (the probabilities', softmax's and
        // the cap's), the 16-bit probabilities already released. On CPU (a recomputed gemma2 layer,
        // bf16-mixed) the peak is softmax's backward, with two: the probabilities' fp32 gradient and
        // softmax's own, beside its fp32 output and tanh's (+12% to +24% with three).
        // The capped softmax's kernel: the probabilities' gradient and the scores', the probabilities
        // (kept by the second bmm alone) already released.
        const int64_t cappedGrads = cappedKernel ? scores : (fusedKernels ? 3 : 2) * (scores / c) * 4 - (c != 4 ? scores : 0);
        // The eager form without a cap, seen by the peak recorder on CPU (a recomputed phi3 layer,
        // bf16-mixed): at the softmax's backward the fp32 gradient of the probabilities and the
        // softmax's own fp32 gradient, the 16-bit probabilities already released.
        const int64_t eagerGrads = 2 * (scores / c) * 4 - (c != 4 ? scores : 0);
        const int64_t attnGrads = latent       ? mla.softmaxGrads
                                  : layerFused ? 3 * c * n * qDim
                                  // softmax's gradient in and out; v is expanded after the softmax (model/SinkAttention.cpp),
                                  // so its expansion's backward has summed v's gradient before the softmax's runs
                                  : traits.attentionSinks ? 2 * sinkScores - (sinkDtype != c ? scores : 0)
                                               : (traits.attentionSoftcap > 0 ? cappedGrads : eagerForm ? eagerGrads : 2 * scores) + c * n * (cappedKernel ? kvDim : qDim);
        // The math path's expanded v is kept by the second bmm alone, whose backward has run by the
        // softmax's: released there (peak recorder on CPU, the llama fixture at 4 x 256 tokens, eager
        // and fused: one [n, q width] above the measured peak without this).
        const int64_t vReleased = !latent && !linearLayer && !layerFused && !traits.attentionSinks && !cappedKernel && !mathViews ? c * n * qDim : 0;
        // Qwen3-Next's output gate: sigmoid's backward has made the gate's gradient before the
        // attention's, and it waits for q_proj's backward (the peak recorder on CPU, the qwen3_next
        // fixture at 4 x 256 tokens and vocabulary 256, fused: -0.41% without it).
        const int64_t gateGradient = traits.attentionOutputGate && !linearLayer && qkvGrad ? c * n * qDim : 0;
        // A block whose input takes no gradient (LoRA's first block over a frozen embedding, without
        // recompute) drops the gradient arriving at its output once the attention's output
        // projection has read it: the estimator's residual term is not alive there (the peak
        // recorder on CPU, one qwen3_next layer, LoRA: +0.64% under bf16-mixed, +1.36% in fp32).
        const int64_t inputGradientGone = !gradFlows ? r * n * h : 0;
        const int64_t attentionExtra = atAttention + layer.afterAttentionGradBytes + (linearLayer ? 0 : attnGrads - vReleased + gateGradient) - walk.saved - inputGradientGone;
        // The q norm's backward without the CUDA kernel (model/FusedOps.cpp's composite, train.kernels
        // = fused on CPU): in its last statement the fp32 normalised input, the fp32 gradient, its
        // product with the weight and the expression's three fp32 temporaries and 16-bit result are
        // alive at once (26 bytes an element of q), beside q's gradient, everything the block kept
        // after its q/k norms already released. It outweighs the softmax's point where q is wide
        // (Gemma 4's global heads of 512: -7.6% to -12.8% on CPU without it).
        const bool compositeQNorm = walk.kernelsFused && !fusedKernels && qkvGrad && !latent && !linearLayer && (m.qkNorm == QkNorm::Head || m.qkNorm == QkNorm::Full);
        const int64_t qNormExtra = compositeQNorm ? savedThroughQkNorm + layer.afterAttentionGradBytes + c * n * qDim + 26 * n * qDim - walk.saved : attentionExtra;
        out.backwardAttentionExtraPerBlock.push_back(
            std::max({attentionExtra, qNormExtra, dequantAttention > 0 ? atAttention + layer.afterAttentionGradBytes + dequantAttention + c * n * qDim - walk.saved : attentionExtra,
                      float8BackwardAttention > 0 ? atAttention + layer.afterAttentionGradBytes + float8BackwardAttention - walk.saved : attentionExtra}));
        // Under no_grad (recompute's forward) nothing is kept: the live set peaks at the second bmm
        // (norm output, q/k/v, expanded k and v, masked scores and probabilities, output) or in the
        // MLP (residual, norm output, its intermediates and down's output). Under autocast the
        // fused kernel's 16-bit casts of an fp32 q and k are alive beside them.
        const int64_t kernelCasts = layerFused ? (dq != c ? c * n * qDim : 0) + (dkr != c ? c * n * kvKept : 0) : 0;
        const int64_t attnNoGrad = linearLayer ? gdn.noGradLive : latent ? mla.noGradLive
                                          : dx1 * n * h + qkvAlive + layerRotaryCasts + kernelCasts +
                                                (layerFused ? c * n * qDim + expandedAlive
                                                 : traits.attentionSinks ? (groups > 1 ? (dkr + c) * n * qDim : 0) + 2 * sinkScores + 8 * b * heads * t + c * n * qDim + t * t
                                                                         : (groups > 1 && !headLayout && !mathViews ? (dkr + c) * n * (cappedKernel ? kvDim : qDim) : 0) + 2 * scores + c * n * qDim +
                                                                               (cappedKernel ? rowStats : t * t));
        // (qlora: at down_proj, its input, the matrix and its output beside the residual and the norm output.)
        const int64_t mlpNoGrad = std::max(layer.sparse ? sparse.noGradLive : r * n * h + dx2 * n * h + mlpLive + c * n * h,
                                           dequantMlp > 0 ? r * n * h + dx2 * n * h + downInput + dequantMlp + c * n * h : 0);
        noGradPeak = std::max({noGradPeak, attnNoGrad, mlpNoGrad});
        gradFlows = gradFlows || attnGrad || y2Grad || (layer.sparse ? sparse.trains : proj("down_proj").needsGrad());
        out.unkeptCopiesUpToBlock.push_back(out.unkeptAutocastCopies);
    }
    out.blockInputBytes = r * n * h;
    out.blockNoGradPeak = noGradPeak;
    if (pli > 0) {
        // The step's per-layer inputs, and what making them keeps: the projection's input (its cast
        // under autocast) and the norm over P on [n x layers] rows.
        BlockWalk walk(config, n, libTorch2);
        walk.linears(h, r, {flags.perLayerModelProjection});
        BlockWalk normWalk(config, n * m.layers, libTorch2);
        bool normOut = false;
        normWalk.norm(pli, c, gradFlows || flags.perLayerModelProjection.needsGrad(), flags.perLayerNormTrains, paramBytes(flags.perLayerNormTrains), normOut);
        out.stepHeld += dp * n * m.layers * pli + walk.saved + normWalk.saved;
        out.noGradHeld += dp * n * m.layers * pli;
        // In backward each layer's slice of their gradient waits for the others (unbind's backward
        // stacks them once all have come): those of the layers above a block are alive in its backward.
        if (pliGrad)
            for (int64_t k = 0; k < m.layers; ++k) {
                const int64_t above = dp * n * pli * (m.layers - 1 - k);
                out.backwardMlpExtraPerBlock[static_cast<size_t>(k)] += above;
                out.backwardPostNormExtraPerBlock[static_cast<size_t>(k)] += above;
                out.backwardAttentionExtraPerBlock[static_cast<size_t>(k)] += above + dp * n * pli;
            }
    }
    for (const auto &[source, bytes] : sharedKvBytes) {
        // Under recompute every shared layer saves its source's keys and values as inputs. Without
        // it, their gradients gather from the shared layers' backward until the source's own.
        if (train.recompute)
            out.stepHeld += bytes;
        out.noGradHeld += bytes;
        // From the top down: a reader above block k has sent its gradients by k's MLP point, a reader
        // at k by its attention point.
        bool readAbove = false;
        for (int64_t k = m.layers - 1; k > source; --k) {
            const bool readHere = m.kvSourceLayer(k) == source;
            if (readAbove) {
                out.backwardMlpExtraPerBlock[static_cast<size_t>(k)] += bytes;
                out.backwardPostNormExtraPerBlock[static_cast<size_t>(k)] += bytes;
            }
            if (readAbove || readHere)
                out.backwardAttentionExtraPerBlock[static_cast<size_t>(k)] += bytes;
            readAbove = readAbove || readHere;
        }
    }

    // Final norm and lm_head.
    int64_t headInputBytes = 0, finalNormSaved = 0;
    bool headInputGrad = false;
    {
        BlockWalk walk(config, n, libTorch2);
        bool yGrad = false;
        const int64_t dx = walk.norm(h, r, gradFlows, finalNormTrains, paramBytes(finalNormTrains), yGrad);
        finalNormSaved = walk.saved;
        headInputBytes = dx;
        headInputGrad = yGrad;
        Projection head;
        head.trainable = headTrains;
        walk.linears(h, dx, {head});
        out.headSaved = walk.saved;
        // The loss function holds the final norm's output until it returns; when lm_head does not
        // keep that very tensor (frozen head, or autocast's 16-bit copy), it is extra at the loss.
        const bool keptAsIs = headTrains && !(walk.mixed && dx == 4);
        out.headOutputAlive = keptAsIs ? 0 : dx * n * h;
    }
    const int64_t logitsElems = n * vocab;
    if (train.kernels == KernelPath::Fused) {
        // Chunked linear cross-entropy (LinearCrossEntropy.h): the head keeps no input; a chunk's
        // logits (and without the kernel their fp32 copy, where their gradient is made in place)
        // live one chunk at a time; the gradients of the head's input (compute
        // dtype) and weight (fp32) are made in the forward pass and kept until backward scales
        // them into new tensors.
        const int64_t perLogit = linearCrossEntropyBytesPerLogit(c, fusedKernels, m.traits.finalSoftcap > 0);
        const int64_t chunk = linearCrossEntropyChunkTokens(n, vocab, perLogit, fusedKernels);
        const int64_t gradInput = headInputGrad ? c * n * h : 0;
        const int64_t gradWeight = headTrains ? 4 * vocab * h : 0;
        // The head keeps no input; the final norm (fused) keeps its own input and per-row statistics,
        // seen by the peak recorder on CPU at the chunk's forward (the last block's output).
        out.headSaved = finalNormSaved;
        out.headOutputAlive = headInputBytes * n * h + (headInputBytes != c ? c * n * h : 0);
        // A chunk's per-token loss terms (model/FusedOps.cpp's crossEntropyGradInPlace): without the
        // kernel the valid mask, the clamped int64 targets, the target logits, the row sums, their
        // log, the row losses and the fp32 mask (34 bytes a token, peak recorder on CPU); the
        // kernel writes only the fp32 row losses beside the mask.
        const int64_t tokenTerms = (fusedKernels ? 5 : 34) * chunk;
        // The weight gradient accumulates inside the GEMM, except for a 16-bit product into fp32
        // without the CUDA path (the product is made, then added).
        const bool productMade = headTrains && c != 4 && !fusedKernels;
        const int64_t ld = linearCrossEntropyRowStride(vocab, fusedKernels);
        out.logitsForwardPeak = std::max(perLogit * chunk * ld, c * chunk * ld + (productMade ? c * vocab * h : 0)) + gradInput + gradWeight + tokenTerms;
        out.logitsSaved = gradInput + gradWeight;
        // Backward scales the kept gradients into new tensors while they are still held (the input's
        // in its dtype, the weight's in fp32, then cast to a 16-bit weight's dtype) where the loss's
        // gradient is not 1 (accumulation, fp16's loss scale); at 1 it hands them on, casting only.
        const bool unitLossGrad = train.gradAccum == 1 && train.precision != Precision::Fp16Mixed;
        const int64_t headWeightBytes = paramBytes(headTrains);
        const int64_t gradWeightScaled = headTrains ? (unitLossGrad ? 0 : 4 * vocab * h) + (headWeightBytes != 4 ? headWeightBytes * vocab * h : 0) : 0;
        const bool inputGradMade = headInputGrad && (!unitLossGrad || headInputBytes != c);
        out.logitsBackwardPeak = out.logitsSaved + (inputGradMade ? headInputBytes * n * h : 0) + gradWeightScaled;
        // Then the fused final norm's backward (model/FusedOps.cpp's RmsNormFunction), beside the
        // gradient arriving from the loss: the kernel writes dx (and dw partials of a few hundred
        // rows); without it, the LibTorch ops hold xn, g (dy's fp32 copy, where dy is 16-bit), gw
        // and the three temporaries of dx's one expression, then its cast to x's dtype (peak recorder
        // on CPU, qwen3-next-tiny with a 256-token vocabulary: the run's peak there).
        if (headInputGrad) {
            const int64_t dyBytes = inputGradMade ? headInputBytes : c;
            const int64_t libTorchTemporaries = (20 + (dyBytes != 4 ? 4 : 0) + (r != 4 ? r : 0)) * n * h;
            // Without recompute the last block's output add is folded into this norm (DecoderModel's
            // deferred adds): the kernel also writes the branch's gradient in its dtype where that
            // differs from the stream's (or is scaled). Taken as folded whatever the strategy (FSDP's
            // hooks keep the add apart: a few MB high there, off the peak).
            const bool folded = !train.recompute && layersFoldOutputAdd(m);
            const int64_t branchGrad = folded && (r != c || m.traits.residualScale != 1.0) ? c * n * h : 0;
            out.finalNormBackwardPeak = dyBytes * n * h + (fusedKernels ? r * n * h + branchGrad : libTorchTemporaries);
        }
        out.assumptions.push_back("loss: fused linear cross-entropy in chunks of " + std::to_string(chunk) + " tokens (train.kernels = fused" +
                                  (fusedKernels ? ", CUDA kernel" : ", LibTorch ops") + "); the full logits are never made");
        out.assumptions.push_back("norms: fused RMSNorm (train.kernels = fused: block, final and q/k norms, in the model's form) keeping its input and "
                                  "per-row statistics, output in the compute dtype");
        out.assumptions.push_back("MLP and rotary: fused gated activation (SwiGLU or GeGLU) keeping gate's and up's outputs (the activation "
                                  "recomputed in backward); fused rotary on q and k "
                                  "(no 16-bit copies of the tables); MoE experts stay eager");
    } else {
        // Loss: logits (compute dtype), their fp32 copy, log-softmax output (fp32, kept). In
        // backward, nll_loss's gradient, log-softmax's gradient and the kept output coexist.
        out.logitsForwardPeak = c * logitsElems + (c != 4 ? 4 * logitsElems : 0) + 4 * logitsElems;
        out.logitsSaved = 4 * logitsElems;
        out.logitsBackwardPeak = 12 * logitsElems;
        if (m.traits.finalSoftcap > 0) {
            // Soft-capping (Gemma 2): tanh keeps its output beside the capped logits.
            out.logitsForwardPeak += c * logitsElems;
            out.logitsSaved += c * logitsElems;
            out.logitsBackwardPeak += c * logitsElems;
        }
    }
    // The fp32 rotary tables (a second pair for sliding layers of their own base), and the window
    // mask the sliding layers share (none where all of them run flash's own window).
    // (Gemma 4's proportional rotary: the global tables span global_head_dim, the sliding ones head_dim.)
    const int64_t globalTable = traits.ropeProportional ? (traits.globalHeadDim > 0 ? traits.globalHeadDim : m.effectiveHeadDim()) : m.rotaryDim();
    const int64_t localTable = traits.ropeProportional ? m.effectiveHeadDim() : m.rotaryDim();
    out.rotaryTables = 2 * 4 * t * (globalTable + (m.traits.localRopeTheta > 0 ? localTable : 0));
    out.sharedTables = out.rotaryTables + (slidingOnMask || (m.traits.attentionChunk > 0 && t > m.traits.attentionChunk) ? t * t : 0);
    out.inputBytes = 2 * 8 * n;

    out.assumptions.push_back(fused ? "attention: fused scaled_dot_product_attention (no T x T scores kept)"
                                    : "attention: math path (B x heads x T x T probabilities kept per layer)");
    if (train.recompute)
        out.assumptions.push_back("recompute: each block keeps only its input; one block is rebuilt at a time in backward");
    if (anySparse)
        out.assumptions.push_back("mixture of experts: N*k routed token copies per sparse layer (N = micro_batch x seq_len tokens, k = experts_per_token), "
                                  "split evenly across the experts where a per-expert peak depends on it; expert parallelism not modelled");
    if (m.linear.enabled())
        out.assumptions.push_back("linear attention: Gated DeltaNet layers walked op by op (projections, conv, L2 norm, the chunked rule in fp32 over "
                                  "chunks of 64 with its C x C intermediates and per-chunk state, gated RMSNorm): linear in sequence length");
    if (m.traits.attentionOutputGate)
        out.assumptions.push_back("attention output gate: sigmoid(gate) and the gated product kept on the full-attention layers");
    if (train.mode == TrainMode::Lora && train.kernels == KernelPath::Eager && usesAutocast(train.precision))
        out.assumptions.push_back("LoRA on the eager path: each adapter casts its input to fp32 first, as PEFT's LoRA layers do by default, "
                                  "and keeps autocast's 16-bit copy of it (routed experts excepted); the fused path reads the input once");
    return out;
}

} // namespace pb
