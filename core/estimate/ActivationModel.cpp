#include "estimate/ActivationModel.h"

#include "config/ParameterTable.h"
#include "estimate/ModelStates.h"

#include <algorithm>
#include <map>

namespace pb {
namespace {

struct Projection {
    bool trainable = false;   // the base weight trains: its matmul keeps the input
    bool lora = false;        // lora_A keeps the input, lora_B keeps A's output
    bool needsGrad() const { return trainable || lora; }
};

struct LayerFlags {
    std::map<std::string, Projection> proj;
    bool inputNormTrains = false;
    bool postNormTrains = false;
    int64_t downGradBytes = 0;            // gradients of down_proj (made first in the block's backward)
    int64_t afterAttentionGradBytes = 0;  // gradients of the MLP, the second norm and o_proj
    int64_t downCopyBytes = 0;            // autocast's 16-bit copies of down_proj's matrices
    int64_t afterAttentionCopyBytes = 0;  // ... of the MLP's and o_proj's matrices
};

// Per layer: which projections train or carry an adapter, from the engine's parameter table.
std::vector<LayerFlags> layerFlags(const RunConfig &config, bool &embeddingTrains, bool &finalNormTrains, bool &headTrains)
{
    std::vector<LayerFlags> layers(static_cast<size_t>(std::max<int64_t>(config.model.layers, 0)));
    embeddingTrains = finalNormTrains = headTrains = false;
    for (const auto &p : parameterTable(config)) {
        if (p.layer < 0) {
            if (p.name == "model.embed_tokens.weight")
                embeddingTrains = p.trainable;
            else if (p.name == "model.norm.weight")
                finalNormTrains = p.trainable;
            else if (p.name == "lm_head.weight")
                headTrains = p.trainable;
            continue;
        }
        auto &layer = layers[static_cast<size_t>(p.layer)];
        if (p.trainable) {
            const int64_t bytes = p.numel * trainableParamBytes(config.train.precision);
            const int64_t copy = usesAutocast(config.train.precision) && p.isMatrix ? 2 * p.numel : 0;
            if (p.name.find(".mlp.") != std::string::npos || p.name.find("post_attention_layernorm") != std::string::npos ||
                p.name.find(".o_proj.") != std::string::npos) {
                layer.afterAttentionGradBytes += bytes;
                layer.afterAttentionCopyBytes += copy;
            }
            if (p.name.find(".down_proj.") != std::string::npos) {
                layer.downGradBytes += bytes;
                layer.downCopyBytes += copy;
            }
        }
        for (const auto &name : projectionNames()) {
            if (p.name.find("." + name + ".") == std::string::npos)
                continue;
            auto &proj = layer.proj[name];
            if (p.isLora)
                proj.lora = true;
            else if (p.name.find(".weight") != std::string::npos)
                proj.trainable = p.trainable;
        }
        if (p.name.find("input_layernorm.weight") != std::string::npos)
            layer.inputNormTrains = p.trainable;
        if (p.name.find("post_attention_layernorm.weight") != std::string::npos)
            layer.postNormTrains = p.trainable;
    }
    if (config.model.tieEmbeddings)
        headTrains = embeddingTrains;
    return layers;
}

class BlockWalk {
public:
    BlockWalk(const RunConfig &config, int64_t tokens)
        : n(tokens), mixed(usesAutocast(config.train.precision)),
          c(config.train.precision == Precision::Fp32 ? 4 : 2), rank(config.train.lora.rank)
    {
    }

    // RMSNorm as LlamaRMSNorm: h = x.to(fp32); h * rsqrt(mean(h^2) + eps); weight * h.to(x dtype).
    // `dx` is the input's element size, `dw` the weight's. Returns the output's element size (the
    // promotion of the two); `outGrad` tells whether it requires grad. Nothing here is cast by
    // autocast (pow, mean, rsqrt and mul run in their inputs' dtypes).
    int64_t norm(int64_t width, int64_t dx, bool inGrad, bool weightTrains, int64_t dw, bool &outGrad, bool isBlockInput = false)
    {
        if (inGrad) {
            // pow and the multiply by rsqrt keep h: x itself when x is fp32 (the block input,
            // counted here), else its fp32 copy; mean keeps pow's output; rsqrt keeps its result.
            saved += 4 * n * width + 4 * n * width + 4 * n;
            if (isBlockInput)
                inputSaved += dx == 4 ? 4 * n * width : 0;
        }
        // weight * h' keeps h': the fp32 product itself when x is fp32, else its cast to x's dtype
        // (the fp32 product is then dropped).
        if (weightTrains)
            saved += (dx == 4 ? 4 : dx) * n * width;
        outGrad = inGrad || weightTrains;
        return std::max(dx, dw);
    }

    // Linears reading one input X of `width` columns and element size `dx`.
    void linears(int64_t width, int64_t dx, const std::vector<Projection> &consumers, bool inputCounted = false)
    {
        if (mixed && dx == 4) {
            // Autocast casts a non-leaf input anew for every linear: one 16-bit copy per consumer.
            for (const auto &p : consumers)
                saved += (p.trainable ? 2 * n * width : 0) + (p.lora ? 2 * n * width + 2 * n * rank : 0);
            return;
        }
        const bool anyNeeds = std::any_of(consumers.begin(), consumers.end(), [](const Projection &p) { return p.needsGrad(); });
        if (anyNeeds && !inputCounted)
            saved += dx * n * width;
        for (const auto &p : consumers)
            if (p.lora)
                saved += c * n * rank;
    }

    const int64_t n;
    const bool mixed;
    const int64_t c, rank;
    int64_t saved = 0;
    int64_t inputSaved = 0;   // part of `saved` that is the block's input tensor itself
};

} // namespace

ActivationBytes activationBytes(const RunConfig &config, bool fusedAttentionAvailable)
{
    const ModelShape &m = config.model;
    const TrainConfig &train = config.train;
    const int64_t b = train.microBatch, t = train.seqLen, n = b * t;
    const int64_t h = m.hiddenSize, heads = m.attentionHeads, hd = m.effectiveHeadDim();
    const int64_t qDim = heads * hd, kvDim = m.kvHeads * hd, inter = m.intermediateSize, vocab = m.vocabSize;
    const int64_t c = train.precision == Precision::Fp32 ? 4 : 2;
    // Element size of a parameter as the engine stores it: trainable fp32 masters (bf16 under pure
    // bf16), frozen ones in the compute dtype.
    auto paramBytes = [&](bool trains) { return trains ? trainableParamBytes(train.precision) : frozenParamBytes(train.precision); };
    const bool fused = fusedAttentionAvailable && train.attention != AttentionImpl::Math;
    const int64_t scores = c * b * heads * t * t;   // one B x heads x T x T tensor

    ActivationBytes out;
    out.fusedAttention = fused;
    bool embeddingTrains = false, finalNormTrains = false, headTrains = false;
    const auto layers = layerFlags(config, embeddingTrains, finalNormTrains, headTrains);
    // PEFT's enable_input_require_grads: recomputed blocks over a frozen embedding ask for grad.
    bool gradFlows = embeddingTrains || (train.recompute && !embeddingTrains);
    // The residual stream keeps the embedding's dtype: adding a 16-bit block output to an fp32
    // stream stays fp32, and a frozen 16-bit embedding (LoRA under autocast) makes it 16-bit.
    const int64_t r = paramBytes(embeddingTrains);

    const int64_t groups = std::max<int64_t>(1, heads / std::max<int64_t>(1, m.kvHeads));
    // q after the rotary, k after the rotary and v as the projection made them: alive in the
    // attention's frame while the kernel runs, though not what autograd keeps.
    const int64_t qkvAlive = c * n * (qDim + 2 * kvDim);
    // fp32 has no fused GQA kernel (flash takes 16-bit only, memory-efficient has no GQA), so the
    // engine expands k and v to all heads before SDPA (compat::groupedCausalAttention): the kernel
    // keeps the expanded copies and the projections' own k and v stay alive beside them.
    const bool expandedKv = fused && c == 4 && groups > 1;
    const int64_t kvKept = expandedKv ? qDim : kvDim;
    const int64_t expandedAlive = expandedKv ? 2 * c * n * qDim : 0;
    const int64_t rotaryCasts = c != 4 ? 2 * c * t * hd : 0;    // cos/sin cast per layer to the compute dtype
    int64_t noGradPeak = 0;

    for (const auto &layer : layers) {
        auto proj = [&](const char *name) {
            const auto it = layer.proj.find(name);
            return it == layer.proj.end() ? Projection {} : it->second;
        };
        BlockWalk walk(config, n);
        bool y1Grad = false;
        const int64_t dx1 = walk.norm(h, r, gradFlows, layer.inputNormTrains, paramBytes(layer.inputNormTrains), y1Grad, true);
        const auto q = proj("q_proj"), k = proj("k_proj"), v = proj("v_proj"), o = proj("o_proj");
        walk.linears(h, dx1, {q, k, v});
        const bool qkvGrad = y1Grad || q.needsGrad() || k.needsGrad() || v.needsGrad();
        // A matmul keeps its weight only to pass a gradient to its input: over an input that
        // needs none (LoRA's first block without recompute), lora_A's 16-bit copy is not kept.
        if (walk.mixed && !y1Grad)
            for (const auto &p : {q, k, v})
                out.unkeptAutocastCopies += p.lora ? 2 * walk.rank * h : 0;
        // Under autocast the fp32 norm output is alive but not kept (each projection keeps its cast).
        const int64_t y1Alive = walk.mixed && dx1 == 4 ? 4 * n * h : 0;
        int64_t forwardAbove = 0, atAttention = 0;
        if (qkvGrad) {
            if (fused) {
                // SDPA keeps q, k, v as given (GQA heads shared through enable_gqa), its output
                // (laid out [B, T, heads, hd], so o_proj's input is a view of it) and the fp32 log-sum-exp.
                walk.saved += c * n * (qDim + 2 * kvKept) + c * n * qDim + 4 * b * heads * t + rotaryCasts;
                atAttention = walk.saved;
                forwardAbove = walk.saved + y1Alive + (expandedKv ? 2 * c * n * kvDim : 0);
            } else {
                // Math path: the bmms keep contiguous copies of q and of k, v expanded to all heads
                // (the rotary output is laid out [B, T, heads, hd]); the softmax keeps its output,
                // which the second bmm keeps too; masked_fill keeps the T x T mask.
                walk.saved += 3 * c * n * qDim + t * t + rotaryCasts + scores;
                atAttention = walk.saved;
                // At the second bmm: the masked scores and the output beside the kept set, and
                // q, k, v as the rotary left them.
                forwardAbove = walk.saved + scores + c * n * qDim + qkvAlive + y1Alive;
            }
        }
        walk.linears(qDim, c, {o}, fused && qkvGrad);
        const bool attnGrad = qkvGrad || o.needsGrad();
        bool y2Grad = false;
        const int64_t dx2 = walk.norm(h, r, attnGrad || gradFlows, layer.postNormTrains, paramBytes(layer.postNormTrains), y2Grad);
        int64_t mlpBackward = 0, mlpLive = 0;
        if (m.activation == ActivationKind::Gelu) {
            const auto up = proj("up_proj"), down = proj("down_proj");
            walk.linears(h, dx2, {up});
            if (y2Grad || up.needsGrad())
                walk.saved += c * n * inter;            // gelu keeps its input
            walk.linears(inter, c, {down});
            // Backward: gelu's output gradient (replacing the down input when that was kept), then
            // up's output gradient.
            mlpBackward = 2 * c * n * inter - (down.needsGrad() ? c * n * inter : 0);
            mlpLive = 2 * c * n * inter;
        } else {
            const auto gate = proj("gate_proj"), up = proj("up_proj"), down = proj("down_proj");
            walk.linears(h, dx2, {gate, up});
            const bool gGrad = y2Grad || gate.needsGrad(), uGrad = y2Grad || up.needsGrad();
            walk.saved += (gGrad ? c * n * inter : 0)  // silu keeps gate's output
                          + (uGrad ? c * n * inter : 0) // silu(g) * up keeps silu(g) when up needs grad
                          + (gGrad ? c * n * inter : 0);// ... and up's output when gate needs grad
            walk.linears(inter, c, {down});
            // Backward: down's input gradient (replacing the product when down kept it), then the
            // multiply makes the gradients of silu(g) and of up while its kept inputs are held.
            mlpBackward = 3 * c * n * inter - (down.needsGrad() ? c * n * inter : 0);
            mlpLive = 4 * c * n * inter;
        }
        out.savedPerBlock.push_back(walk.saved);
        out.inputSavedPerBlock.push_back(walk.inputSaved);
        out.forwardAbovePerBlock.push_back(std::max(forwardAbove, walk.saved) - walk.inputSaved);
        out.backwardMlpExtraPerBlock.push_back(layer.downGradBytes + mlpBackward);
        out.backwardMlpCopiesFreedPerBlock.push_back(layer.downCopyBytes);
        out.backwardAttentionCopiesFreedPerBlock.push_back(layer.afterAttentionCopyBytes);
        // Attention's backward: what is kept up to the softmax, the gradients of everything after
        // it, and at the softmax's backward its input and output gradients (plus, on the math
        // path, the expanded v's gradient, or q, k, v's gradients from the fused kernel).
        const int64_t attnGrads = fused ? 3 * c * n * qDim : 2 * scores + c * n * qDim;
        out.backwardAttentionExtraPerBlock.push_back(atAttention + layer.afterAttentionGradBytes + attnGrads - walk.saved);
        // Under no_grad (recompute's forward) nothing is kept: the live set peaks at the second bmm
        // (norm output, q/k/v, expanded k and v, masked scores and probabilities, output) or in the
        // MLP (residual, norm output, its intermediates and down's output).
        const int64_t attnNoGrad = dx1 * n * h + qkvAlive + rotaryCasts +
                                   (fused ? c * n * qDim + expandedAlive : (groups > 1 ? 2 * c * n * qDim : 0) + 2 * scores + c * n * qDim + t * t);
        const int64_t mlpNoGrad = r * n * h + dx2 * n * h + mlpLive + c * n * h;
        noGradPeak = std::max({noGradPeak, attnNoGrad, mlpNoGrad});
        gradFlows = gradFlows || attnGrad || y2Grad || proj("down_proj").needsGrad();
    }
    out.blockInputBytes = r * n * h;
    out.blockNoGradPeak = noGradPeak;

    // Final norm and lm_head.
    {
        BlockWalk walk(config, n);
        bool yGrad = false;
        const int64_t dx = walk.norm(h, r, gradFlows, finalNormTrains, paramBytes(finalNormTrains), yGrad);
        Projection head;
        head.trainable = headTrains;
        walk.linears(h, dx, {head});
        out.headSaved = walk.saved;
        // The loss function holds the final norm's output until it returns; when lm_head does not
        // keep that very tensor (frozen head, or autocast's 16-bit copy), it is extra at the loss.
        const bool keptAsIs = headTrains && !(walk.mixed && dx == 4);
        out.headOutputAlive = keptAsIs ? 0 : dx * n * h;
    }
    // Loss: logits (compute dtype), their fp32 copy, log-softmax output (fp32, kept). In
    // backward, nll_loss's gradient, log-softmax's gradient and the kept output coexist.
    const int64_t logitsElems = n * vocab;
    out.logitsForwardPeak = c * logitsElems + (c != 4 ? 4 * logitsElems : 0) + 4 * logitsElems;
    out.logitsSaved = 4 * logitsElems;
    out.logitsBackwardPeak = 12 * logitsElems;
    out.sharedTables = 2 * 4 * t * hd;
    out.inputBytes = 2 * 8 * n;

    out.assumptions.push_back(fused ? "attention: fused scaled_dot_product_attention (no T x T scores kept)"
                                    : "attention: math path (B x heads x T x T probabilities kept per layer)");
    if (train.recompute)
        out.assumptions.push_back("recompute: each block keeps only its input; one block is rebuilt at a time in backward");
    return out;
}

} // namespace pb
