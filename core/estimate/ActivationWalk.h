#pragma once
// Internal to the estimator: the walk through one decoder block that ActivationModel.cpp makes for
// dense layers and SparseMlpActivations.cpp for a sparse layer's MLP: which projections train or
// carry an adapter (from the parameter table), and the bytes autograd keeps as each op runs.
#include "config/ParameterTable.h"
#include "config/RunConfig.h"
#include "estimate/ModelStates.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace pb::activation {

struct Projection {
    bool trainable = false;   // the base weight trains: its matmul keeps the input
    bool lora = false;        // lora_A keeps the input, lora_B keeps A's output
    // fp8-tensorwise: a trainable base keeps its own float8 copy of the input (1 byte an element,
    // model/Fp8Linear.cpp) instead of sharing the 16-bit one.
    bool float8Input = false;
    bool needsGrad() const { return trainable || lora; }
    // Its matmuls keep their input X itself: a trainable base (unless it keeps its own float8 copy),
    // or an adapter that reads X as it is (BlockWalk::adapterKeepsX: one whose dropout runs apart
    // keeps its dropped copy of X instead, one over PEFT's cast its own cast).
    bool keepsInput(bool adapterKeepsX) const { return (trainable && !float8Input) || (lora && adapterKeepsX); }
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
    // qlora: the largest NF4 base of the attention and of the MLP (weights), dequantised whole for
    // its matmul in the forward and again in the backward.
    int64_t nf4AttentionNumel = 0, nf4MlpNumel = 0;
    // fp8: the largest base of the attention and of the MLP (weights), cast to float8 at each matmul.
    int64_t float8AttentionNumel = 0, float8MlpNumel = 0;
    Projection router, sharedGate;
    int64_t routerGradBytes = 0, routerCopyBytes = 0, sharedGateGradBytes = 0, sharedGateCopyBytes = 0;
    std::vector<ExpertFlags> experts;
    ExpertFlags shared;
    // Stacked experts (model.moe.stacked_experts): proj[0] is experts.gate_up_proj, proj[2]
    // experts.down_proj (proj[1] unused); gradBytes and copyBytes include their biases'.
    ExpertFlags stacked;
    bool routerBiasTrains = false;
    bool sinksTrain = false;              // model.attention_sinks: self_attn.sinks
    bool perLayerNormTrains = false;      // model.per_layer_input: post_per_layer_input_norm's weight
    // Gated DeltaNet (model.linear_attention): A_log, the gated norm's weight, conv1d's weight train.
    bool decayTrains = false, gatedNormTrains = false, convTrains = false;
};

class BlockWalk {
public:
    // `cudaDevice`: the run's device is a CUDA one (what LoRA dropout keeps differs, see linears).
    BlockWalk(const RunConfig &config, int64_t tokens, bool libTorch2, bool cudaDevice = false)
        : n(tokens), mixed(usesAutocast(config.train.precision)),
          c(config.train.precision == Precision::Fp32 ? 4 : 2), rank(config.train.lora.rank), meanKeepsInput(!libTorch2),
          kernelsFused(config.train.kernels == KernelPath::Fused),
          normScaleInFp32(config.model.traits.normScaleInFp32 || config.model.traits.normUnitOffset),
          loraDropout(config.train.lora.dropout > 0), cuda(cudaDevice),
          adaptersInNode(kernelsFused && mixed && !isFp8(config.train.precision) && config.train.mode != TrainMode::Qlora),
          peftCast(!kernelsFused && mixed && config.train.mode != TrainMode::Qlora)
    {
    }

    // RMSNorm as LlamaRMSNorm: h = x.to(fp32); h * rsqrt(mean(h^2) + eps); weight * h.to(x dtype).
    // `dx` is the input's element size, `dw` the weight's. Returns the output's element size (the
    // promotion of the two); `outGrad` tells whether it requires grad. Nothing here is cast by
    // autocast (pow, mean, rsqrt and mul run in their inputs' dtypes).
    int64_t norm(int64_t width, int64_t dx, bool inGrad, bool weightTrains, int64_t dw, bool &outGrad, bool isBlockInput = false)
    {
        outGrad = inGrad || weightTrains;
        if (kernelsFused) {
            // model/FusedOps.h's fusedRmsNorm (every form: Llama's, Gemma's, OLMo 2's) keeps x
            // itself and its per-row rstd, and returns autocast's dtype under autocast (one
            // 16-bit tensor the projections share).
            if (outGrad) {
                saved += dx * n * width + 4 * n;
                if (isBlockInput)
                    inputSaved += dx * n * width;
            }
            return mixed ? c : std::max(dx, dw);
        }
        if (normScaleInFp32) {
            // Gemma's and OLMo 2's RMSNorm: h = x.float(); h' = h * rsqrt(mean(h^2) + eps); the fp32
            // product h' * (1 + weight | weight) rounded to x's dtype once. pow and the rsqrt
            // product keep h (x itself when fp32) and rsqrt's output; the weight's product keeps
            // h' for the weight's gradient.
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

    // The temporaries of a post-norm's backward (a norm on a sub-layer's output, input and output
    // of element size `dx`), beyond what its forward kept and the gradient arriving from the
    // residual stream (element size `dy`; on the fused path its cast to the norm's dtype is one of
    // them, eager's figures hold whatever casts there are).
    // Seen by the peak recorder on CPU in a rebuilt block (the olmo2 and glm4 parity configs, seq
    // 64 x 16, bf16-mixed): eager, 16 bytes an element of fp32 temporaries at the pow's backward;
    // where the weight trains, 12 in the fp32-product form (OLMo 2's: the normalised input it kept
    // is released by then), 22 in Llama's (GLM-4's: the fp32 product's gradient, its 16-bit cast and
    // that cast's fp32 copy besides);
    // the composite of model/FusedOps.cpp (train.kernels = fused without the kernel), the fp32
    // normalised input, the gradient's fp32 copy, its product with the weight and the last
    // statement's three temporaries and its cast (20 + 4 + dx); the kernel, dx alone.
    int64_t postNormBackward(int64_t width, int64_t dx, int64_t dy, bool weightTrains, bool cudaKernel) const
    {
        const int64_t cast = dy != dx ? dx : 0;
        if (kernelsFused)
            return (cast + (cudaKernel ? dx : 20 + (dx != 4 ? 4 : 0) + (dx != 4 ? dx : 0))) * n * width;
        return (!weightTrains ? 16 : normScaleInFp32 || dx == 4 ? 12 : 22) * n * width;
    }

    // What one adapter's dropout keeps: on a CUDA device native_dropout's boolean mask, elsewhere the
    // noise tensor X's product keeps (X's dtype, its values 0 or 1 / (1 - p)). Outside the
    // projection's node (LoraLinearImpl::withAdapter's torch::dropout) only where X (element size
    // `dx`) needs a gradient; inside it (model/MixedLinear.h), always, to make the dropped copy again.
    int64_t dropoutMask(int64_t width, int64_t dx, bool inGrad) const { return inGrad ? (cuda ? 1 : dx) * n * width : 0; }
    // An adapter's dropout runs apart from its projection's node, its lora_A keeping a dropped copy
    // of X: everywhere but the node, which takes X in autocast's dtype on the fused path.
    bool dropsApart(int64_t dx) const { return loraDropout && !(adaptersInNode && dx == c); }
    // PEFT's input cast (LoraLinearImpl::withAdapter, the eager path under autocast, not QLoRA): an
    // adapter over a 16-bit X reads its own fp32 copy, which autocast casts back for lora_A (which
    // keeps that cast) and which its dropout drops: walked as an adapter over an fp32 X.
    bool castsAdapterInput(int64_t dx) const { return peftCast && dx != 4; }
    bool adapterKeepsX(int64_t dx) const { return !dropsApart(dx) && !castsAdapterInput(dx); }
    // Whether a matmul of `consumers` keeps their input X (element size `dx`) itself.
    bool keepsInputItself(const std::vector<Projection> &consumers, int64_t dx) const
    {
        const bool keepsX = adapterKeepsX(dx);
        return std::any_of(consumers.begin(), consumers.end(), [keepsX](const Projection &p) { return p.keepsInput(keepsX); });
    }

    // Linears reading one input X of `width` columns and element size `dx`. `castOnce`: their fp8
    // bases read X through one fp8LinearShared (model/Fp8Linear.h), which keeps one 16-bit cast of
    // an fp32 X, or one float8 copy, for all of them. `inGrad`: X needs a gradient (LoRA dropout
    // keeps its mask only then). An adapter with dropout (train.lora.dropout > 0) reads its own
    // dropped copy of X, which its lora_A keeps in X's place.
    void linears(int64_t width, int64_t dx, const std::vector<Projection> &consumers, bool inputCounted = false, bool castOnce = false,
                 bool inGrad = true)
    {
        auto float8Copy = [&](const Projection &p) { return p.trainable && p.float8Input ? n * width + 4 : 0; };
        auto baseCopy = [&](const Projection &p) { return p.trainable ? (p.float8Input ? float8Copy(p) : dx == 4 && mixed ? 2 * n * width : 0) : 0; };
        int64_t sharedCopy = 0;
        auto keepBaseCopy = [&](const Projection &p) {
            const int64_t bytes = baseCopy(p);
            if (!castOnce)
                saved += bytes;
            sharedCopy = std::max(sharedCopy, bytes);
        };
        if (mixed && dx == 4) {
            // Autocast casts a non-leaf input anew for every linear: one 16-bit copy per consumer
            // (of the fp32 dropped copy, where the adapter has dropout).
            for (const auto &p : consumers) {
                keepBaseCopy(p);
                saved += p.lora ? 2 * n * width + 2 * n * rank + (loraDropout ? dropoutMask(width, dx, inGrad) : 0) : 0;
            }
            saved += castOnce ? sharedCopy : 0;
            return;
        }
        const bool dropped = dropsApart(dx), inNode = loraDropout && !dropped, cast = castsAdapterInput(dx);
        if (keepsInputItself(consumers, dx) && !inputCounted)
            saved += dx * n * width;
        for (const auto &p : consumers) {
            if (p.lora && cast) // as the fp32 branch above: autocast's 16-bit copy of the (dropped) fp32 cast
                saved += 2 * n * width + 2 * n * rank + (loraDropout ? dropoutMask(width, 4, inGrad) : 0);
            else if (p.lora)
                saved += c * n * rank + (dropped ? dx * n * width + dropoutMask(width, dx, inGrad) : inNode ? dropoutMask(width, dx, true) : 0);
            keepBaseCopy(p);
        }
        saved += castOnce ? sharedCopy : 0;
    }

    const int64_t n;
    const bool mixed;
    const int64_t c, rank;
    const bool meanKeepsInput;
    bool kernelsFused;   // train.kernels = fused: fused block, final and q/k norms and the dense gated activation
    bool normScaleInFp32; // model.norm_scale_fp32 / norm_unit_offset: Gemma's and OLMo 2's RMSNorm (eager form)
    bool loraDropout;     // train.lora.dropout > 0: each adapter drops its input (a mask and a dropped copy)
    bool cuda;
    bool adaptersInNode;  // the fused path under autocast (not fp8, not QLoRA): adapters ride in the projections' nodes
    bool peftCast;        // the eager path under autocast (not QLoRA): adapters cast their input to fp32 first, as PEFT
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

// Per layer: which projections train or carry an adapter, from the engine's parameter table
// (`table`: parameterTable(config), built by the caller).
std::vector<LayerFlags> layerFlags(const RunConfig &config, const std::vector<ParameterInfo> &table, bool &embeddingTrains, bool &finalNormTrains,
                                   bool &headTrains);

// What the activation walk reads from the parameter table: the same for every micro-batch,
// sequence length, card and strategy of one config (it depends on the model, the training mode and
// the precision), so an estimator that walks many micro-batches reads the table once.
struct ModelFlags {
    std::vector<LayerFlags> layers;
    bool embeddingTrains = false, finalNormTrains = false, headTrains = false;
    // model.per_layer_input: the per-layer table, the projection of the embedded tokens, its norm.
    bool perLayerTableTrains = false, perLayerNormTrains = false;
    Projection perLayerModelProjection;
};
ModelFlags modelFlags(const RunConfig &config, const std::vector<ParameterInfo> &table);

// A sparse layer's MLP of stacked experts (model/StackedExperts.cpp); see StackedMlpActivations.cpp.
SparseMlpBytes stackedSparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive);
// Llama 4's (stacked experts whose input the router's sigmoid scales, and a shared expert); see
// InputScaledMlpActivations.cpp.
SparseMlpBytes inputScaledSparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive);

// A sparse layer's MLP (model/SparseMoe.cpp) on `walk`; see SparseMlpActivations.cpp.
SparseMlpBytes sparseMlp(const RunConfig &config, const LayerFlags &layer, BlockWalk &walk, int64_t dx2, bool y2Grad, int64_t residual, int64_t hAlive);

} // namespace pb::activation
