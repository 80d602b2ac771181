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
          c(config.train.precision == Precision::Fp32 ? 4 : 2),
          r(config.train.precision == Precision::Bf16 ? 2 : 4), rank(config.train.lora.rank)
    {
    }

    // RMSNorm as LlamaRMSNorm: h = x.to(fp32); h * rsqrt(mean(h^2) + eps); weight * h.to(x dtype).
    // Returns the output's element size; `outGrad` tells whether it requires grad.
    int64_t norm(int64_t width, bool inGrad, bool weightTrains, bool &outGrad)
    {
        if (inGrad)
            saved += 4 * n * width + 4 * n;          // the fp32 h (x itself when x is fp32) and rsqrt
        if (weightTrains)
            saved += r * n * width;                  // h.to(x dtype), kept by weight * h
        outGrad = inGrad || weightTrains;
        return r;                                    // fp32 x stays fp32 even times a bf16 weight
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
    const int64_t c, r, rank;
    int64_t saved = 0;
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
    const int64_t r = train.precision == Precision::Bf16 ? 2 : 4;
    const bool fused = fusedAttentionAvailable && train.attention != AttentionImpl::Math;
    const int64_t scores = c * b * heads * t * t;   // one B x heads x T x T tensor

    ActivationBytes out;
    out.fusedAttention = fused;
    bool embeddingTrains = false, finalNormTrains = false, headTrains = false;
    const auto layers = layerFlags(config, embeddingTrains, finalNormTrains, headTrains);
    // PEFT's enable_input_require_grads: recomputed blocks over a frozen embedding ask for grad.
    bool gradFlows = embeddingTrains || (train.recompute && !embeddingTrains);
    int64_t blockPeak = 0;

    for (const auto &layer : layers) {
        auto proj = [&](const char *name) {
            const auto it = layer.proj.find(name);
            return it == layer.proj.end() ? Projection {} : it->second;
        };
        BlockWalk walk(config, n);
        bool y1Grad = false;
        const int64_t dx1 = walk.norm(h, gradFlows, layer.inputNormTrains, y1Grad);
        const auto q = proj("q_proj"), k = proj("k_proj"), v = proj("v_proj"), o = proj("o_proj");
        walk.linears(h, dx1, {q, k, v});
        const bool qkvGrad = y1Grad || q.needsGrad() || k.needsGrad() || v.needsGrad();
        int64_t beforeScores = 0;
        if (qkvGrad) {
            if (fused) {
                // SDPA keeps q, k, v as given (GQA heads shared through enable_gqa), its output
                // (laid out [B, T, heads, hd], so o_proj's input is a view of it) and the fp32 log-sum-exp.
                walk.saved += c * n * (qDim + 2 * kvDim) + c * n * qDim + 4 * b * heads * t;
            } else {
                // Math path: bmm keeps contiguous q and k (k, v expanded to all heads), the
                // softmax keeps its output, which the second bmm keeps with v; masked_fill keeps
                // the T x T mask; each layer casts the rotary tables to the compute dtype.
                walk.saved += 3 * c * n * qDim + t * t + (c != 4 ? 2 * c * t * hd : 0);
                beforeScores = walk.saved;
                walk.saved += scores;
            }
        }
        walk.linears(qDim, c, {o}, fused && qkvGrad);
        const bool attnGrad = qkvGrad || o.needsGrad();
        bool y2Grad = false;
        const int64_t dx2 = walk.norm(h, attnGrad || gradFlows, layer.postNormTrains, y2Grad);
        if (m.activation == ActivationKind::Gelu) {
            const auto up = proj("up_proj"), down = proj("down_proj");
            walk.linears(h, dx2, {up});
            if (y2Grad || up.needsGrad())
                walk.saved += c * n * inter;            // gelu keeps its input
            walk.linears(inter, c, {down});
        } else {
            const auto gate = proj("gate_proj"), up = proj("up_proj"), down = proj("down_proj");
            walk.linears(h, dx2, {gate, up});
            const bool gGrad = y2Grad || gate.needsGrad(), uGrad = y2Grad || up.needsGrad();
            walk.saved += (gGrad ? c * n * inter : 0)  // silu keeps gate's output
                          + (uGrad ? c * n * inter : 0) // silu(g) * up keeps silu(g) when up needs grad
                          + (gGrad ? c * n * inter : 0);// ... and up's output when gate needs grad
            walk.linears(inter, c, {down});
        }
        out.savedPerBlock.push_back(walk.saved);
        // Forward transient: the math path holds the raw and the scaled (then masked) scores
        // before the softmax output exists.
        blockPeak = std::max(blockPeak, fused || !qkvGrad ? walk.saved : std::max(walk.saved, beforeScores + 2 * scores + 2 * t * t));
        gradFlows = gradFlows || attnGrad || y2Grad || proj("down_proj").needsGrad();
    }
    const int64_t typicalSaved = out.savedPerBlock.empty() ? 0 : out.savedPerBlock.back();
    out.blockForwardExtra = std::max<int64_t>(0, blockPeak - typicalSaved);
    out.blockInputBytes = r * n * h;
    // Under no_grad nothing is kept: the live set peaks at the attention (q, k, v as the kernel
    // reads them, plus the raw and scaled scores on the math path) or in the MLP (silu(g), up and
    // their product), over the block input and the residual.
    const int64_t attnLive = fused ? 4 * c * n * qDim : 3 * c * n * qDim + 2 * scores;
    out.blockNoGradPeak = 2 * r * n * h + std::max(attnLive, 3 * c * n * inter);

    // Backward of one block: the residual stream's gradient (incoming and accumulated), the
    // largest set of intermediate gradients at once, and under autocast the 16-bit weight
    // gradient before its cast to the fp32 master's dtype.
    const int64_t mlpGrads = 3 * c * n * inter;
    const int64_t attnGrads = fused ? 4 * c * n * qDim : 2 * scores + c * n * qDim;
    const int64_t weightGradCast = usesAutocast(train.precision) ? 2 * std::max({h * inter, h * qDim}) : 0;
    out.blockBackwardExtra = 2 * r * n * h + std::max(mlpGrads, attnGrads) + weightGradCast;

    // Final norm and lm_head.
    {
        BlockWalk walk(config, n);
        bool yGrad = false;
        const int64_t dx = walk.norm(h, gradFlows, finalNormTrains, yGrad);
        Projection head;
        head.trainable = headTrains;
        walk.linears(h, dx, {head});
        out.headSaved = walk.saved;
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
