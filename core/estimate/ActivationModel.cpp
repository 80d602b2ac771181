#include "estimate/ActivationModel.h"

#include "config/ParameterTable.h"
#include "estimate/ModelStates.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace pb {
namespace {

struct Projection {
    bool trainable = false;   // the base weight trains: its matmul keeps the input
    bool lora = false;        // lora_A keeps the input, lora_B keeps A's output
    bool needsGrad() const { return trainable || lora; }
};

// One routed expert's (or the shared expert's) gate, up and down projections, with the gradient
// bytes of their trainable parameters and autocast's 16-bit copies of their matrices.
struct ExpertFlags {
    Projection proj[3];                   // gate, up, down (Mixtral's w1, w3, w2)
    int64_t gradBytes[3] = {0, 0, 0};
    int64_t copyBytes[3] = {0, 0, 0};
};

struct LayerFlags {
    std::map<std::string, Projection> proj;
    // The block's norms by role (config/ParameterTable.h's BlockNormNames): before attention, on its
    // output, before the MLP, on its output; whether each exists and whether its weight trains.
    bool normExists[4] = {false, false, false, false};
    bool normTrains[4] = {false, false, false, false};
    bool qNormTrains = false, kNormTrains = false;   // model.qk_norm
    int64_t downGradBytes = 0;            // gradients of down_proj (made first in the block's backward)
    int64_t afterAttentionGradBytes = 0;  // gradients of the MLP, the second norm and o_proj
    int64_t downCopyBytes = 0;            // autocast's 16-bit copies of down_proj's matrices
    int64_t afterAttentionCopyBytes = 0;  // ... of the MLP's and o_proj's matrices
    // A sparse layer (model.moe): its router, routed experts, shared expert and the shared
    // expert's sigmoid gate, each with its gradient and autocast copy bytes.
    bool sparse = false;
    Projection router, sharedGate;
    int64_t routerGradBytes = 0, routerCopyBytes = 0, sharedGateGradBytes = 0, sharedGateCopyBytes = 0;
    std::vector<ExpertFlags> experts;
    ExpertFlags shared;
};

// The role (0 gate, 1 up, 2 down) of an expert's projection named `proj` in the family's
// checkpoints (gate_proj/up_proj/down_proj, or Mixtral's w1/w3/w2); -1 for anything else.
int expertRole(const ExpertNames &names, const std::string &proj)
{
    if (proj == names.gate)
        return 0;
    if (proj == names.up)
        return 1;
    return proj == names.down ? 2 : -1;
}

// Per layer: which projections train or carry an adapter, from the engine's parameter table.
std::vector<LayerFlags> layerFlags(const RunConfig &config, bool &embeddingTrains, bool &finalNormTrains, bool &headTrains)
{
    const ModelShape &m = config.model;
    std::vector<LayerFlags> layers(static_cast<size_t>(std::max<int64_t>(m.layers, 0)));
    for (size_t i = 0; i < layers.size(); ++i)
        if (m.moe.sparse(static_cast<int64_t>(i))) {
            layers[i].sparse = true;
            layers[i].experts.resize(static_cast<size_t>(m.moe.experts));
        }
    const ExpertNames names = expertNames(m);
    const BlockNormNames normNames = blockNormNames(m);
    const std::string *normRoles[4] = {&normNames.beforeAttention, &normNames.afterAttention, &normNames.beforeMlp, &normNames.afterMlp};
    for (auto &layer : layers)
        for (int role = 0; role < 4; ++role)
            layer.normExists[role] = !normRoles[role]->empty();
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
        const int64_t bytes = p.trainable ? p.numel * trainableParamBytes(config.train.precision) : 0;
        const int64_t copy = p.trainable && usesAutocast(config.train.precision) && p.isMatrix ? 2 * p.numel : 0;
        // A sparse layer's MLP: everything under its prefix ("mlp." or Mixtral's "block_sparse_moe.").
        const std::string mlpPrefix = "model.layers." + std::to_string(p.layer) + "." + names.prefix;
        if (layer.sparse && p.name.compare(0, mlpPrefix.size(), mlpPrefix) == 0) {
            layer.afterAttentionGradBytes += bytes;
            layer.afterAttentionCopyBytes += copy;
            const std::string rest = p.name.substr(mlpPrefix.size());
            auto setFlags = [&](Projection &proj) {
                if (p.isLora)
                    proj.lora = true;
                else if (p.name.find(".weight") != std::string::npos)
                    proj.trainable = p.trainable;
            };
            // The router is "gate.weight": no gate_proj, and no expert's gate either.
            if (rest == "gate.weight") {
                setFlags(layer.router);
                layer.routerGradBytes += bytes;
                layer.routerCopyBytes += copy;
            } else if (rest.rfind("shared_expert_gate.", 0) == 0) {
                setFlags(layer.sharedGate);
                layer.sharedGateGradBytes += bytes;
                layer.sharedGateCopyBytes += copy;
            } else {
                // "experts.E.<proj>." (the family's names) or "shared_expert.<proj>." (always
                // gate_proj, up_proj, down_proj): the projection's role.
                static const ExpertNames sharedNames {"shared_expert.", "gate_proj", "up_proj", "down_proj"};
                ExpertFlags *expert = nullptr;
                std::string tail;
                int role = -1;
                if (p.expert >= 0 && static_cast<size_t>(p.expert) < layer.experts.size()) {
                    const std::string head = "experts." + std::to_string(p.expert) + ".";
                    expert = &layer.experts[static_cast<size_t>(p.expert)];
                    tail = rest.compare(0, head.size(), head) == 0 ? rest.substr(head.size()) : std::string();
                    role = expertRole(names, tail.substr(0, tail.find('.')));
                } else if (rest.compare(0, sharedNames.prefix.size(), sharedNames.prefix) == 0) {
                    expert = &layer.shared;
                    tail = rest.substr(sharedNames.prefix.size());
                    role = expertRole(sharedNames, tail.substr(0, tail.find('.')));
                }
                if (expert && role >= 0) {
                    setFlags(expert->proj[role]);
                    expert->gradBytes[role] += bytes;
                    expert->copyBytes[role] += copy;
                    if (role == 2) {
                        layer.downGradBytes += bytes;
                        layer.downCopyBytes += copy;
                    }
                }
            }
            continue;
        }
        // The norm of this parameter's role, if it is one of the block's norms.
        int normRole = -1;
        for (int role = 0; role < 4; ++role)
            if (!normRoles[role]->empty() && p.name.find("." + *normRoles[role] + ".weight") != std::string::npos)
                normRole = role;
        if (p.trainable) {
            // Made in the block's backward once the attention's part is reached: the MLP's, every norm
            // after attention's input, o_proj's; the MLP's output norm and down_proj's come first.
            if (p.name.find(".mlp.") != std::string::npos || normRole > 0 || p.name.find(".o_proj.") != std::string::npos) {
                layer.afterAttentionGradBytes += bytes;
                layer.afterAttentionCopyBytes += copy;
            }
            if (p.name.find(".down_proj.") != std::string::npos || normRole == 3) {
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
        if (normRole >= 0)
            layer.normTrains[normRole] = p.trainable;
        if (p.name.find("self_attn.q_norm.weight") != std::string::npos)
            layer.qNormTrains = p.trainable;
        if (p.name.find("self_attn.k_norm.weight") != std::string::npos)
            layer.kNormTrains = p.trainable;
    }
    if (config.model.tieEmbeddings)
        headTrains = embeddingTrains;
    return layers;
}

class BlockWalk {
public:
    BlockWalk(const RunConfig &config, int64_t tokens, bool libTorch2)
        : n(tokens), mixed(usesAutocast(config.train.precision)),
          c(config.train.precision == Precision::Fp32 ? 4 : 2), rank(config.train.lora.rank), meanKeepsInput(!libTorch2),
          kernelsFused(config.train.kernels == KernelPath::Fused),
          normScaleInFp32(config.model.traits.normScaleInFp32 || config.model.traits.normUnitOffset)
    {
    }

    // RMSNorm as LlamaRMSNorm: h = x.to(fp32); h * rsqrt(mean(h^2) + eps); weight * h.to(x dtype).
    // `dx` is the input's element size, `dw` the weight's. Returns the output's element size (the
    // promotion of the two); `outGrad` tells whether it requires grad. Nothing here is cast by
    // autocast (pow, mean, rsqrt and mul run in their inputs' dtypes).
    int64_t norm(int64_t width, int64_t dx, bool inGrad, bool weightTrains, int64_t dw, bool &outGrad, bool isBlockInput = false)
    {
        outGrad = inGrad || weightTrains;
        if (normScaleInFp32) {
            // Gemma's and OLMo 2's RMSNorm: h = x.float(); h' = h * rsqrt(mean(h^2) + eps); the fp32
            // product h' * (1 + weight | weight) rounded to x's dtype once. pow and the rsqrt
            // product keep h (x itself when fp32) and rsqrt's output; the weight's product keeps
            // h' for the weight's gradient. Never the fused kernel.
            if (inGrad) {
                saved += 4 * n * width + (meanKeepsInput ? 4 * n * width : 0) + 4 * n;
                if (isBlockInput)
                    inputSaved += dx == 4 ? 4 * n * width : 0;
            }
            if (weightTrains)
                saved += 4 * n * width;
            (void)dw;
            return dx;
        }
        if (kernelsFused) {
            // model/FusedOps.h's fusedRmsNorm keeps x itself and its per-row rstd, and returns
            // autocast's dtype under autocast (one 16-bit tensor the projections share).
            if (outGrad) {
                saved += dx * n * width + 4 * n;
                if (isBlockInput)
                    inputSaved += dx * n * width;
            }
            return mixed ? c : std::max(dx, dw);
        }
        if (inGrad) {
            // pow and the multiply by rsqrt keep h: x itself when x is fp32 (the block input,
            // counted here), else its fp32 copy; rsqrt keeps its result. LibTorch 1.13's mean keeps
            // its input (pow's output), 2.x only its size (measured by the peak recorder on an H200).
            saved += 4 * n * width + (meanKeepsInput ? 4 * n * width : 0) + 4 * n;
            if (isBlockInput)
                inputSaved += dx == 4 ? 4 * n * width : 0;
        }
        // weight * h' keeps h': the fp32 product itself when x is fp32, else its cast to x's dtype
        // (the fp32 product is then dropped).
        if (weightTrains)
            saved += (dx == 4 ? 4 : dx) * n * width;
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
    const bool meanKeepsInput;
    bool kernelsFused;   // train.kernels = fused: fused block and final norms (q/k norms stay eager) and dense SwiGLU
    bool normScaleInFp32; // model.norm_scale_fp32 / norm_unit_offset: Gemma's and OLMo 2's RMSNorm, always eager
    int64_t saved = 0;
    int64_t inputSaved = 0;   // part of `saved` that is the block's input tensor itself
};

// What a sparse layer's MLP (model/SparseMoe.cpp) adds to its block.
struct SparseMlpBytes {
    int64_t forwardPeak = 0;          // grad-mode forward: the block's kept set so far plus what is alive, at the MLP's worst point
    int64_t backwardExtra = 0;        // backward peak above the block's kept set and its incoming gradient
    int64_t backwardCopiesFreed = 0;  // autocast weight copies released by then
    int64_t noGradLive = 0;           // live set under no_grad at the worst point, residual and norm output included
    int64_t unkeptCopies = 0;         // lora_A copies over an input that needs no gradient
    bool trains = false;              // a weight of the MLP trains or carries an adapter
};

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
    const MoeConfig &moe = config.model.moe;
    const int64_t n = walk.n, c = walk.c, h = config.model.hiddenSize;
    const int64_t experts = std::max<int64_t>(moe.experts, 1), k = moe.expertsPerToken;
    const int64_t ei = moe.expertIntermediateSize, si = moe.sharedExpertIntermediateSize;
    const int64_t nk = n * k;                       // routed (token, choice) pairs, whatever the split
    const int64_t dOut = std::max(c, dx2);          // the experts' output times the weights (flat's dtype): promoted
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
    for (const auto &e : layer.experts) {
        expertsTrain = expertsTrain || e.proj[0].needsGrad() || e.proj[1].needsGrad() || e.proj[2].needsGrad();
        expertsRead = expertsRead || e.proj[0].needsGrad() || e.proj[1].needsGrad();
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
    BlockWalk routerReads(config, n, !walk.meanKeepsInput), sharedReads(config, n, !walk.meanKeepsInput);
    std::vector<Projection> readers {layer.router};
    std::vector<Projection> sharedReaders;
    if (hasShared) {
        sharedReaders = {sg, su};
        if (gated)
            sharedReaders.push_back(layer.sharedGate);
        readers.insert(readers.end(), sharedReaders.begin(), sharedReaders.end());
    }
    const bool flatKept = !mixedCasts && std::any_of(readers.begin(), readers.end(), [](const Projection &p) { return p.needsGrad(); });
    int64_t sharedReadsKept = 0;
    if (mixedCasts) {
        routerReads.linears(h, dx2, {layer.router});
        sharedReads.linears(h, dx2, sharedReaders);
        sharedReadsKept = sharedReads.saved;
        walk.saved += routerReads.saved + sharedReads.saved;
    } else {
        walk.linears(h, dx2, readers);
    }
    if (walk.mixed && !y2Grad)
        for (const auto &p : {sg, su})
            out.unkeptCopies += hasShared && p.lora ? 2 * walk.rank * h : 0;
    // softmax(logits, float) keeps its fp32 output; topk its int64 indices; weights / sum keeps the
    // fp32 weights and their sum; the pair weights' index_select keeps `order`.
    if (routerGrad)
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
    const int64_t savedAtPermute = walk.saved;
    // Each expert's SwiGLU on its slice, as the dense MLP: silu keeps gate's output, the product
    // silu(g) and up's output, down its input when it trains.
    std::vector<int64_t> expertKept(layer.experts.size(), 0);
    for (size_t i = 0; i < layer.experts.size(); ++i) {
        const ExpertFlags &e = layer.experts[i];
        BlockWalk ew(config, tokensOf(i), !walk.meanKeepsInput);
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
    const int64_t mulKept = (routerGrad ? c * nk * h : 0) + (expertsGrad ? dx2 * nk : 0);
    walk.saved += mulKept;
    const int64_t savedAfterMul = walk.saved;
    // index_add's source gradient is grad.index_select(index).expand_as(source): autograd keeps the
    // weighted outputs themselves (seen by the peak recorder, LibTorch 1.13 and 2.11 alike).
    const int64_t outputs = c * nk * h, weighted = dOut * nk * h;
    const int64_t indexAddKept = expertsGrad ? weighted : 0;
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
                                savedAfterMul + common + outputs + weighted + 2 * dx2 * n * h,            // index_add: zeros and its result
                                hasShared ? walk.saved - indexAddKept + common + outputs + weighted + 2 * dx2 * n * h + c * n * h : 0, // out + s
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

} // namespace

int64_t linearCrossEntropyBytesPerLogit(int64_t c, bool fusedKernels, bool softcap)
{
    // softcap: tanh's derivative of the chunk, in the logits' dtype, beside them.
    return (fusedKernels || c == 4 ? c : c + 4) + (softcap ? c : 0);
}

int64_t linearCrossEntropyChunkTokens(int64_t tokens, int64_t vocab, int64_t bytesPerLogit)
{
    constexpr int64_t budget = 512LL * 1024 * 1024;
    const int64_t chunk = budget / std::max<int64_t>(1, vocab * bytesPerLogit);
    return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(tokens, 1));
}

ActivationBytes activationBytes(const RunConfig &config, bool fusedAttentionAvailable, bool libTorch2, bool fusedKernels)
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
    const ModelTraits &traits = m.traits;
    const int64_t rotaryDim = m.rotaryDim();
    const bool plainRotary = rotaryDim == hd && !traits.ropeInterleaved;   // the fused rotary's form
    const double defaultScale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(hd, 1)));
    const bool rescaled = traits.attentionScale > 0 && std::abs(traits.attentionScale - defaultScale) > 1e-12 * defaultScale;
    // The dense MLP's form: the fused SwiGLU kernel only for separate gate and up projections.
    const bool fusedSwiglu = train.kernels == KernelPath::Fused && m.activation == ActivationKind::SwiGlu && !traits.fusedGateUp;
    int64_t noGradPeak = 0;
    bool anySparse = false;
    int64_t layerIndex = -1;

    for (const auto &layer : layers) {
        ++layerIndex;
        const bool hasRope = traits.usesRope(layerIndex);
        const bool window = traits.usesSliding(layerIndex);
        // cos/sin cast per layer to the compute dtype (none for a layer without rotary).
        const int64_t rotaryCasts = c != 4 && hasRope && !traits.ropeFp32 ? 2 * c * t * rotaryDim : 0;
        // Transformers' eager attention (model/Transformer.cpp's eagerAttention) where the fused kernel
        // cannot take the layer: soft-capped logits, or a window or scale without a fused kernel.
        const bool eagerForm = traits.attentionSoftcap > 0 || (!fused && (window || rescaled));
        const bool layerFused = fused && !eagerForm;
        auto proj = [&](const char *name) {
            const auto it = layer.proj.find(name);
            return it == layer.proj.end() ? Projection {} : it->second;
        };
        BlockWalk walk(config, n, libTorch2);
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
        if (!layer.normExists[0] && !(walk.mixed && r == 4) &&
            std::any_of(qkvReaders.begin(), qkvReaders.end(), [](const Projection &p) { return p.needsGrad(); }))
            walk.inputSaved += r * n * h;
        walk.linears(h, dx1, qkvReaders);
        bool qkvGrad = y1Grad || std::any_of(qkvReaders.begin(), qkvReaders.end(), [](const Projection &p) { return p.needsGrad(); });
        // A matmul keeps its weight only to pass a gradient to its input: over an input that
        // needs none (LoRA's first block without recompute), lora_A's 16-bit copy is not kept.
        if (walk.mixed && !y1Grad)
            for (const auto &p : qkvReaders)
                out.unkeptAutocastCopies += p.lora ? 2 * walk.rank * h : 0;
        // q/k norm (model.qk_norm): an RMSNorm on the projections' outputs (compute dtype) before
        // the rotary, per head (rows of head_dim) or over the whole projection. Its output takes the
        // weight's dtype where that is wider (an fp32 master under autocast), and so do q and k
        // after the rotary (k is promoted by q's tables).
        int64_t dq = c, dk = c, dkr = c;
        if (m.qkNorm != QkNorm::None) {
            const bool perHead = m.qkNorm == QkNorm::Head;
            BlockWalk qWalk(config, perHead ? n * heads : n, libTorch2), kWalk(config, perHead ? n * m.kvHeads : n, libTorch2);
            qWalk.kernelsFused = kWalk.kernelsFused = false;
            bool qOut = false, kOut = false;
            dq = qWalk.norm(perHead ? hd : qDim, c, y1Grad || q.needsGrad(), layer.qNormTrains, paramBytes(layer.qNormTrains), qOut);
            dk = kWalk.norm(perHead ? hd : kvDim, c, y1Grad || k.needsGrad(), layer.kNormTrains, paramBytes(layer.kNormTrains), kOut);
            walk.saved += qWalk.saved + kWalk.saved;
            dkr = std::max(dk, dq);
            qkvGrad = qkvGrad || qOut || kOut;
        }
        // cos/sin are cast to q's dtype: the compute dtype, or, for an fp32 q under a 16-bit compute
        // dtype, fp32 (no copy of the fp32 tables of an fp32 residual stream).
        // The fused rotary (q and k of one dtype) reads the fp32 tables as they are.
        const bool fusedRotary = train.kernels == KernelPath::Fused && dq == dk && plainRotary;
        const int64_t layerRotaryCasts = !hasRope || fusedRotary || traits.ropeFp32 ? 0 : dq == 4 && c != 4 ? (r == 4 ? 0 : 2 * 4 * t * rotaryDim) : rotaryCasts;
        // An fp32 q has no fused GQA kernel (flash takes 16-bit only, memory-efficient has no GQA),
        // so the engine expands k and v to all heads before SDPA (compat::groupedCausalAttention):
        // the kernel keeps the expanded copies and the projections' own k and v stay alive beside
        // them. q is fp32 under fp32, and under autocast after a q_norm with an fp32 weight.
        // A window goes to SDPA as a mask, and the kernels that take one have no grouped heads either.
        const bool expandedKv = layerFused && (dq == 4 || window) && groups > 1;
        const int64_t kvKept = expandedKv ? qDim : kvDim;
        // q after the rotary, k after the rotary and v as the projection made them: alive in the
        // attention's frame while the kernel runs, though not what autograd keeps (under autocast
        // the kernels keep 16-bit casts of an fp32 q and k).
        const int64_t qkvAlive = n * (dq * qDim + dkr * kvDim + c * kvDim);
        const int64_t expandedAlive = expandedKv ? (dkr + c) * n * qDim : 0;
        // Under autocast the fp32 norm output is alive but not kept (each projection keeps its cast).
        const int64_t y1Alive = walk.mixed && dx1 == 4 ? 4 * n * h : 0;
        int64_t forwardAbove = 0, atAttention = 0;
        if (qkvGrad) {
            if (layerFused) {
                // SDPA keeps q, k, v as given (GQA heads shared through enable_gqa), its output
                // (laid out [B, T, heads, hd], so o_proj's input is a view of it) and the fp32 log-sum-exp.
                walk.saved += c * n * (qDim + 2 * kvKept) + c * n * qDim + 4 * b * heads * t + layerRotaryCasts;
                // A fused qkv_proj's v is a view of its whole output, so the kernel keeping v keeps
                // the q and k columns' storage too (q and k are new tensors after the rotary).
                if (traits.fusedQkv && !expandedKv)
                    walk.saved += c * n * (qDim + kvDim);
                atAttention = walk.saved;
                // Beside them: the own k and v of expanded heads, and an fp32 q and k (expanded)
                // whose 16-bit casts the kernel keeps.
                forwardAbove = walk.saved + y1Alive + (expandedKv ? (dkr + c) * n * kvDim : 0) + (dq != c ? dq * n * qDim : 0) +
                               (dkr != c ? dkr * n * kvKept : 0);
            } else {
                // Math path: the bmms keep contiguous copies of q and of k, v expanded to all heads
                // (the rotary output is laid out [B, T, heads, hd]); the softmax keeps its output,
                // which the second bmm keeps too; masked_fill keeps the T x T mask.
                // Transformers' eager form (softmax in fp32, rounded back) keeps the fp32
                // probabilities and their cast, and a soft-cap's tanh keeps its output.
                const int64_t probabilities = eagerForm && c != 4 ? scores * 4 / c + scores : scores;
                const int64_t capped = traits.attentionSoftcap > 0 ? scores : 0;
                walk.saved += 3 * c * n * qDim + t * t + layerRotaryCasts + probabilities + capped;
                atAttention = walk.saved;
                // At the second bmm: the masked scores and the output beside the kept set, and
                // q, k, v as the rotary left them (and an fp32 k expanded, cast for the bmm).
                forwardAbove = walk.saved + scores + c * n * qDim + qkvAlive + y1Alive + (dkr != c && groups > 1 ? dkr * n * qDim : 0);
            }
        }
        walk.linears(qDim, c, {o}, layerFused && qkvGrad);
        bool attnGrad = qkvGrad || o.needsGrad();
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
            walk.linears(h, dx2, {up});
            if (y2Grad || up.needsGrad())
                walk.saved += c * n * inter;            // gelu keeps its input
            walk.linears(inter, c, {down});
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
            walk.linears(h, dx2, traits.fusedGateUp ? std::vector<Projection> {fusedGateUp} : std::vector<Projection> {gate, up});
            const bool gGrad = y2Grad || gate.needsGrad(), uGrad = y2Grad || up.needsGrad();
            if (fusedSwiglu) // the fused SwiGLU keeps gate's and up's outputs
                walk.saved += gGrad || uGrad ? 2 * c * n * inter : 0;
            else
                walk.saved += (gGrad ? c * n * inter : 0)  // silu keeps gate's output
                              + (uGrad ? c * n * inter : 0) // silu(g) * up keeps silu(g) when up needs grad
                              + (gGrad ? c * n * inter : 0);// ... and up's output when gate needs grad
            walk.linears(inter, c, {down});
            // Backward: down's input gradient (replacing the product when down kept it), then
            // the gradients of gate's and up's outputs are made while the kept inputs are held.
            mlpBackward = 3 * c * n * inter - (down.needsGrad() ? c * n * inter : 0);
            // A fused gate_up_proj gathers its halves' gradients into one [n, 2 x inter] tensor.
            if (traits.fusedGateUp && (gGrad || uGrad))
                mlpBackward += c * n * inter;
            // Under no_grad: gate's and up's outputs and the product (eager: silu(g) beside them).
            mlpLive = (fusedSwiglu ? 3 : 4) * c * n * inter;
        }
        if (layer.normExists[3]) { // a norm on the MLP's output
            bool outGrad = false;
            const bool mlpGrad = y2Grad || (layer.sparse ? sparse.trains : proj("down_proj").needsGrad());
            walk.norm(h, c, mlpGrad, layer.normTrains[3], paramBytes(layer.normTrains[3]), outGrad);
        }
        out.savedPerBlock.push_back(walk.saved);
        out.inputSavedPerBlock.push_back(walk.inputSaved);
        out.forwardAbovePerBlock.push_back(std::max({forwardAbove, walk.saved, sparse.forwardPeak}) - walk.inputSaved);
        out.backwardMlpExtraPerBlock.push_back(layer.sparse ? sparse.backwardExtra : layer.downGradBytes + mlpBackward);
        out.backwardMlpCopiesFreedPerBlock.push_back(layer.sparse ? sparse.backwardCopiesFreed : layer.downCopyBytes);
        out.backwardAttentionCopiesFreedPerBlock.push_back(layer.afterAttentionCopyBytes);
        // Attention's backward: what is kept up to the softmax, the gradients of everything after
        // it, and at the softmax's backward its input and output gradients (plus, on the math
        // path, the expanded v's gradient, or q, k, v's gradients from the fused kernel).
        // Soft-capped eager attention (Gemma 2), seen by the peak recorder on an H200: at the cap's
        // backward three fp32 score-sized gradients are alive (the probabilities', softmax's and
        // the cap's), the 16-bit probabilities already released.
        const int64_t cappedGrads = 3 * (scores / c) * 4 - (c != 4 ? scores : 0);
        const int64_t attnGrads = layerFused ? 3 * c * n * qDim : (traits.attentionSoftcap > 0 ? cappedGrads : 2 * scores) + c * n * qDim;
        out.backwardAttentionExtraPerBlock.push_back(atAttention + layer.afterAttentionGradBytes + attnGrads - walk.saved);
        // Under no_grad (recompute's forward) nothing is kept: the live set peaks at the second bmm
        // (norm output, q/k/v, expanded k and v, masked scores and probabilities, output) or in the
        // MLP (residual, norm output, its intermediates and down's output). Under autocast the
        // fused kernel's 16-bit casts of an fp32 q and k are alive beside them.
        const int64_t kernelCasts = layerFused ? (dq != c ? c * n * qDim : 0) + (dkr != c ? c * n * kvKept : 0) : 0;
        const int64_t attnNoGrad = dx1 * n * h + qkvAlive + layerRotaryCasts + kernelCasts +
                                   (layerFused ? c * n * qDim + expandedAlive : (groups > 1 ? (dkr + c) * n * qDim : 0) + 2 * scores + c * n * qDim + t * t);
        const int64_t mlpNoGrad = layer.sparse ? sparse.noGradLive : r * n * h + dx2 * n * h + mlpLive + c * n * h;
        noGradPeak = std::max({noGradPeak, attnNoGrad, mlpNoGrad});
        gradFlows = gradFlows || attnGrad || y2Grad || (layer.sparse ? sparse.trains : proj("down_proj").needsGrad());
    }
    out.blockInputBytes = r * n * h;
    out.blockNoGradPeak = noGradPeak;

    // Final norm and lm_head.
    int64_t headInputBytes = 0;
    bool headInputGrad = false;
    {
        BlockWalk walk(config, n, libTorch2);
        bool yGrad = false;
        const int64_t dx = walk.norm(h, r, gradFlows, finalNormTrains, paramBytes(finalNormTrains), yGrad);
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
        const int64_t chunk = linearCrossEntropyChunkTokens(n, vocab, perLogit);
        const int64_t gradInput = headInputGrad ? c * n * h : 0;
        const int64_t gradWeight = headTrains ? 4 * vocab * h : 0;
        out.headSaved = 0;
        out.headOutputAlive = headInputBytes * n * h + (headInputBytes != c ? c * n * h : 0);
        // The weight gradient accumulates inside the GEMM, except for a 16-bit product into fp32
        // without the CUDA path (the product is made, then added).
        const bool productMade = headTrains && c != 4 && !fusedKernels;
        out.logitsForwardPeak = std::max(perLogit * chunk * vocab, c * chunk * vocab + (productMade ? c * vocab * h : 0)) + gradInput + gradWeight;
        out.logitsSaved = gradInput + gradWeight;
        // Backward scales the kept gradients into new tensors while they are still held: the input's
        // in its dtype, the weight's in fp32 (then cast to a 16-bit weight's dtype).
        const int64_t headWeightBytes = paramBytes(headTrains);
        const int64_t gradWeightScaled = headTrains ? 4 * vocab * h + (headWeightBytes != 4 ? headWeightBytes * vocab * h : 0) : 0;
        out.logitsBackwardPeak = out.logitsSaved + (headInputGrad ? headInputBytes * n * h : 0) + gradWeightScaled;
        out.assumptions.push_back("loss: fused linear cross-entropy in chunks of " + std::to_string(chunk) + " tokens (train.kernels = fused" +
                                  (fusedKernels ? ", CUDA kernel" : ", LibTorch ops") + "); the full logits are never made");
        out.assumptions.push_back("norms: fused RMSNorm (train.kernels = fused) keeping its input and per-row statistics, output in the compute dtype");
        out.assumptions.push_back("MLP and rotary: fused SwiGLU keeping gate's and up's outputs (silu recomputed in backward); fused rotary on q and k "
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
    // mask every sliding layer shares.
    out.sharedTables = 2 * 4 * t * m.rotaryDim() * (m.traits.localRopeTheta > 0 ? 2 : 1) + (m.traits.slidingWindow > 0 ? t * t : 0);
    out.inputBytes = 2 * 8 * n;

    out.assumptions.push_back(fused ? "attention: fused scaled_dot_product_attention (no T x T scores kept)"
                                    : "attention: math path (B x heads x T x T probabilities kept per layer)");
    if (train.recompute)
        out.assumptions.push_back("recompute: each block keeps only its input; one block is rebuilt at a time in backward");
    if (anySparse)
        out.assumptions.push_back("mixture of experts: N*k routed token copies per sparse layer (N = micro_batch x seq_len tokens, k = experts_per_token), "
                                  "split evenly across the experts where a per-expert peak depends on it; expert parallelism not modelled");
    return out;
}

} // namespace pb
