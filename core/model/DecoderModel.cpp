// DecoderStack and DecoderModel, declared in Transformer.h: the embedding, the blocks (recomputed
// in backward where the run asks), the final norm and the head with its loss; the parameters'
// storage in the dtypes and pools the parameter table gives them.
#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "model/FusedOps.h"
#include "model/LinearCrossEntropy.h"
#include "engine/TorchCompat.h"
#include "model/WindowedAttention.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <tuple>
#include <utility>

namespace pb {
namespace {


// The block inputs as BlockRecompute carries them: an empty tensor stands for an absent one (no
// rotary on a NoPE layer, no window on a full one, no per-layer input or shared keys).
torch::Tensor given(const torch::Tensor &t) { return t.numel() > 0 ? t : torch::Tensor(); }

LayerInputs layerInputs(const std::vector<torch::Tensor> &saved)
{
    return {given(saved[1]), given(saved[2]), given(saved[3]), given(saved[4]), given(saved[5]), given(saved[6])};
}

// A saved input rebuilt as a leaf of the recomputed graph, so its gradient can be returned.
torch::Tensor gradLeaf(const torch::Tensor &t)
{
    return t.numel() > 0 && t.requires_grad() ? t.detach().requires_grad_(true) : t;
}

torch::Tensor leafGrad(const torch::Tensor &leaf, const torch::Tensor &original)
{
    return original.numel() > 0 && original.requires_grad() ? leaf.grad() : torch::Tensor();
}

// Re-runs a decoder block during backward instead of keeping its activations (what PyTorch's
// reentrant torch.utils.checkpoint does; the C++ frontend has no such utility). Autocast is
// thread-local and backward may run on another thread, so its state is saved and re-entered,
// and the RNG state is restored so dropout draws the same masks.
struct BlockRecompute : public torch::autograd::Function<BlockRecompute> {
    // Outputs: the block's, (a sparse block) its router probability sum, which the auxiliary loss
    // differentiates, and (a layer whose keys and values later layers share, Gemma 4) those; an
    // empty tensor where the block has none. Inputs beyond x: as LayerInputs, empty where absent.
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor windowMask,
                                                  torch::Tensor perLayer, torch::Tensor sharedKeys, torch::Tensor sharedValues, int64_t blockAddress)
    {
        auto *block = reinterpret_cast<DecoderBlockImpl *>(blockAddress);
        const auto deviceType = x.device().type();
        ctx->saved_data["block"] = blockAddress;
        ctx->saved_data["autocast"] = compat::autocastEnabled(deviceType);
        ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(compat::autocastDtype(deviceType));
        ctx->saved_data["rng"] = at::globalContext().defaultGenerator(x.device()).get_state();
        ctx->save_for_backward({x, cos, sin, windowMask, perLayer, sharedKeys, sharedValues});
        torch::NoGradGuard noGrad;
        auto out = block->forward(x, layerInputs({x, cos, sin, windowMask, perLayer, sharedKeys, sharedValues}));
        // A distinct empty tensor for each absent output: one tensor twice among a function's outputs
        // would share one gradient slot.
        const auto none = [&x] { return torch::zeros({0}, x.options().dtype(torch::kFloat)); };
        auto [keys, values] = block->attention ? block->attention->takeKeptKv() : std::pair<torch::Tensor, torch::Tensor>();
        return {out, block->moe ? block->moe->routerProbabilitySum : none(), keys.defined() ? keys : none(), values.defined() ? values : none()};
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        auto *block = reinterpret_cast<DecoderBlockImpl *>(ctx->saved_data["block"].toInt());
        const auto saved = ctx->get_saved_variables();
        const auto deviceType = saved[0].device().type();
        const bool autocast = ctx->saved_data["autocast"].toBool();
        const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt());
        auto generator = at::globalContext().defaultGenerator(saved[0].device());
        const auto rngNow = generator.get_state();
        generator.set_state(ctx->saved_data["rng"].toTensor());

        torch::Tensor x = saved[0].detach().requires_grad_(true);
        std::vector<torch::Tensor> inputs = saved;
        inputs[0] = x;
        for (size_t i = 4; i < 7; ++i) // the per-layer input and shared keys and values carry gradients back
            inputs[i] = gradLeaf(saved[i]);
        torch::Tensor out;
        {
            torch::AutoGradMode enableGrad(true);
            compat::AutocastGuard asInTheForward(deviceType, autocast, dtype);
            out = block->forward(x, layerInputs(inputs));
        }
        generator.set_state(rngNow);
        std::vector<torch::Tensor> roots {out}, grads {gradOutputs[0]};
        if (block->moe && gradOutputs.size() > 1 && gradOutputs[1].defined() && block->moe->routerProbabilitySum.requires_grad()) {
            roots.push_back(block->moe->routerProbabilitySum);
            grads.push_back(gradOutputs[1]);
        }
        // Gemma 4: the gradients the shared layers (already through their backward) sent to this
        // layer's keys and values.
        if (block->attention && block->attention->keptKeys.defined()) {
            const auto [keys, values] = block->attention->takeKeptKv();
            const torch::Tensor kept[2] = {keys, values};
            for (size_t i = 0; i < 2; ++i)
                if (gradOutputs.size() > 2 + i && gradOutputs[2 + i].defined() && kept[i].requires_grad()) {
                    roots.push_back(kept[i]);
                    grads.push_back(gradOutputs[2 + i]);
                }
        }
        torch::autograd::backward(roots, grads);
        // The rebuilt router statistics would keep their graph (and with it the block's tensors)
        // until the next forward overwrites them.
        if (block->moe)
            block->moe->routerProbabilitySum = torch::Tensor();
        return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), leafGrad(inputs[4], saved[4]), leafGrad(inputs[5], saved[5]),
                leafGrad(inputs[6], saved[6]), torch::Tensor()};
    }
};

} // namespace

DecoderStackImpl::DecoderStackImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
{
    const auto &m = config.model;
    embedTokens = register_module("embed_tokens", WeightHolder(emptyParam({m.vocabSize, m.hiddenSize}, options)));
    if (m.traits.perLayerInput > 0) {
        const int64_t width = m.layers * m.traits.perLayerInput;
        embedPerLayer = register_module("embed_tokens_per_layer", WeightHolder(emptyParam({m.perLayerVocabSize(), width}, options)));
        perLayerModelProjection = register_module("per_layer_model_projection", LoraLinear(m.hiddenSize, width, false, config, "per_layer_model_projection", options));
        perLayerProjectionNorm = register_module("per_layer_projection_norm",
                                                 RmsNorm(m.traits.perLayerInput, m.normEps, options, config.train.kernels == KernelPath::Fused, m.traits));
    }
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < m.layers; ++i) {
        blocks.emplace_back(config, runtime, options, i);
        layers->push_back(blocks.back());
    }
    norm = register_module("norm", RmsNorm(m.hiddenSize, m.normEps, options, config.train.kernels == KernelPath::Fused, m.traits));
}

DecoderModelImpl::DecoderModelImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::Device &device)
    : m_runtime(runtime), m_shape(config.model), m_moe(config.model.moe), m_kernels(config.train.kernels)
{
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
    stack = register_module("model", DecoderStack(config, runtime, options));
    if (!runtime.mixedLinear || !runtime.adaptersInNode)
        for (const auto &module : stack->modules())
            if (auto *projection = module->as<LoraLinearImpl>())
                projection->setMixedLinear(runtime.mixedLinear, runtime.adaptersInNode);
    if (!config.model.tieEmbeddings)
        lmHead = register_module("lm_head", WeightHolder(emptyParam({config.model.vocabSize, config.model.hiddenSize}, options)));

    const auto precision = config.train.precision;
    const auto trainableType = precision == Precision::Bf16 ? torch::kBFloat16 : torch::kFloat;
    const auto frozenType = precision == Precision::Fp32 ? torch::kFloat : precision == Precision::Fp16Mixed ? torch::kHalf : torch::kBFloat16;
    struct Slot {
        bool trainable = false;
        std::string pool;
        int64_t offset = 0;   // in the pool, in elements
    };
    std::unordered_map<std::string, Slot> slots;
    std::unordered_map<std::string, int64_t> poolSizes;
    for (const auto &p : parameterTable(config)) {
        slots[p.name] = {p.trainable, p.pool, p.pool.empty() ? 0 : poolSizes[p.pool]};
        if (!p.pool.empty())
            poolSizes[p.pool] += p.numel;
    }
    std::unordered_map<std::string, torch::Tensor> pools;
    bool embeddingTrainable = true;
    for (auto &item : named_parameters()) {
        const auto it = slots.find(item.key());
        TORCH_CHECK(it != slots.end(), "parameter ", item.key(), " is missing from the parameter table");
        const Slot &slot = it->second;
        const auto type = slot.trainable ? trainableType : frozenType;
        torch::NoGradGuard noGrad;
        if (slot.pool.empty()) {
            item.value().set_data(torch::empty(item.value().sizes(), item.value().options().dtype(type)));
        } else { // one allocation for the pool, made when its first member is reached
            auto &pool = pools[slot.pool];
            if (!pool.defined())
                pool = torch::empty({poolSizes[slot.pool]}, item.value().options().dtype(type));
            item.value().set_data(pool.narrow(0, slot.offset, item.value().numel()).view(item.value().sizes()));
        }
        item.value().set_requires_grad(slot.trainable);
        if (item.key() == "model.embed_tokens.weight")
            embeddingTrainable = slot.trainable;
    }
    // Recomputed blocks only get a backward node when their input requires grad; with a frozen
    // embedding (LoRA) it must be asked for, as PEFT's enable_input_require_grads does.
    m_inputNeedsGrad = runtime.recompute && !embeddingTrainable;
}

void DecoderModelImpl::initialise(uint64_t seed)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    for (auto &item : named_parameters()) {
        const auto &name = item.key();
        auto &p = item.value();
        auto endsWith = [&name](const char *tail) {
            const size_t n = std::strlen(tail);
            return name.size() > n && name.compare(name.size() - n, n, tail) == 0;
        };
        const bool linearMixer = name.find(".linear_attn.") != std::string::npos;
        if (linearMixer && endsWith(".A_log")) // Qwen3_5PreTrainedModel: log(uniform(0.01, 16)), kept from -inf
            p.uniform_(0.01, 16.0).log_();
        else if (linearMixer && (endsWith(".dt_bias") || endsWith(".norm.weight"))) // ones; the gated norm has no unit offset
            p.fill_(1.0);
        else if (name.find("lora_B") != std::string::npos || endsWith(".bias") || endsWith("_bias")) // gpt-oss's experts.gate_up_proj_bias ...
            p.zero_();
        else if (endsWith(".sinks")) // as GptOssPreTrainedModel
            p.normal_(0.0, 0.02);
        else if (p.dim() == 1)
            p.fill_(m_shape.traits.normUnitOffset ? 0.0 : 1.0); // Gemma's norms scale by 1 + weight
        else if (name.find("lora_A") != std::string::npos)
            torch::nn::init::kaiming_uniform_(p, std::sqrt(5.0));
        else
            p.normal_(0.0, 0.02);
    }
    // A QLoRA base is drawn as the 16-bit matrix it stands for, one at a time, then quantised.
    for (const auto &module : modules(/*include_self=*/false))
        if (auto *linear = dynamic_cast<LoraLinearImpl *>(module.get()); linear && linear->nf4Base())
            linear->setBase(torch::empty(linear->base.shape, linear->base.packed.options().dtype(torch::kBFloat16)).normal_(0.0, 0.02));
}

std::vector<torch::Tensor> DecoderModelImpl::trainableParameters()
{
    std::vector<torch::Tensor> out;
    for (auto &p : parameters())
        if (p.requires_grad())
            out.push_back(p);
    return out;
}

void DecoderModelImpl::rotaryTables(int64_t seqLen, const torch::Device &device, double theta, const RopeScaling &scaling, int64_t rotaryDim,
                                    int64_t turnedPairs, torch::Tensor &cos, torch::Tensor &sin) const
{
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    double attentionFactor = 1.0;
    auto invFreq = rotaryInverseFrequencies(rotaryDim, theta, scaling, device, seqLen, &attentionFactor);
    // Transformers' _compute_proportional_rope_parameters: the default frequencies of the whole
    // head, those past the turned share set to 0.
    if (turnedPairs >= 0 && turnedPairs < invFreq.size(0))
        invFreq = torch::cat({invFreq.narrow(0, 0, turnedPairs), torch::zeros({invFreq.size(0) - turnedPairs}, f32)});
    auto freqs = torch::outer(torch::arange(seqLen, f32), invFreq);
    // GLM pairs neighbouring dimensions: each frequency twice in a row instead of the two halves.
    auto emb = m_shape.traits.ropeInterleaved ? freqs.repeat_interleave(2, -1) : torch::cat({freqs, freqs}, -1);
    cos = emb.cos();
    sin = emb.sin();
    if (attentionFactor != 1.0) {
        cos = cos * attentionFactor;
        sin = sin * attentionFactor;
    }
}

bool DecoderModelImpl::slidingLayersNeedNoMask(const torch::Device &device) const
{
    // As SelfAttention's choice on each sliding layer: on the fused path, soft-capped scores on the
    // capped softmax's kernel; else, without sinks, flash's own window; q in autocast's dtype, else in
    // the weights' (Gemma's norms and the fused rotary keep it).
    const auto &traits = m_shape.traits;
    const auto type = compat::autocastEnabled(device.type()) ? compat::autocastDtype(device.type()) : stack->embedTokens->weight.scalar_type();
    if (m_kernels == KernelPath::Fused && traits.attentionSoftcap > 0 && !traits.attentionSinks)
        return cappedSoftmaxRuns(device, type);
    if (m_kernels != KernelPath::Fused || !m_runtime.windowKernel || !m_runtime.fusedAttention || traits.attentionSoftcap > 0 || traits.attentionSinks)
        return false;
    return windowKernelRuns(device, type, m_shape.effectiveHeadDim());
}

torch::Tensor DecoderModelImpl::hidden(const torch::Tensor &inputs, const c10::intrusive_ptr<TiedHeadGradient> &tied)
{
    if (m_blockHooks)
        m_blockHooks->beforeModel();
    const ModelTraits &traits = m_shape.traits;
    const int64_t t = inputs.size(1);
    torch::Tensor h, chunkMask, perLayer;
    LayerInputs global, local;
    {
        RECORD_USER_SCOPE("pb.embedding");
        h = tied ? tiedEmbedding(stack->embedTokens->weight, inputs, tied) : torch::embedding(stack->embedTokens->weight, inputs);
        if (traits.embeddingScale != 1.0) // Gemma rounds sqrt(hidden) to the embedding's dtype first
            h = traits.embeddingScaleRounded ? h * torch::scalar_tensor(traits.embeddingScale, h.options()) : h * traits.embeddingScale;
        if (m_inputNeedsGrad)
            h.requires_grad_(true);
        if (stack->embedPerLayer)
            perLayer = perLayerInputs(inputs, h);
        // Gemma 4's proportional rotary: the global layers' whole heads, int(partial * head_dim / 2)
        // frequencies turning (as Transformers rounds); the sliding layers' whole heads at their base.
        const bool proportional = traits.ropeProportional;
        const int64_t globalDim = proportional ? (traits.globalHeadDim > 0 ? traits.globalHeadDim : m_shape.effectiveHeadDim()) : m_shape.rotaryDim();
        const int64_t turned = proportional ? static_cast<int64_t>(traits.partialRotary * static_cast<double>(globalDim) / 2) : -1;
        rotaryTables(t, inputs.device(), m_shape.ropeTheta, m_shape.ropeScaling, globalDim, turned, global.cos, global.sin);
        if (traits.attentionChunk > 0 && t > traits.attentionChunk) {
            // One mask for every chunked layer: key j is seen from query i when j <= i in i's chunk.
            // Within one chunk it is the causal mask, which the unmasked kernels apply themselves.
            const auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(inputs.device()));
            const auto chunk = pos.div(traits.attentionChunk, "floor");
            chunkMask = pos.unsqueeze(1).ge(pos.unsqueeze(0)).logical_and(chunk.unsqueeze(1).eq(chunk.unsqueeze(0)));
        }
        if (traits.slidingWindow > 0) {
            // One mask for every sliding layer: key j is seen from query i when i - W < j <= i. None
            // where they all run flash's own window or the capped softmax's kernel (T x T bytes:
            // 16 GiB at Gemma 3's 131,072).
            if (!slidingLayersNeedNoMask(inputs.device()))
                local.windowMask = slidingWindowMask(t, traits.slidingWindow, inputs.device());
            if (traits.localRopeTheta > 0)
                rotaryTables(t, inputs.device(), traits.localRopeTheta, RopeScaling {}, proportional ? m_shape.effectiveHeadDim() : m_shape.rotaryDim(), -1, local.cos,
                             local.sin);
            else
                local.cos = global.cos, local.sin = global.sin;
        }
    }
    // Transformers' load_balancing_loss_func over all sparse layers' tokens at once: the share of
    // choices each expert got (per top-k place) times its mean routing probability, summed, times
    // the number of experts.
    torch::Tensor probabilitySum, choices;
    int64_t routedTokens = 0;
    // Gemma 4's shared keys and values by the layer that made them, held while a later layer reads them.
    std::unordered_map<int64_t, std::pair<torch::Tensor, torch::Tensor>> sharedKv;
    // One node for every layer's slice: its backward stacks their gradients once, where select's
    // would make a zero-filled [B, T, layers, P] gradient per layer.
    const std::vector<torch::Tensor> perLayerSlices = perLayer.defined() ? perLayer.unbind(2) : std::vector<torch::Tensor>();
    // The fused path folds each block's output add into the next block's first norm (and the last
    // one's into the final norm): the stream between blocks is then h and a pending MLP branch. Not
    // under recompute (a block's saved input would be both) nor with block hooks (FSDP's, which
    // read the stream), nor on the eager path.
    const bool deferAdds = m_kernels == KernelPath::Fused && !(m_runtime.recompute && is_training()) && !m_blockHooks &&
                           std::all_of(stack->blocks.begin(), stack->blocks.end(), [](const DecoderBlock &b) { return b->defersOutputAdd(); });
    torch::Tensor pending;
    for (size_t i = 0; i < stack->blocks.size(); ++i) {
        auto &block = stack->blocks[i];
        if (m_blockHooks)
            m_blockHooks->beforeBlock(i, h);
        const int64_t layer = static_cast<int64_t>(i);
        LayerInputs in = m_shape.usesSliding(layer) ? local : global;
        if (!traits.usesRope(layer))
            in.cos = in.sin = torch::Tensor();
        if (traits.usesChunks(layer))
            in.windowMask = chunkMask;
        if (!perLayerSlices.empty())
            in.perLayer = perLayerSlices[i];
        if (m_shape.kvShared(layer)) {
            const auto &kv = sharedKv[m_shape.kvSourceLayer(layer)];
            in.sharedKeys = kv.first;
            in.sharedValues = kv.second;
        }
        torch::Tensor layerProbabilities, keptKeys, keptValues;
        if (m_runtime.recompute && is_training()) {
            // A custom autograd function takes defined tensors only: an absent input travels empty.
            const auto none = torch::empty({0}, h.options().dtype(torch::kFloat));
            auto present = [&none](const torch::Tensor &t) { return t.defined() ? t : none; };
            auto outputs = BlockRecompute::apply(h, present(in.cos), present(in.sin), present(in.windowMask), present(in.perLayer), present(in.sharedKeys),
                                                 present(in.sharedValues), reinterpret_cast<int64_t>(block.get()));
            h = outputs[0];
            layerProbabilities = outputs[1];
            keptKeys = given(outputs[2]);
            keptValues = given(outputs[3]);
        } else {
            if (deferAdds)
                std::tie(h, pending) = block->forwardDeferred(std::move(h), std::move(pending), in);
            else
                h = block->forward(h, in);
            if (block->moe)
                layerProbabilities = block->moe->routerProbabilitySum;
            if (block->attention)
                std::tie(keptKeys, keptValues) = block->attention->takeKeptKv();
        }
        if (keptKeys.defined())
            sharedKv[layer] = {keptKeys, keptValues};
        if (block->moe) {
            probabilitySum = probabilitySum.defined() ? probabilitySum + layerProbabilities : layerProbabilities;
            choices = choices.defined() ? choices + block->moe->expertChoices : block->moe->expertChoices;
            routedTokens += block->moe->tokens;
        }
        if (m_blockHooks)
            m_blockHooks->afterBlock(i, h);
    }
    m_auxLoss = torch::Tensor();
    if (probabilitySum.defined() && routedTokens > 0) {
        const double n = static_cast<double>(routedTokens);
        m_auxLoss = ((choices / n) * (probabilitySum / n).unsqueeze(0)).sum() * static_cast<double>(m_moe.experts);
    }
    if (pending.defined())
        return stack->norm->addForward(h, pending, m_shape.traits.residualScale).second;
    return stack->norm->forward(h);
}

torch::Tensor DecoderModelImpl::perLayerInputs(const torch::Tensor &inputs, const torch::Tensor &h)
{
    // Gemma4TextModel: (norm(per_layer_model_projection(h) / sqrt(hidden)) + embed_tokens_per_layer(ids)
    // x sqrt(P)) / sqrt(2), per layer; the table's scale rounded to its dtype as the main embedding's.
    RECORD_USER_SCOPE("pb.per_layer_input");
    const ModelTraits &traits = m_shape.traits;
    const int64_t b = inputs.size(0), t = inputs.size(1), layers = m_shape.layers, p = traits.perLayerInput;
    auto table = torch::embedding(stack->embedPerLayer->weight, inputs);
    const double tableScale = std::sqrt(static_cast<double>(p));
    table = traits.embeddingScaleRounded ? table * torch::scalar_tensor(tableScale, table.options()) : table * tableScale;
    auto projected = stack->perLayerModelProjection->forward(h) * std::pow(static_cast<double>(m_shape.hiddenSize), -0.5);
    projected = stack->perLayerProjectionNorm->forward(projected.view({b, t, layers, p}));
    return (projected + table.view({b, t, layers, p})) * std::sqrt(0.5);
}

torch::Tensor DecoderModelImpl::headLogits(const torch::Tensor &h)
{
    const auto &headWeight = lmHead ? lmHead->weight : stack->embedTokens->weight;
    const ModelTraits &traits = m_shape.traits;
    auto logits = torch::nn::functional::linear(h, headWeight);
    // Granite divides the logits; Gemma 2 soft-caps them (divide, tanh, multiply).
    if (traits.logitsDivisor != 1.0)
        logits = logits / traits.logitsDivisor;
    if (traits.finalSoftcap > 0) {
        // Three statements, as Transformers writes them: each result replaces the last, so two
        // logits-sized tensors live at a time (one expression held four: 16 GiB at Gemma 4's
        // 262,144-token vocabulary and 8,192 tokens in bf16).
        logits = logits / traits.finalSoftcap;
        logits = torch::tanh(logits);
        logits = logits * traits.finalSoftcap;
    }
    return logits;
}

torch::Tensor DecoderModelImpl::logits(const torch::Tensor &inputs)
{
    return headLogits(hidden(inputs));
}

torch::Tensor DecoderModelImpl::loss(const torch::Tensor &inputs, const torch::Tensor &targets)
{
    // A trained tied embedding on the fused path: the lookup adds its gradient into the head's.
    const auto &headWeight = lmHead ? lmHead->weight : stack->embedTokens->weight;
    c10::intrusive_ptr<TiedHeadGradient> tied;
    if (m_kernels == KernelPath::Fused && !lmHead && headWeight.requires_grad() && torch::GradMode::is_enabled())
        tied = c10::make_intrusive<TiedHeadGradient>();
    auto h = hidden(inputs, tied);
    RECORD_USER_SCOPE("pb.head"); // the language-model head and the loss (the peak recorder's logits)
    torch::Tensor loss;
    const ModelTraits &traits = m_shape.traits;
    if (m_kernels == KernelPath::Fused) {
        loss = linearCrossEntropy(h.reshape({-1, h.size(-1)}), headWeight, targets.reshape({-1}), m_runtime.lossChunkTokens,
                                  LogitsTransform {traits.logitsDivisor, traits.finalSoftcap}, 0, tied);
    } else {
        const auto logits = headLogits(h);
        // As Transformers' ForCausalLMLoss: the logits are upcast to fp32 before the cross-entropy.
        loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat).reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                                    torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    }
    if (m_auxLoss.defined() && m_moe.auxLossWeight > 0)
        loss = loss + m_moe.auxLossWeight * m_auxLoss;
    return loss;
}

} // namespace pb
