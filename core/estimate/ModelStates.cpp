#include "estimate/ModelStates.h"

#include "config/Nf4Format.h"
#include "config/ParameterTable.h"

#include <algorithm>
#include <map>

namespace pb {

int64_t trainableParamBytes(Precision precision) { return precision == Precision::Bf16 ? 2 : 4; }
// Frozen weights are stored in 16 bits whenever the compute is 16-bit: nothing needs a master copy.
int64_t frozenParamBytes(Precision precision) { return precision == Precision::Fp32 ? 4 : 2; }
// Optimizer moments follow the master weights: fp32 under fp32 and mixed, bf16 under pure bf16.
int64_t optimizerStateBytes(Precision precision) { return precision == Precision::Bf16 ? 2 : 4; }
bool usesAutocast(Precision precision) { return precision == Precision::Bf16Mixed || precision == Precision::Fp16Mixed || isFp8(precision); }

namespace {

// Bytes of optimizer state for one trainable parameter.
int64_t stateBytesFor(const RunConfig &config, const ParameterInfo &p, int64_t s)
{
    const auto &opt = config.train.optimizer;
    switch (opt.kind) {
    case OptimizerKind::AdamW:
    case OptimizerKind::Adam: return 2 * s * p.numel;                         // exp_avg, exp_avg_sq
    case OptimizerKind::Sgd: return opt.momentum > 0 ? s * p.numel : 0;       // momentum_buffer
    case OptimizerKind::Adagrad: return s * p.numel;                          // sum
    case OptimizerKind::RmsProp: return (opt.momentum > 0 ? 2 : 1) * s * p.numel; // square_avg (+ momentum_buffer)
    case OptimizerKind::AdamW8bit:
        // bitsandbytes: tensors under 4096 elements keep 32-bit states; larger ones two uint8
        // states plus one fp32 absmax per 256-element block and state.
        if (p.numel < 4096)
            return 2 * 4 * p.numel;
        return 2 * p.numel + 2 * 4 * ((p.numel + 255) / 256);
    case OptimizerKind::Adafactor:
        // Factored second moment for matrices (row and column means), full for vectors; no first
        // moment (beta1 = None, the Hugging Face default).
        if (p.shape.size() == 2)
            return 4 * (p.shape[0] + p.shape[1]);
        return 4 * p.numel;
    }
    return 0;
}

// Transient bytes of one parameter's update in LibTorch's C++ optimizers.
int64_t stepTemporaryFor(const RunConfig &config, int64_t numel, int64_t s)
{
    const auto &opt = config.train.optimizer;
    switch (opt.kind) {
    case OptimizerKind::AdamW:
    case OptimizerKind::Adam:
        // denom = (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps): the sqrt and the quotient coexist;
        // Adam with weight decay first makes grad + wd * p.
        return (2 + (opt.kind == OptimizerKind::Adam && opt.weightDecay > 0 ? 1 : 0)) * s * numel;
    case OptimizerKind::Sgd:
    case OptimizerKind::Adagrad:
    case OptimizerKind::RmsProp:
        // grad + wd * p when weight decay is on; Adagrad/RMSprop also build std = sqrt(state) + eps.
        return ((opt.weightDecay > 0 ? 1 : 0) + (opt.kind == OptimizerKind::Sgd ? 0 : 1)) * s * numel;
    case OptimizerKind::AdamW8bit:
    case OptimizerKind::Adafactor: return s * numel; // dequantised / reconstructed update
    }
    return 0;
}

} // namespace

int64_t cudaCachingBlockBytes(int64_t bytes)
{
    constexpr int64_t kMiB = 1024 * 1024;
    // Below 10 MiB a block is carved from a shared 2 or 20 MiB segment and split off; its rounding
    // to 512 bytes is left out here as it is everywhere else in the estimate.
    if (bytes < 10 * kMiB)
        return bytes;
    const int64_t size = (bytes + 511) / 512 * 512;
    const int64_t segment = (size + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
    return segment - size > kMiB ? size : segment;
}

ModelStateBytes modelStateBytes(const RunConfig &config)
{
    const Precision prec = config.train.precision;
    const int64_t tw = trainableParamBytes(prec);
    const int64_t fw = frozenParamBytes(prec);
    const int64_t s = optimizerStateBytes(prec);
    const bool autocast = usesAutocast(prec);
    ModelStateBytes out;
    std::map<int, int64_t> gatheredByBlock, gradientsByBlock, copiesByBlock;
    int64_t largestTrainableNumel = 0;
    std::map<std::string, std::pair<int64_t, bool>> pools; // bytes, trainable: one block each
    for (const auto &p : parameterTable(config)) {
        out.totalParams += p.numel;
        const int64_t stored = p.nf4 ? nf4StorageBytes(p.numel) : p.numel * (p.trainable ? tw : fw);
        if (p.layer >= 0 && !p.nf4) // an NF4 base is a buffer: never gathered
            gatheredByBlock[p.layer] += stored;
        out.nf4Weights += p.nf4 ? stored : 0;
        if (p.layer < 0) {
            out.rootWeightBytes += p.nf4 ? 0 : stored;
            out.rootGradientBytes += p.trainable ? p.numel * tw : 0;
        }
        out.largestParamBytes = std::max(out.largestParamBytes, stored);
        if (p.nf4) {
            for (const auto &part : nf4Tensors(p.name, p.numel))
                out.frozenBlockRounding += cudaCachingBlockBytes(part.numel * part.elementBytes) - part.numel * part.elementBytes;
            out.largestNf4Numel = std::max(out.largestNf4Numel, p.numel);
        } else if (!p.pool.empty()) {
            auto &pool = pools[p.pool];
            pool.first += stored;
            pool.second = p.trainable;
        } else {
            (p.trainable ? out.trainableBlockRounding : out.frozenBlockRounding) += cudaCachingBlockBytes(stored) - stored;
        }
        if (!p.trainable) {
            out.frozenWeights += stored;
            continue;
        }
        out.trainableParams += p.numel;
        out.trainableWeights += stored;
        out.gradients += p.numel * tw;
        out.optimizerStates += stateBytesFor(config, p, s);
        largestTrainableNumel = std::max(largestTrainableNumel, p.numel);
        // Gemma 4's per-layer table, the projection that feeds it and its norm: used beside the
        // embedding, so their gradients come last, not with the head's.
        const bool perLayerModel = p.layer < 0 && (p.name.rfind("model.embed_tokens_per_layer.", 0) == 0 || p.name.rfind("model.per_layer_", 0) == 0);
        if (p.layer >= 0)
            gradientsByBlock[p.layer] += p.numel * tw;
        else if (p.name == "model.embed_tokens.weight")
            out.embeddingGradientBytes += p.numel * tw;
        else if (p.layer < 0 && !perLayerModel)
            out.headGradientBytes += p.numel * tw;
        // Autocast caches a 16-bit copy of every trainable leaf a matmul reads; the embedding
        // lookup and the norms run in the weight's own dtype, but a tied embedding is also lm_head's
        // matmul weight (its copy measured at the peak by the peak recorder).
        const bool embedding = p.name == "model.embed_tokens.weight";
        // fp8: a projection's base (a decoder block's matrix) is cast to float8 at each matmul instead.
        const bool float8Base = isFp8(prec) && p.isMatrix && !p.isLora && p.layer >= 0;
        // (The per-layer table is only looked up: never cast.)
        const bool castByAutocast = autocast && !float8Base && p.name != "model.embed_tokens_per_layer.weight" &&
                                    ((p.isMatrix && !embedding) || (embedding && config.model.tieEmbeddings));
        if (castByAutocast) {
            out.autocastCopies += 2 * p.numel;
            if (p.layer >= 0)
                copiesByBlock[p.layer] += 2 * p.numel;
            else if (p.layer < 0)
                out.headCopyBytes += 2 * p.numel;
            if (p.name == "lm_head.weight")
                out.lmHeadCopyBytes += 2 * p.numel;
        }
    }
    for (const auto &[name, pool] : pools)
        (pool.second ? out.trainableBlockRounding : out.frozenBlockRounding) += cudaCachingBlockBytes(pool.first) - pool.first;
    // DeepSeek-V3's router correction bias: an fp32 buffer per sparse layer, outside the parameters.
    const MoeConfig &moe = config.model.moe;
    if (moe.scoreCorrectionBias)
        for (int64_t layer = 0; layer < config.model.layers; ++layer)
            if (moe.sparse(layer)) {
                out.frozenWeights += 4 * moe.experts;
                out.frozenBlockRounding += cudaCachingBlockBytes(4 * moe.experts) - 4 * moe.experts;
            }
    // Gemma 4's layer scalar: a one-element fp32 buffer per block.
    if (config.model.traits.layerScalar)
        for (int64_t layer = 0; layer < config.model.layers; ++layer) {
            out.frozenWeights += 4;
            out.frozenBlockRounding += cudaCachingBlockBytes(4) - 4;
        }
    // Blocks differ where a mixture of experts keeps some layers dense: a block's figures are the
    // largest block's, and the copies of all blocks are summed, not one block's times the count.
    for (const auto &[layer, bytes] : gradientsByBlock)
        out.perLayerGradientBytes = std::max(out.perLayerGradientBytes, bytes);
    const size_t blocks = static_cast<size_t>(std::max<int64_t>(config.model.layers, 0));
    out.gradientBytesByBlock.assign(blocks, 0);
    out.copyBytesByBlock.assign(blocks, 0);
    for (const auto &[layer, bytes] : gradientsByBlock)
        if (layer >= 0 && static_cast<size_t>(layer) < blocks)
            out.gradientBytesByBlock[static_cast<size_t>(layer)] = bytes;
    for (const auto &[layer, bytes] : copiesByBlock)
        if (layer >= 0 && static_cast<size_t>(layer) < blocks)
            out.copyBytesByBlock[static_cast<size_t>(layer)] = bytes;
    for (const auto &[layer, bytes] : copiesByBlock) {
        out.perLayerCopyBytes = std::max(out.perLayerCopyBytes, bytes);
        out.allLayerCopyBytes += bytes;
    }
    for (const auto &[layer, bytes] : gatheredByBlock)
        out.largestGatheredBlockBytes = std::max(out.largestGatheredBlockBytes, bytes);
    out.optimizerStepTemporary = stepTemporaryFor(config, largestTrainableNumel, s);

    if (isFp8(prec))
        out.assumptions.push_back(std::string(toString(prec)) + ": each projection's matmuls in float8 with dynamic scales, its weight cast at every matmul "
                                  "(no cached 16-bit copy); fp32 masters, everything else under bf16 autocast");
    else if (autocast)
        out.assumptions.push_back("autocast: trainable weights kept in fp32 (master) with a cached 16-bit copy of each trainable matrix; frozen weights stored in 16 bits");
    if (config.train.mode == TrainMode::Qlora)
        out.assumptions.push_back("qlora: each projection's frozen base in NF4 (4 bits a weight, an 8-bit maximum per 64 and an fp32 scale per 16384 weights); "
                                  "embedding, norms, lm_head and routers in 16 bits; one base at a time dequantised to 16 bits for its matmul");
    if (prec == Precision::Bf16)
        out.assumptions.push_back("pure bf16: weights, gradients and optimizer state in bf16");
    if (config.train.optimizer.kind == OptimizerKind::AdamW8bit || config.train.optimizer.kind == OptimizerKind::Adafactor)
        out.assumptions.push_back(std::string("optimizer ") + toString(config.train.optimizer.kind) + " is modelled from its reference implementation; the engine runs only torch-native optimizers");
    return out;
}

} // namespace pb
