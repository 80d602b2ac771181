#include "estimate/MemoryEstimator.h"

#include "estimate/ActivationModel.h"
#include "estimate/ActivationWalk.h"
#include "estimate/Calibration.h"
#include "estimate/CardCapacities.h"
#include "estimate/FrameworkOverhead.h"
#include "estimate/ModelStates.h"
#include "estimate/StepCost.h"
#include "util/Errors.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

namespace pb {

struct ConfigEstimator::Memo {
    // What an estimate reads from the config's parameter table: the same for any options and
    // micro-batch (none of it reads the micro-batch or the sequence length).
    struct TableFacts {
        ModelStateBytes states;
        std::vector<ParameterInfo> table;   // parameterTable(config), for the step's FLOPs
        activation::ModelFlags flags;       // the activation walk's flags from it
    };

    std::mutex mutex;
    std::shared_ptr<const TableFacts> facts;
    // Activation walks by (micro-batch, fused attention, LibTorch 2, fused kernels): all a walk of
    // this config reads besides the parameter table's flags.
    std::map<std::tuple<int64_t, bool, bool, bool>, std::shared_ptr<const ActivationBytes>> activations;
    // Step costs of the config's own micro-batch by the activation bytes saved per micro-batch.
    std::map<int64_t, StepCost> stepCosts;
};

namespace {

using TableFacts = ConfigEstimator::Memo::TableFacts;

constexpr int64_t kMaxMicroBatch = 1 << 20;
// CPUGeneratorImpl::get_state() in LibTorch: THGeneratorStateNew (mt19937's 624 64-bit words,
// seed and position, the cached normal samples) serialised into a uint8 tensor.
constexpr int64_t kCpuGeneratorStateBytes = 5056;

struct Sharding {
    int64_t weights = 1, gradients = 1, optimizer = 1;
    bool gathered = false;       // FSDP / ZeRO-3: blocks are all-gathered around their use
};

Sharding shardingFor(ParallelStrategy strategy, int gpus)
{
    const int64_t n = std::max(gpus, 1);
    switch (strategy) {
    case ParallelStrategy::None:
    case ParallelStrategy::Ddp: return {};
    case ParallelStrategy::Zero1: return {1, 1, n, false};
    case ParallelStrategy::Zero2: return {1, n, n, false};
    case ParallelStrategy::Fsdp:
    case ParallelStrategy::Zero3: return {n, n, n, true};
    }
    return {};
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string backendOf(const EstimateOptions &options)
{
    if (options.device == DeviceKind::Cpu)
        return "cpu";
    return options.card.empty() ? "cuda" : cardCapacity(options.card).backend;
}

// The attention path the engine takes for this config on the options' device.
// fusedAttentionAvailable says LibTorch >= 2.0 (scaled_dot_product_attention exists).
bool libTorch2(const EstimateOptions &options) { return options.fusedAttentionAvailable.value_or(options.device == DeviceKind::Cuda); }

bool fusedAttentionFor(const RunConfig &config, const EstimateOptions &options)
{
    return usesFusedAttention(config, libTorch2(options), options.device == DeviceKind::Cuda);
}

// The parameter table's figures for `config`, read on the first call. Throws what
// modelStateBytes() and parameterTable() throw, and reads the table again on the next call then.
const TableFacts &tableFactsOf(ConfigEstimator::Memo &memo, const RunConfig &config)
{
    std::lock_guard<std::mutex> lock(memo.mutex);
    if (!memo.facts) {
        auto facts = std::make_shared<TableFacts>();
        facts->states = modelStateBytes(config);
        facts->table = parameterTable(config);
        facts->flags = activation::modelFlags(config, facts->table);
        memo.facts = std::move(facts);
    }
    return *memo.facts;
}

// The activations as the options' device runs them (a CUDA build runs the fused kernels), for
// `config` (the estimator's, at some micro-batch), walked once per micro-batch and device path.
std::shared_ptr<const ActivationBytes> activationBytesFor(ConfigEstimator::Memo &memo, const RunConfig &config, const EstimateOptions &options,
                                                          const TableFacts &facts)
{
    const bool fused = fusedAttentionFor(config, options), v2 = libTorch2(options), cuda = options.device == DeviceKind::Cuda;
    const auto key = std::make_tuple(config.train.microBatch, fused, v2, cuda);
    {
        std::lock_guard<std::mutex> lock(memo.mutex);
        const auto it = memo.activations.find(key);
        if (it != memo.activations.end())
            return it->second;
    }
    auto act = std::make_shared<const ActivationBytes>(activationBytes(config, facts.flags, fused, v2, cuda));
    std::lock_guard<std::mutex> lock(memo.mutex);
    return memo.activations.emplace(key, std::move(act)).first->second;
}

struct Phases {
    MemoryBreakdown construction, forward, backward, optimizer, validation, checkpoint;
    bool validates = false, checkpoints = false; // validation and checkpoint writes are scheduled (else left empty)
    int64_t peakTensors() const
    {
        return std::max({construction.tensors(), forward.tensors(), backward.tensors(), optimizer.tensors(), validation.tensors(), checkpoint.tensors()});
    }
};

// The three phase peaks for one micro-batch size, tensors only (workspace/framework added later),
// from the config's model states and its activations at that micro-batch on the options' device.
Phases phasePeaks(const RunConfig &config, const EstimateOptions &options, std::vector<std::string> *assumptions, const ModelStateBytes &ms,
                  const ActivationBytes &act)
{
    const auto &train = config.train;
    const Sharding sh = shardingFor(options.strategy, options.gpus);
    const int64_t layers = static_cast<int64_t>(act.savedPerBlock.size());
    const int64_t c = train.precision == Precision::Fp32 ? 4 : 2;

    MemoryBreakdown base;
    // train.cuda_graph warms up and captures the step on a side stream, which takes its own cuBLAS
    // and cuBLASLt workspaces for the rest of the run (an H100, LibTorch 2.11: Llama-3.2-1B full and
    // LoRA peaked 64 MiB + 2,560 B above the same step without the graph).
    const bool sideStreamWorkspaces = train.cudaGraph && options.device == DeviceKind::Cuda;
    base.blasWorkspaces = frameworkOverhead(backendOf(options)).allocatorBlasBytes * (sideStreamWorkspaces ? 2 : 1);
    // On CUDA each parameter holds the caching allocator's block, which can exceed its bytes (an
    // expert matrix of 11 MiB holds 12); unsharded only, as a shard's size is its own.
    const bool blocks = options.device == DeviceKind::Cuda && sh.weights == 1;
    base.frozenWeights = ceilDiv(ms.frozenWeights - ms.nf4Weights, sh.weights) + ms.nf4Weights + (blocks ? ms.frozenBlockRounding : 0);
    base.trainableWeights = ceilDiv(ms.trainableWeights, sh.weights) + (blocks ? ms.trainableBlockRounding : 0);
    const int64_t optimizerStates = ceilDiv(ms.optimizerStates, sh.optimizer);
    // The engine's AdamW on CUDA with LibTorch >= 2.1 is the fused kernel, updating in place.
    const bool fusedAdamW = options.device == DeviceKind::Cuda && libTorch2(options) && train.optimizer.kind == OptimizerKind::AdamW &&
                            !(options.torchVersion.rfind("2.0", 0) == 0);
    // One parameter's update transient; our ZeRO-2 gives each tensor one owner, which updates it
    // whole (the gemma2 config untied at vocabulary 65,536, AdamW, 2 CPU ranks, 1 MiB buckets: the
    // optimizer step peaked one [V, h] above the estimate, -10.65%, with the transient halved).
    const int64_t stepTemporary = fusedAdamW ? 0 : options.strategy == ParallelStrategy::Zero2 ? ms.optimizerStepTemporary : ceilDiv(ms.optimizerStepTemporary, sh.optimizer);
    // FSDP (as dist/FsdpHooks.cpp runs it) gathers one decoder block around its use, as stored,
    // and reshards it after; autocast still casts the gathered weights (its copies kept as without
    // sharding). 2 CPU ranks measured the per-rank peak within +0.5% with this (below).
    const int64_t gatheredBlock = sh.gathered ? ms.largestGatheredBlockBytes : 0;
    // The root unit (embedding, final norm, head) is not resharded after the forward (FSDP's root;
    // dist/FsdpHooks.cpp the same): gathered whole from the forward's start to the backward's end,
    // its unsharded gradient beside it (the engine makes that buffer at the forward's start).
    const int64_t rootGathered = sh.gathered ? ms.rootWeightBytes : 0;
    const int64_t rootHeld = sh.gathered ? ms.rootWeightBytes + ms.rootGradientBytes : 0;
    const int64_t copyPerLayer = ms.perLayerCopyBytes;
    const int64_t headCopy = ms.headCopyBytes;
    const int64_t copiesAll = ms.allLayerCopyBytes + headCopy;
    // DDP's reducer allocates flat buckets covering every trainable gradient
    // (gradient_as_bucket_view=False, the default); ZeRO-1/2 reduce through a bucket pair;
    // FSDP/ZeRO-3 hold one block's unsharded gradient before its reduce-scatter.
    int64_t gradientBuffers = 0;
    if (options.strategy == ParallelStrategy::Ddp)
        gradientBuffers = ms.gradients;
    else if (options.strategy == ParallelStrategy::Zero1 || options.strategy == ParallelStrategy::Zero2)
        gradientBuffers = std::min(2 * options.ddpBucketBytes, ms.gradients); // a small model fills no bucket
    else if (sh.gathered)
        gradientBuffers = ms.perLayerGradientBytes;
    // Overlapped DDP's buckets are held through every phase of a step, the forward's included (2 CPU
    // ranks, the llama fixture: the per-rank peak was 648,320 B, every fp32 gradient, above the
    // estimate without them, and equal to it with --no-overlap).
    const int64_t bucketsHeld = options.strategy == ParallelStrategy::Ddp && options.ddpOverlap && options.gpus > 1 ? gradientBuffers : 0;
    // DDP without overlap flattens the gradients into its buckets after the backward, when its last
    // transients (a tied embedding's two gradients and their sum) are gone (eager, the gemma2
    // fixture at vocabulary 65,536 on 2 CPU ranks: +20.1% with both at once).
    const bool buffersAfterBackward = options.strategy == ParallelStrategy::Ddp && !bucketsHeld;

    // The prefetcher (engine/Prefetcher.cpp) prepares a batch only while its queue of 3 has room:
    // beside the step's own, at most 3 (the peak recorder on CPU: 4 batches at every backward
    // peak; 5 counted put the tiny-vocabulary recompute rows +0.19% over it).
    const int64_t prefetched = options.device == DeviceKind::Cpu ? 3 : 0;
    const int64_t batches = act.inputBytes * (1 + prefetched);
    // The rotary tables live while the blocks run; after them only if something keeps them:
    // recompute saves them with every block, in fp32 the rotary multiply keeps them, and so does
    // the fused rotary for its backward; the eager rotary under a 16-bit compute dtype keeps each
    // layer's cast copy instead and the tables are dropped.
    const int64_t tablesAfterBlocks = train.recompute || c == 4 ? act.sharedTables : act.rotaryKeepsTables ? act.rotaryTables : 0;
    const int64_t fixed = batches + tablesAfterBlocks + act.stepHeld;
    // Autocast on CPU caches no weight copies: a copy no matmul keeps is gone after its matmul.
    const int64_t unkeptCopies = options.device == DeviceKind::Cpu ? act.unkeptAutocastCopies : 0;
    // Recompute saves the default generator's state with each block (dropout replays its masks).
    // On CPU that is a byte tensor of LibTorch's mt19937 generator state through the tensor
    // allocator: one per block from its forward to the end of backward, plus the state saved
    // while a block is rebuilt. A CUDA generator's state lives in host memory.
    const int64_t rngState = options.device == DeviceKind::Cpu && train.recompute ? kCpuGeneratorStateBytes : 0;
    const int64_t gradPerLayer = ceilDiv(ms.perLayerGradientBytes, sh.gradients);
    // A tied embedding is also lm_head: the head's gradient for it is made first and waits in the
    // autograd engine's input buffer for the embedding's own, which comes last; the two are then
    // summed out of place (the peak recorder saw both and their sum live at once on an H200).
    // Those two and their sum are whole even where the weight's gradient is sharded (FSDP's root
    // unit makes them in its unsharded buffer; the .grad is the shard's view): the gemma2 fixture
    // at vocabulary 65,536, eager FSDP on 2 CPU ranks, peaked 16.5% above the shard's share.
    const int64_t tiedGradient = config.model.tieEmbeddings ? ceilDiv(ms.embeddingGradientBytes, sh.gradients) : 0;
    const int64_t tiedWhole = config.model.tieEmbeddings ? ms.embeddingGradientBytes : 0;
    const int64_t gradHead = ceilDiv(ms.headGradientBytes, sh.gradients) + tiedGradient;
    // On the fused path the lookup adds its rows into the head's gradient where that is the fp32
    // weight's own (model/TiedEmbedding.h): no dense lookup gradient, no sum; the head's gradient
    // alone arrives at the weight. Either arrives beside the weight's .grad where one exists
    // (accumulation, FSDP's views): on CPU, the gemma2 fixture at vocabulary 65,536 with two
    // micro-batches, eager, peaked one [V, h] above the estimate without it (-16.5%).
    const bool tiedShared = train.kernels == KernelPath::Fused && train.precision != Precision::Bf16;
    const bool gradExists = train.gradAccum > 1 || sh.gathered;
    const int64_t tiedAtEnd = (tiedShared ? 0 : 2 * tiedWhole) + (gradExists ? tiedGradient : 0);
    const int64_t gradAll = ceilDiv(ms.gradients, sh.gradients);
    int64_t savedAll = 0;
    for (auto s : act.savedPerBlock)
        savedAll += s;

    const int64_t residual = act.blockInputBytes;   // one residual-stream tensor (or its gradient)
    // Gradient accumulation: the micro-batches after a step's first run their forward and backward
    // with the gradients so far alive, each new gradient added into them in place as it is made.
    // ZeRO-2 reduce-scatters only after the last micro-batch, so the earlier ones add into every
    // gradient unsharded (2 CPU ranks: +0.62 MiB measured where the sharded share gave +0.31).
    const bool accumulating = train.gradAccum > 1;
    // FSDP's root unit stays gathered between micro-batches, accumulating into its unsharded buffer
    // (counted in rootHeld): its shard has no gradient until the step's last backward.
    const int64_t accumulated = !accumulating                                   ? 0
                                : options.strategy == ParallelStrategy::Zero2 ? ms.gradients
                                : sh.gathered                                 ? gradAll - ceilDiv(ms.rootGradientBytes, sh.gradients)
                                                                              : gradAll;
    // Copies are per block only where autocast makes them.
    // Each block's own gradients and copies where the model states list them per block (blocks
    // differ: Gemma 4's global layers, E2B's double-wide MLPs, a mixture's dense layers); else the
    // largest block's.
    const bool byBlock = ms.gradientBytesByBlock.size() == static_cast<size_t>(layers) && ms.copyBytesByBlock.size() == static_cast<size_t>(layers);
    auto blockGradients = [&](int64_t i) { return byBlock ? ceilDiv(ms.gradientBytesByBlock[static_cast<size_t>(i)], sh.gradients) : gradPerLayer; };
    auto blockCopies = [&](int64_t i) { return copyPerLayer == 0 ? 0 : byBlock ? ms.copyBytesByBlock[static_cast<size_t>(i)] : copyPerLayer; };
    Phases out;
    // Forward: optimizer state exists from the first step on; gradients were dropped (set_to_none)
    // by the last step, so only a later micro-batch sees them.
    out.forward = base;
    out.forward.optimizer = optimizerStates;
    out.forward.gradients = accumulated + bucketsHeld;
    if (!train.recompute) {
        // Every trainable matrix's 16-bit copy is kept: by the matmul that passes a gradient
        // through it and, on CUDA, by autocast's cache until the forward ends.
        // Inside a block only the copies of the blocks up to it exist: where the peak is early (the
        // blocks below LoRA's first adapter run without a gradient) the later ones are not yet made.
        const int64_t lossCopies = copiesAll - unkeptCopies;
        int64_t inBlocks = 0, inBlocksCopies = 0, below = 0, copiesUpTo = 0;
        for (int64_t i = 0; i < layers; ++i) {
            const auto k = static_cast<size_t>(i);
            copiesUpTo += blockCopies(i);
            const int64_t at = below + residual + act.forwardAbovePerBlock[k];
            // (Without per-block lists each block counts the largest's copies: never past them all.)
            const int64_t copies = std::min(copiesUpTo, copiesAll - headCopy) - (options.device == DeviceKind::Cpu ? act.unkeptCopiesUpToBlock[k] : 0);
            if (at + copies > inBlocks + inBlocksCopies) {
                inBlocks = at;
                inBlocksCopies = copies;
            }
            below += act.savedPerBlock[k];
        }
        inBlocks += act.sharedTables - tablesAfterBlocks + gatheredBlock;
        const int64_t atLoss = savedAll + act.headSaved + act.headOutputAlive + act.logitsForwardPeak;
        const bool lossPeak = atLoss + lossCopies >= inBlocks + inBlocksCopies;
        out.forward.trainableWeights += lossPeak ? lossCopies : inBlocksCopies;
        out.forward.activations = (lossPeak ? atLoss - act.logitsForwardPeak : inBlocks) + fixed + rootHeld;
        out.forward.logits = lossPeak ? act.logitsForwardPeak : 0;
    } else {
        // Blocks run under no_grad: nothing keeps their weights' 16-bit copies; only lm_head's
        // copy (made with grad) is kept.
        out.forward.trainableWeights += headCopy;
        const int64_t inputs = layers * residual;
        const int64_t atLoss = inputs + layers * rngState + act.headSaved + act.headOutputAlive + act.logitsForwardPeak;
        const int64_t inBlock = inputs + layers * rngState + act.blockNoGradPeak + gatheredBlock;
        out.forward.activations = (atLoss >= inBlock ? atLoss - act.logitsForwardPeak : inBlock) + fixed + rootHeld;
        out.forward.logits = atLoss >= inBlock ? act.logitsForwardPeak : 0;
    }

    // The fused loss computes its gradients in the forward pass: the head's 16-bit weight copy is
    // gone by the backward (the eager head's matmul keeps it for its input's gradient).
    const int64_t headCopyInBackward = train.kernels == KernelPath::Fused ? headCopy : 0;
    // Backward: the loss gradient first, then block by block from the top, freeing each block's
    // saved tensors (and autocast copies) as its gradients appear; the embedding's gradient last.
    MemoryBreakdown best = base;
    int64_t bestTotal = -1;
    auto consider = [&](int64_t activations, int64_t logits, int64_t gradients, int64_t copies) {
        MemoryBreakdown b = base;
        b.optimizer = optimizerStates;
        b.trainableWeights += copies;
        b.activations = activations + fixed + rootHeld;
        b.logits = logits;
        b.gradients = gradients;
        if (b.tensors() > bestTotal) {
            bestTotal = b.tensors();
            best = b;
        }
    };
    auto copiesFreedAtMlp = [&](size_t k) { return copyPerLayer > 0 ? act.backwardMlpCopiesFreedPerBlock[k] : 0; };
    auto copiesFreedAtAttention = [&](size_t k) { return copyPerLayer > 0 ? act.backwardAttentionCopiesFreedPerBlock[k] : 0; };
    // A block's gradients alive at its backward: those of the head and the blocks above it, or
    // under accumulation every gradient (each new one is added into its .grad as it is made, also
    // in a rebuilt block, whose backward runs torch::autograd::backward).
    // (DDP without overlap makes its buckets only after the backward: with 2 micro-batches, the
    // untied gemma2 config on 2 CPU ranks measured +6.45% with them counted here. ZeRO-2 reduces
    // each bucket to its owner during the last backward, dist/DataParallelHooks.cpp.)
    const bool zero2Buckets = options.strategy == ParallelStrategy::Zero2 && options.gpus > 1;
    const bool buffersInBackward = !buffersAfterBackward && (options.strategy != ParallelStrategy::Zero2 || zero2Buckets);
    // ZeRO-2 reduces a tensor larger than a bucket in its own .grad, launched at the next gradient:
    // an untied head's stays whole on every rank until then, through the final norm's backward and
    // into the top block's.
    const bool headWholeAtTop = zero2Buckets && !config.model.tieEmbeddings && ms.headGradientBytes > options.ddpBucketBytes;
    const int64_t gradHeadTop = headWholeAtTop ? ms.headGradientBytes + tiedGradient : gradHead;
    auto gradientsAt = [&](int64_t above, bool top = false) {
        return (accumulating ? accumulated : (top ? gradHeadTop : gradHead) + above) + (buffersInBackward ? gradientBuffers : 0);
    };
    // An untied eager head under autocast: its weight's gradient comes out of the logits' matmul
    // in the compute dtype and is cast to the fp32 master's (its copy gone with the matmul's
    // backward), the two alive at once, and under accumulation beside every .grad before the cast
    // is added into its own (the gemma2 config untied at vocabulary 65,536, 2 micro-batches, eager
    // on CPU: one [V, h] in bf16 above the loss's peak, -1.65% without this).
    const int64_t lmHeadCopy = ms.lmHeadCopyBytes; // 0 where lm_head is frozen, tied or not cast
    const bool headGradientCast = train.kernels != KernelPath::Fused && !config.model.tieEmbeddings && lmHeadCopy > 0;
    auto considerHeadGradientCast = [&](int64_t activations, int64_t copies) {
        if (!headGradientCast)
            return;
        const int64_t castGradient = lmHeadCopy / c * 4;
        // (Only DDP's overlap buckets exist this early in our engine's backward.)
        consider(activations, 0, (accumulating ? accumulated : 0) + castGradient + lmHeadCopy + bucketsHeld, copies - lmHeadCopy);
    };
    if (!train.recompute) {
        consider(savedAll + act.headSaved, act.logitsBackwardPeak, accumulated + bucketsHeld, copiesAll - unkeptCopies - headCopyInBackward);
        considerHeadGradientCast(savedAll + act.headSaved, copiesAll - unkeptCopies);
        consider(savedAll + act.headSaved + act.finalNormBackwardPeak, 0, gradientsAt(0, true), copiesAll - unkeptCopies - headCopyInBackward);
        int64_t below = savedAll;
        // The gradients of the blocks above, the copies of this block and those below it.
        int64_t gradsAbove = 0, copiesUpTo = 0;
        for (int64_t i = 0; i < layers; ++i)
            copiesUpTo += blockCopies(i);
        for (int64_t i = layers - 1; i >= 0; --i) {
            const auto k = static_cast<size_t>(i);
            const int64_t grads = gradientsAt(gradsAbove, i == layers - 1);
            // The block's kept tensors, the gradient arriving at its output, and its peak in the
            // MLP or at the attention's softmax (with the copies released by then).
            const int64_t copies = copiesUpTo - unkeptCopies;
            consider(below + residual + act.backwardPostNormExtraPerBlock[k] + gatheredBlock, 0, grads, copies);
            consider(below + residual + act.backwardMlpExtraPerBlock[k] + gatheredBlock, 0, grads, copies - copiesFreedAtMlp(k));
            consider(below + residual + act.backwardAttentionExtraPerBlock[k] + gatheredBlock, 0, grads, copies - copiesFreedAtAttention(k));
            below -= act.savedPerBlock[k];
            gradsAbove += blockGradients(i);
            copiesUpTo -= blockCopies(i);
        }
    } else {
        consider(layers * residual + layers * rngState + act.headSaved, act.logitsBackwardPeak, accumulated + bucketsHeld, headCopy - headCopyInBackward);
        considerHeadGradientCast(layers * residual + layers * rngState + act.headSaved, headCopy);
        consider(layers * residual + layers * rngState + act.headSaved + act.finalNormBackwardPeak, 0, gradientsAt(0, true), headCopy - headCopyInBackward);
        int64_t gradsAbove = 0;
        for (int64_t i = layers - 1; i >= 0; --i) {
            const auto k = static_cast<size_t>(i);
            const int64_t grads = gradientsAt(gradsAbove, i == layers - 1);
            const int64_t copyPerBlock = blockCopies(i);
            gradsAbove += blockGradients(i);
            // Inputs of this block and the ones below, the incoming gradient (held by the
            // recompute node while the block's own backward runs), then either the re-run
            // forward's peak or the rebuilt block (its input is the saved one, not counted twice),
            // its output, and the backward's peak in the MLP or at the attention's softmax.
            const int64_t held = (i + 1) * residual + residual + (layers + 1) * rngState;
            const int64_t rebuilt = act.savedPerBlock[k] - act.inputSavedPerBlock[k] - act.rebuiltSavingPerBlock[k] + residual;
            consider(held + act.forwardAbovePerBlock[k] - act.rebuiltSavingPerBlock[k] + gatheredBlock, 0, grads, copyPerBlock);
            consider(held + rebuilt + act.backwardPostNormExtraPerBlock[k] + gatheredBlock, 0, grads, copyPerBlock);
            consider(held + rebuilt + act.backwardMlpExtraPerBlock[k] + gatheredBlock, 0, grads, copyPerBlock - copiesFreedAtMlp(k));
            // By the attention's backward the MLP's gradient has been added to the residual one in a
            // new tensor: the recompute node still holds the incoming gradient, so the rebuilt
            // graph's sum cannot take its storage as it does without recompute.
            consider(held + rebuilt + residual + act.backwardAttentionExtraPerBlock[k] + gatheredBlock, 0, grads, copyPerBlock - copiesFreedAtAttention(k));
        }
    }
    // ZeRO-2: the last gradient made (an untied embedding's) is copied whole into its bucket on
    // every rank (or, larger than a bucket, reduced in its own .grad), and a rank that does not own
    // it holds it until the bucket is reduced, beside its
    // earlier micro-batches' sum where there are some (each other gradient of theirs is dropped
    // when its own arrives). The gemma2 config untied at vocabulary 65,536 on 2 CPU ranks: -14.1%
    // and -5.8% (2 micro-batches) without these, one or two [V, h] in fp32.
    const int64_t lastGradientInFlight = zero2Buckets && !config.model.tieEmbeddings ? (accumulating ? 2 : 1) * ms.embeddingGradientBytes : 0;
    consider(0, 0, gradAll + (buffersAfterBackward ? 0 : gradientBuffers) + tiedAtEnd + lastGradientInFlight, 0);
    consider(0, 0, gradAll + gradientBuffers, 0);
    out.backward = best;

    // Optimizer step: weights, gradients, states and the largest per-parameter transient.
    out.optimizer = base;
    out.optimizer.gradients = gradAll + (options.strategy == ParallelStrategy::Ddp ? gradientBuffers : 0);
    // ZeRO-2: after the step each owner broadcasts its updated tensors, two flat buckets at a time
    // (one larger than a bucket in place; dist/DataParallelHooks.cpp), beside the states and this
    // rank's gradients.
    const int64_t broadcastBuckets = zero2Buckets ? std::min(2 * options.ddpBucketBytes, ceilDiv(ms.gradients, sh.gradients)) : 0;
    out.optimizer.optimizer = optimizerStates + std::max(stepTemporary, broadcastBuckets);
    out.optimizer.activations = batches;

    // The run's other phases. Construction: every parameter made in the dtype it keeps, nothing
    // else yet (no full-precision transient, no library workspace before the first matmul).
    out.construction = base;
    out.construction.blasWorkspaces = 0;
    if (ms.largestNf4Numel > 0) {
        // qlora: a base drawn as a 16-bit matrix, then quantised a slice of 2^20 weights at a time
        // (model/Nf4.cpp: fp32 values, their quotient by the block maxima and the int32 codes at
        // once), beside the fp32 maxima of the matrix and the slice's, the 16 values and their 15
        // midpoints.
        const int64_t slice = std::min<int64_t>(ms.largestNf4Numel, 1 << 20);
        out.construction.activations = 2 * ms.largestNf4Numel + 12 * slice + 4 * ceilDiv(ms.largestNf4Numel, 64) + 4 * ceilDiv(slice, 64) + 4 * (16 + 15);
    }
    // Validation, under no_grad after the first step: the optimizer state stays, nothing is saved
    // for a backward; the larger of one block's own peak and the loss over the final hidden state.
    out.validates = config.validation.everySteps > 0 && config.validation.batches > 0;
    if (out.validates) {
        out.validation = base;
        out.validation.optimizer = optimizerStates;
        out.validation.gradients = bucketsHeld;
        const int64_t validationBlock = residual + act.blockNoGradPeak + act.noGradHeld + gatheredBlock;
        const int64_t validationLoss = residual + act.headSaved + act.headOutputAlive;
        out.validation.activations = std::max(validationBlock, validationLoss) + batches + rootGathered;
        out.validation.logits = validationLoss + act.logitsForwardPeak > validationBlock ? act.logitsForwardPeak : 0;
    }
    // A checkpoint write after the optimizer step (gradients dropped): the state it writes, staged
    // through host buffers that are not device tensors.
    out.checkpoints = config.checkpoint.everySteps > 0;
    if (out.checkpoints) {
        out.checkpoint = base;
        out.checkpoint.optimizer = optimizerStates;
        out.checkpoint.gradients = bucketsHeld;
        out.checkpoint.activations = batches;
    }

    if (assumptions) {
        *assumptions = ms.assumptions;
        assumptions->push_back("the whole run's peak: construction (each parameter made in the dtype it keeps), warm-up and training steps, validation "
                               "under no_grad and checkpoint writes; the largest decides the fit");
        if (sh.weights > 1)
            assumptions->push_back("construction under sharding: each rank builds only its share of the weights (a sharded loader)");
        assumptions->insert(assumptions->end(), act.assumptions.begin(), act.assumptions.end());
        assumptions->push_back("gradients dropped between steps (zero_grad set_to_none); optimizer state present from the first step on");
        if (sideStreamWorkspaces)
            assumptions->push_back("train.cuda_graph: the capture's side stream holds a second pair of cuBLAS/cuBLASLt workspaces from the first capture on");
        if (options.strategy == ParallelStrategy::Ddp)
            assumptions->push_back("DDP: flat gradient buckets cover every trainable parameter (gradient_as_bucket_view=False), held from the first step on");
        if (sh.gathered)
            assumptions->push_back("FSDP/ZeRO-3: parameters, gradients and optimizer state sharded over " + std::to_string(options.gpus) +
                                   " devices; one decoder block gathered as stored around its use, the root unit (embedding, final norm, head) "
                                   "gathered with its unsharded gradient from the forward to the end of backward, autocast's copies of the gathered "
                                   "weights as without sharding (the engine's FSDP, measured on CPU ranks)");
    }
    return out;
}

void validateOptions(const RunConfig &config, const EstimateOptions &options)
{
    if (options.gpus < 1)
        throw InvalidInputError("--gpus", "must be at least 1");
    if (options.gpus > 1 && options.strategy == ParallelStrategy::None)
        throw InvalidInputError("--strategy", "more than one GPU needs a strategy: ddp, fsdp, zero1, zero2 or zero3");
    if (!(options.headroomFraction >= 0.0 && options.headroomFraction < 1.0))
        throw InvalidInputError("--headroom", "must be a fraction in [0, 1)");
    if (config.model.layers < 1 || config.model.hiddenSize < 1 || config.model.vocabSize < 1 || config.model.attentionHeads < 1)
        throw InvalidInputError("model", "the shape needs layers, hidden_size, attention_heads and vocab_size above zero");
    if (config.train.microBatch < 1 || config.train.seqLen < 1)
        throw InvalidInputError("train", "micro_batch and seq_len must be at least 1");
}

MemoryBreakdown withOverheads(MemoryBreakdown b, const FrameworkOverhead &fw)
{
    b.workspace = fw.blasWorkspaceBytes + static_cast<int64_t>(std::llround(fw.fragmentationFraction * static_cast<double>(b.tensors())));
    b.framework = fw.contextBytes;
    return b;
}

} // namespace

const char *toString(ParallelStrategy strategy)
{
    switch (strategy) {
    case ParallelStrategy::None: return "none";
    case ParallelStrategy::Ddp: return "ddp";
    case ParallelStrategy::Fsdp: return "fsdp";
    case ParallelStrategy::Zero1: return "zero1";
    case ParallelStrategy::Zero2: return "zero2";
    case ParallelStrategy::Zero3: return "zero3";
    }
    return "?";
}

std::optional<ParallelStrategy> parseStrategy(const std::string &name)
{
    for (auto s : {ParallelStrategy::None, ParallelStrategy::Ddp, ParallelStrategy::Fsdp, ParallelStrategy::Zero1, ParallelStrategy::Zero2, ParallelStrategy::Zero3})
        if (name == toString(s))
            return s;
    return std::nullopt;
}

int64_t estimatePeakAllocatedBytes(const RunConfig &config, const EstimateOptions &options, int64_t microBatch)
{
    return ConfigEstimator(config).peakAllocatedBytes(options, microBatch);
}

MemoryEstimate estimateMemory(const RunConfig &config, const EstimateOptions &options)
{
    return ConfigEstimator(config).estimate(options);
}

ConfigEstimator::ConfigEstimator(RunConfig config) : m_config(std::move(config)), m_memo(std::make_unique<Memo>()) {}

ConfigEstimator::~ConfigEstimator() = default;

int64_t ConfigEstimator::peakAllocatedBytes(const EstimateOptions &options, int64_t microBatch) const
{
    RunConfig sized = m_config;
    sized.train.microBatch = microBatch;
    validateOptions(sized, options);
    const TableFacts &facts = tableFactsOf(*m_memo, sized);
    return phasePeaks(sized, options, nullptr, facts.states, *activationBytesFor(*m_memo, sized, options, facts)).peakTensors();
}

MemoryEstimate ConfigEstimator::estimate(const EstimateOptions &options) const
{
    const RunConfig &config = m_config;
    validateOptions(config, options);
    const std::string backend = backendOf(options);
    const auto matching = matchingResiduals(options.calibration, backend, options.deviceName, options.torchVersion);
    // A figure measured by pilots on this device replaces the table's context figure.
    FrameworkOverhead fw = frameworkOverhead(backend);
    const auto measuredFramework = medianFrameworkBytes(matching);
    if (measuredFramework)
        fw.contextBytes = measuredFramework->bytes;
    MemoryEstimate e;
    e.card = options.card.empty() ? (options.device == DeviceKind::Cpu ? "cpu" : "cuda") : options.card;
    e.gpus = options.gpus;
    e.strategy = options.strategy;
    const TableFacts &facts = tableFactsOf(*m_memo, config);
    const auto act = activationBytesFor(*m_memo, config, options, facts);
    const Phases p = phasePeaks(config, options, &e.assumptions, facts.states, *act);
    e.phases = {{"construction", withOverheads(p.construction, fw)}, {"forward", withOverheads(p.forward, fw)},
                {"backward", withOverheads(p.backward, fw)}, {"optimizer", withOverheads(p.optimizer, fw)}};
    if (p.validates)
        e.phases.push_back({"validation", withOverheads(p.validation, fw)});
    if (p.checkpoints)
        e.phases.push_back({"checkpoint", withOverheads(p.checkpoint, fw)});
    const auto peak = std::max_element(e.phases.begin(), e.phases.end(),
                                       [](const PhasePeak &a, const PhasePeak &b) { return a.breakdown.tensors() < b.breakdown.tensors(); });
    e.peakPhase = peak->phase;
    e.breakdown = peak->breakdown;
    e.savedPerBlock = act->savedPerBlock;
    e.peakAllocatedBytes = e.breakdown.tensors();
    e.totalBytes = e.breakdown.total();
    if (measuredFramework)
        e.assumptions.push_back("framework overhead for " + backend + ": " + std::to_string(fw.contextBytes) + " bytes, the median of "
                                + std::to_string(measuredFramework->samples) + " stored pilot measurement(s) (device used minus allocator reserve)");
    else if (!fw.measuredHere)
        e.assumptions.push_back("framework overhead for " + backend + " is a typical figure (" + fw.source + ")");
    else
        e.assumptions.push_back("framework overhead for " + backend + " from the table (" + fw.source + ")");

    if (const auto ratio = medianRatio(matching)) {
        e.calibrationRatio = *ratio;
        e.calibrationSamples = static_cast<int>(matching.size());
        e.calibratedPeakAllocatedBytes = static_cast<int64_t>(std::llround(*ratio * static_cast<double>(e.peakAllocatedBytes)));
        e.calibratedTotalBytes = *e.calibratedPeakAllocatedBytes + e.breakdown.workspace + e.breakdown.framework;
    }

    e.capacityBytes = options.card.empty() ? options.localCapacityBytes : cardCapacity(options.card).memoryBytes;
    if (e.capacityBytes > 0) {
        e.usableBytes = static_cast<int64_t>(std::floor(static_cast<double>(e.capacityBytes) * (1.0 - options.headroomFraction)));
        const double ratio = e.calibrationRatio;
        auto totalFor = [&](int64_t micro) {
            const int64_t tensors = static_cast<int64_t>(std::llround(ratio * static_cast<double>(peakAllocatedBytes(options, micro))));
            return tensors + fw.blasWorkspaceBytes + static_cast<int64_t>(std::llround(fw.fragmentationFraction * static_cast<double>(tensors))) + fw.contextBytes;
        };
        e.fits = (e.calibratedTotalBytes ? *e.calibratedTotalBytes : e.totalBytes) <= e.usableBytes;
        // The estimate grows with the micro-batch: double to bracket, then bisect.
        int64_t lo = 0, hi = 1;
        while (hi <= kMaxMicroBatch && totalFor(hi) <= e.usableBytes) {
            lo = hi;
            hi *= 2;
        }
        hi = std::min(hi, kMaxMicroBatch + 1);
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            (totalFor(mid) <= e.usableBytes ? lo : hi) = mid;
        }
        e.maxMicroBatch = lo;
        // fp8 on a card without float8 tensor cores cannot run at any size.
        if (isFp8(config.train.precision) && !options.card.empty() && !cardCapacity(options.card).float8) {
            e.fits = false;
            e.maxMicroBatch = 0;
            e.refusal = cardCapacity(options.card).name + " has no float8 tensor cores: " + toString(config.train.precision) + " cannot run on it";
            e.assumptions.push_back(e.refusal);
        }
    } else {
        e.maxMicroBatch = -1;
    }

    int64_t saved = 0;
    for (auto s : act->savedPerBlock)
        saved += s;
    StepCost cost;
    {
        std::unique_lock<std::mutex> lock(m_memo->mutex);
        const auto it = m_memo->stepCosts.find(saved);
        if (it != m_memo->stepCosts.end()) {
            cost = it->second;
        } else {
            lock.unlock();
            cost = stepCost(config, saved, facts.table);
            lock.lock();
            m_memo->stepCosts.emplace(saved, cost);
        }
    }
    e.flopsPerStep = cost.modelFlops;
    e.hardwareFlopsPerStep = cost.hardwareFlops;
    e.bytesMovedPerStep = cost.bytesMoved;
    return e;
}

} // namespace pb
