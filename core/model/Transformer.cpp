#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "model/FusedOps.h"
#include "model/LinearCrossEntropy.h"
#include "engine/TorchCompat.h"

#include <unordered_map>

namespace pb {
namespace {

torch::Tensor emptyParam(std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    return torch::empty(shape, options);
}

// Re-runs a decoder block during backward instead of keeping its activations (what PyTorch's
// reentrant torch.utils.checkpoint does; the C++ frontend has no such utility). Autocast is
// thread-local and backward may run on another thread, so its state is saved and re-entered,
// and the RNG state is restored so dropout draws the same masks.
struct BlockRecompute : public torch::autograd::Function<BlockRecompute> {
    // Outputs: the block's, and (a sparse block) its router probability sum, which the auxiliary
    // loss differentiates; a dense block gives an empty tensor there.
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, torch::Tensor x, torch::Tensor cos, torch::Tensor sin, int64_t blockAddress)
    {
        auto *block = reinterpret_cast<DecoderBlockImpl *>(blockAddress);
        const auto deviceType = x.device().type();
        ctx->saved_data["block"] = blockAddress;
        ctx->saved_data["autocast"] = compat::autocastEnabled(deviceType);
        ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(compat::autocastDtype(deviceType));
        ctx->saved_data["rng"] = at::globalContext().defaultGenerator(x.device()).get_state();
        ctx->save_for_backward({x, cos, sin});
        torch::NoGradGuard noGrad;
        auto out = block->forward(x, cos, sin);
        return {out, block->moe ? block->moe->routerProbabilitySum : torch::zeros({0}, x.options().dtype(torch::kFloat))};
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list gradOutputs)
    {
        auto *block = reinterpret_cast<DecoderBlockImpl *>(ctx->saved_data["block"].toInt());
        const auto saved = ctx->get_saved_variables();
        const auto deviceType = saved[0].device().type();
        const bool autocast = ctx->saved_data["autocast"].toBool();
        const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt());
        const bool previousAutocast = compat::autocastEnabled(deviceType);
        const auto previousDtype = compat::autocastDtype(deviceType);
        auto generator = at::globalContext().defaultGenerator(saved[0].device());
        const auto rngNow = generator.get_state();
        generator.set_state(ctx->saved_data["rng"].toTensor());

        torch::Tensor x = saved[0].detach().requires_grad_(true);
        torch::Tensor out;
        {
            torch::AutoGradMode enableGrad(true);
            compat::setAutocast(deviceType, autocast, dtype);
            out = block->forward(x, saved[1], saved[2]);
            compat::setAutocast(deviceType, previousAutocast, previousDtype);
        }
        generator.set_state(rngNow);
        if (block->moe && gradOutputs.size() > 1 && gradOutputs[1].defined())
            torch::autograd::backward({out, block->moe->routerProbabilitySum}, {gradOutputs[0], gradOutputs[1]});
        else
            torch::autograd::backward({out}, {gradOutputs[0]});
        return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

// Transformers' _compute_llama3_parameters: wavelengths shorter than original/high_freq_factor keep
// their frequency, those longer than original/low_freq_factor are divided by the factor, and those
// between are interpolated smoothly.
torch::Tensor llama3Frequencies(const torch::Tensor &invFreq, const RopeScaling &s)
{
    const double oldContext = static_cast<double>(s.originalMaxPositions);
    const double lowFreqWavelen = oldContext / s.lowFreqFactor;
    const double highFreqWavelen = oldContext / s.highFreqFactor;
    constexpr double kPi = 3.14159265358979323846;
    const auto wavelen = 2 * kPi / invFreq;
    const auto scaled = torch::where(wavelen > lowFreqWavelen, invFreq / s.factor, invFreq);
    const auto smooth = (oldContext / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    const auto medium = (wavelen >= highFreqWavelen).logical_and(wavelen <= lowFreqWavelen);
    return torch::where(medium, smoothed, scaled);
}

} // namespace

torch::Tensor rotaryInverseFrequencies(int64_t headDim, double theta, const RopeScaling &scaling, const torch::Device &device)
{
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    const auto invFreq = 1.0 / torch::pow(theta, torch::arange(0, headDim, 2, f32) / static_cast<double>(headDim));
    switch (scaling.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear: return invFreq / scaling.factor;
    case RopeScalingType::Llama3: return llama3Frequencies(invFreq, scaling);
    }
    return invFreq;
}

LoraLinearImpl::LoraLinearImpl(int64_t in, int64_t out, bool hasBias, int64_t loraRank, double alpha, double dropout, const torch::TensorOptions &options)
    : m_dropout(dropout)
{
    weight = register_parameter("weight", emptyParam({out, in}, options));
    if (hasBias)
        bias = register_parameter("bias", emptyParam({out}, options));
    if (loraRank > 0) {
        loraA = register_module("lora_A", WeightHolder(emptyParam({loraRank, in}, options)));
        loraB = register_module("lora_B", WeightHolder(emptyParam({out, loraRank}, options)));
        m_scaling = alpha / static_cast<double>(loraRank);
    }
}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor &x)
{
    auto y = torch::nn::functional::linear(x, weight, bias);
    if (!loraA)
        return y;
    RECORD_USER_SCOPE("pb.lora");
    auto input = m_dropout > 0 && is_training() ? torch::dropout(x, m_dropout, true) : x;
    auto adapted = torch::nn::functional::linear(torch::nn::functional::linear(input, loraA->weight), loraB->weight);
    return y + adapted * m_scaling;
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions &options, bool fused) : m_eps(eps), m_fused(fused)
{
    weight = register_parameter("weight", emptyParam({dim}, options));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.norm");
    if (m_fused)
        return fusedRmsNorm(x, weight, m_eps);
    // As LlamaRMSNorm: normalise in fp32, return to the input dtype, then scale.
    const auto inputType = x.scalar_type();
    auto h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + m_eps);
    return weight * h.to(inputType);
}

SelfAttentionImpl::SelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
    : m_heads(config.model.attentionHeads), m_kvHeads(config.model.kvHeads), m_headDim(config.model.effectiveHeadDim()),
      m_qkNorm(config.model.qkNorm), m_fused(runtime.fusedAttention), m_fusedRotary(config.train.kernels == KernelPath::Fused)
{
    const auto &m = config.model;
    const auto &lora = config.train.lora;
    auto rank = [&](const char *name) { return loraTargets(config, name) ? lora.rank : 0; };
    const int64_t qDim = m_heads * m_headDim, kvDim = m_kvHeads * m_headDim;
    q = register_module("q_proj", LoraLinear(m.hiddenSize, qDim, m.attentionBias, rank("q_proj"), lora.alpha, lora.dropout, options));
    k = register_module("k_proj", LoraLinear(m.hiddenSize, kvDim, m.attentionBias, rank("k_proj"), lora.alpha, lora.dropout, options));
    v = register_module("v_proj", LoraLinear(m.hiddenSize, kvDim, m.attentionBias, rank("v_proj"), lora.alpha, lora.dropout, options));
    o = register_module("o_proj", LoraLinear(qDim, m.hiddenSize, false, rank("o_proj"), lora.alpha, lora.dropout, options));
    if (m_qkNorm != QkNorm::None) {
        const bool perHead = m_qkNorm == QkNorm::Head;
        qNorm = register_module("q_norm", RmsNorm(perHead ? m_headDim : qDim, m.normEps, options));
        kNorm = register_module("k_norm", RmsNorm(perHead ? m_headDim : kvDim, m.normEps, options));
    }
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin)
{
    RECORD_USER_SCOPE("pb.attention");
    const auto b = x.size(0), t = x.size(1);
    auto qp = q->forward(x), kp = k->forward(x);
    if (m_qkNorm == QkNorm::Full) { // OLMoE: over the whole projection
        qp = qNorm->forward(qp);
        kp = kNorm->forward(kp);
    }
    qp = qp.view({b, t, m_heads, m_headDim});
    kp = kp.view({b, t, m_kvHeads, m_headDim});
    if (m_qkNorm == QkNorm::Head) { // Qwen3: each head on its own
        qp = qNorm->forward(qp);
        kp = kNorm->forward(kp);
    }
    torch::Tensor qs, ks;
    // The fused rotary keeps each tensor's dtype; eager promotes k to an fp32 q's (a q_norm with an
    // fp32 weight), so that case stays eager.
    if (m_fusedRotary && qp.scalar_type() == kp.scalar_type()) {
        qs = fusedRotary(qp, cos, sin).transpose(1, 2);
        ks = fusedRotary(kp, cos, sin).transpose(1, 2);
    } else {
        qs = qp.transpose(1, 2);
        ks = kp.transpose(1, 2);
        const auto c = cos.to(qs.scalar_type()), s = sin.to(qs.scalar_type());
        qs = qs * c + rotateHalf(qs) * s;
        ks = ks * c + rotateHalf(ks) * s;
    }
    auto vs = v->forward(x).view({b, t, m_kvHeads, m_headDim}).transpose(1, 2);
    auto attended = compat::groupedCausalAttention(qs, ks, vs, m_fused);
    return o->forward(attended.transpose(1, 2).reshape({b, t, m_heads * m_headDim}));
}

MlpImpl::MlpImpl(const RunConfig &config, const torch::TensorOptions &options, int64_t intermediate, const std::array<std::string, 3> &names,
                 bool fusedSwiglu)
    : m_fusedSwiglu(fusedSwiglu)
{
    const auto &m = config.model;
    const auto &lora = config.train.lora;
    const int64_t width = intermediate > 0 ? intermediate : m.intermediateSize;
    auto rank = [&](const char *name) { return loraTargets(config, name) ? lora.rank : 0; };
    if (m.activation != ActivationKind::Gelu)
        gate = register_module(names[0], LoraLinear(m.hiddenSize, width, false, rank("gate_proj"), lora.alpha, lora.dropout, options));
    up = register_module(names[1], LoraLinear(m.hiddenSize, width, false, rank("up_proj"), lora.alpha, lora.dropout, options));
    down = register_module(names[2], LoraLinear(width, m.hiddenSize, false, rank("down_proj"), lora.alpha, lora.dropout, options));
}

torch::Tensor MlpImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.mlp");
    if (!gate)
        return down->forward(torch::gelu(up->forward(x), "tanh"));
    // SwiGLU as LlamaMLP: down(silu(gate(x)) * up(x)); gate first on both paths, so LoRA dropout
    // draws its masks in one order.
    const auto g = gate->forward(x);
    const auto u = up->forward(x);
    return down->forward(m_fusedSwiglu ? fusedSwiglu(g, u) : torch::silu(g) * u);
}

DecoderBlockImpl::DecoderBlockImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options, int64_t layer)
{
    const auto &m = config.model;
    const bool fused = config.train.kernels == KernelPath::Fused;
    inputNorm = register_module("input_layernorm", RmsNorm(m.hiddenSize, m.normEps, options, fused));
    attention = register_module("self_attn", SelfAttention(config, runtime, options));
    postNorm = register_module("post_attention_layernorm", RmsNorm(m.hiddenSize, m.normEps, options, fused));
    if (layer >= 0 && m.moe.sparse(layer)) {
        const std::string name = expertNames(m).prefix;
        moe = register_module(name.substr(0, name.size() - 1), SparseMoe(config, options));
    } else {
        mlp = register_module("mlp", Mlp(config, options, 0, std::array<std::string, 3> {"gate_proj", "up_proj", "down_proj"}, fused));
    }
}

torch::Tensor DecoderBlockImpl::forward(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin)
{
    RECORD_USER_SCOPE("pb.block"); // the residual adds
    auto h = x + attention->forward(inputNorm->forward(x), cos, sin);
    const auto normed = postNorm->forward(h);
    return h + (moe ? moe->forward(normed) : mlp->forward(normed));
}

DecoderStackImpl::DecoderStackImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
{
    const auto &m = config.model;
    embedTokens = register_module("embed_tokens", WeightHolder(emptyParam({m.vocabSize, m.hiddenSize}, options)));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < m.layers; ++i) {
        blocks.emplace_back(config, runtime, options, i);
        layers->push_back(blocks.back());
    }
    norm = register_module("norm", RmsNorm(m.hiddenSize, m.normEps, options, config.train.kernels == KernelPath::Fused));
}

DecoderModelImpl::DecoderModelImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::Device &device)
    : m_runtime(runtime), m_headDim(config.model.effectiveHeadDim()), m_ropeTheta(config.model.ropeTheta), m_ropeScaling(config.model.ropeScaling),
      m_moe(config.model.moe), m_kernels(config.train.kernels)
{
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
    stack = register_module("model", DecoderStack(config, runtime, options));
    if (!config.model.tieEmbeddings)
        lmHead = register_module("lm_head", WeightHolder(emptyParam({config.model.vocabSize, config.model.hiddenSize}, options)));

    const auto precision = config.train.precision;
    const auto trainableType = precision == Precision::Bf16 ? torch::kBFloat16 : torch::kFloat;
    const auto frozenType = precision == Precision::Fp32 ? torch::kFloat : precision == Precision::Fp16Mixed ? torch::kHalf : torch::kBFloat16;
    std::unordered_map<std::string, bool> trainable;
    for (const auto &p : parameterTable(config))
        trainable[p.name] = p.trainable;
    bool embeddingTrainable = true;
    for (auto &item : named_parameters()) {
        const auto it = trainable.find(item.key());
        TORCH_CHECK(it != trainable.end(), "parameter ", item.key(), " is missing from the parameter table");
        const auto type = it->second ? trainableType : frozenType;
        torch::NoGradGuard noGrad;
        if (item.value().scalar_type() != type)
            item.value().set_data(item.value().to(type));
        item.value().set_requires_grad(it->second);
        if (item.key() == "model.embed_tokens.weight")
            embeddingTrainable = it->second;
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
        if (name.find("lora_B") != std::string::npos || (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0))
            p.zero_();
        else if (p.dim() == 1)
            p.fill_(1.0);
        else if (name.find("lora_A") != std::string::npos)
            torch::nn::init::kaiming_uniform_(p, std::sqrt(5.0));
        else
            p.normal_(0.0, 0.02);
    }
}

std::vector<torch::Tensor> DecoderModelImpl::trainableParameters()
{
    std::vector<torch::Tensor> out;
    for (auto &p : parameters())
        if (p.requires_grad())
            out.push_back(p);
    return out;
}

void DecoderModelImpl::rotaryTables(int64_t seqLen, const torch::Device &device, at::ScalarType, torch::Tensor &cos, torch::Tensor &sin)
{
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto freqs = torch::outer(torch::arange(seqLen, f32), rotaryInverseFrequencies(m_headDim, m_ropeTheta, m_ropeScaling, device));
    auto emb = torch::cat({freqs, freqs}, -1);
    cos = emb.cos();
    sin = emb.sin();
}

torch::Tensor DecoderModelImpl::hidden(const torch::Tensor &inputs)
{
    if (m_blockHooks)
        m_blockHooks->beforeModel();
    torch::Tensor h, cos, sin;
    {
        RECORD_USER_SCOPE("pb.embedding");
        h = torch::embedding(stack->embedTokens->weight, inputs);
        if (m_inputNeedsGrad)
            h.requires_grad_(true);
        rotaryTables(inputs.size(1), inputs.device(), h.scalar_type(), cos, sin);
    }
    // Transformers' load_balancing_loss_func over all sparse layers' tokens at once: the share of
    // choices each expert got (per top-k place) times its mean routing probability, summed, times
    // the number of experts.
    torch::Tensor probabilitySum, choices;
    int64_t routedTokens = 0;
    for (size_t i = 0; i < stack->blocks.size(); ++i) {
        auto &block = stack->blocks[i];
        if (m_blockHooks)
            m_blockHooks->beforeBlock(i, h);
        torch::Tensor layerProbabilities;
        if (m_runtime.recompute && is_training()) {
            auto outputs = BlockRecompute::apply(h, cos, sin, reinterpret_cast<int64_t>(block.get()));
            h = outputs[0];
            layerProbabilities = outputs[1];
        } else {
            h = block->forward(h, cos, sin);
            if (block->moe)
                layerProbabilities = block->moe->routerProbabilitySum;
        }
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
    return stack->norm->forward(h);
}

torch::Tensor DecoderModelImpl::loss(const torch::Tensor &inputs, const torch::Tensor &targets)
{
    auto h = hidden(inputs);
    RECORD_USER_SCOPE("pb.head"); // the language-model head and the loss (the peak recorder's logits)
    const auto &headWeight = lmHead ? lmHead->weight : stack->embedTokens->weight;
    torch::Tensor loss;
    if (m_kernels == KernelPath::Fused) {
        loss = linearCrossEntropy(h.reshape({-1, h.size(-1)}), headWeight, targets.reshape({-1}));
    } else {
        auto logits = torch::nn::functional::linear(h, headWeight);
        // As Transformers' ForCausalLMLoss: the logits are upcast to fp32 before the cross-entropy.
        loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat).reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                                    torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    }
    if (m_auxLoss.defined() && m_moe.auxLossWeight > 0)
        loss = loss + m_moe.auxLossWeight * m_auxLoss;
    return loss;
}

} // namespace pb
