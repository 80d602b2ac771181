#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "model/FusedOps.h"
#include "model/LinearCrossEntropy.h"
#include "model/SinkAttention.h"
#include "engine/TorchCompat.h"

#include <cstring>
#include <unordered_map>

namespace pb {

// A parameter's shape without its memory: zero strides over one element. DecoderModel gives each
// its storage in the dtype it keeps (frozen bf16, trainable fp32 ...) once the parameter table says
// which, so no full-precision copy of the model ever exists, as a loader with a dtype does.
torch::Tensor emptyParam(std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    return torch::empty_strided(shape, std::vector<int64_t>(shape.size(), 0), options);
}

namespace {

// The block inputs as BlockRecompute carries them: an empty tensor stands for an absent one (no
// rotary on a NoPE layer, no window on a full one).
LayerInputs layerInputs(const torch::Tensor &cos, const torch::Tensor &sin, const torch::Tensor &windowMask)
{
    auto given = [](const torch::Tensor &t) { return t.numel() > 0 ? t : torch::Tensor(); };
    return {given(cos), given(sin), given(windowMask)};
}

// Re-runs a decoder block during backward instead of keeping its activations (what PyTorch's
// reentrant torch.utils.checkpoint does; the C++ frontend has no such utility). Autocast is
// thread-local and backward may run on another thread, so its state is saved and re-entered,
// and the RNG state is restored so dropout draws the same masks.
struct BlockRecompute : public torch::autograd::Function<BlockRecompute> {
    // Outputs: the block's, and (a sparse block) its router probability sum, which the auxiliary
    // loss differentiates; a dense block gives an empty tensor there.
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor windowMask,
                                                  int64_t blockAddress)
    {
        auto *block = reinterpret_cast<DecoderBlockImpl *>(blockAddress);
        const auto deviceType = x.device().type();
        ctx->saved_data["block"] = blockAddress;
        ctx->saved_data["autocast"] = compat::autocastEnabled(deviceType);
        ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(compat::autocastDtype(deviceType));
        ctx->saved_data["rng"] = at::globalContext().defaultGenerator(x.device()).get_state();
        ctx->save_for_backward({x, cos, sin, windowMask});
        torch::NoGradGuard noGrad;
        auto out = block->forward(x, layerInputs(cos, sin, windowMask));
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
            out = block->forward(x, layerInputs(saved[1], saved[2], saved[3]));
            compat::setAutocast(deviceType, previousAutocast, previousDtype);
        }
        generator.set_state(rngNow);
        if (block->moe && gradOutputs.size() > 1 && gradOutputs[1].defined() && block->moe->routerProbabilitySum.requires_grad())
            torch::autograd::backward({out, block->moe->routerProbabilitySum}, {gradOutputs[0], gradOutputs[1]});
        else
            torch::autograd::backward({out}, {gradOutputs[0]});
        // The rebuilt router statistics would keep their graph (and with it the block's tensors)
        // until the next forward overwrites them.
        if (block->moe)
            block->moe->routerProbabilitySum = torch::Tensor();
        return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
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

// Transformers' _compute_yarn_parameters: frequencies between the fast and slow wavelengths ramp
// from extrapolated (kept) to interpolated (divided by the factor); cos and sin are scaled by the
// attention factor, from mscale where the config gives it.
torch::Tensor yarnFrequencies(int64_t rotaryDim, double base, const RopeScaling &s, const torch::Device &device, double *attentionFactor)
{
    const double dim = static_cast<double>(rotaryDim);
    constexpr double kPi = 3.14159265358979323846;
    auto mscaleOf = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (attentionFactor)
        *attentionFactor = s.attentionFactor > 0                   ? s.attentionFactor
                           : s.mscale > 0 && s.mscaleAllDim > 0 ? mscaleOf(s.factor, s.mscale) / mscaleOf(s.factor, s.mscaleAllDim)
                                                                  : mscaleOf(s.factor, 1.0);
    const double original = static_cast<double>(s.originalMaxPositions);
    auto correctionDim = [&](double rotations) { return dim * std::log(original / (rotations * 2 * kPi)) / (2 * std::log(base)); };
    double low = correctionDim(s.betaFast), high = correctionDim(s.betaSlow);
    if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high)
        high += 0.001;
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    const auto posFreqs = torch::pow(base, torch::arange(0, rotaryDim, 2, f32) / dim);
    const auto extrapolation = 1.0 / posFreqs;
    const auto interpolation = 1.0 / (s.factor * posFreqs);
    const auto ramp = ((torch::arange(rotaryDim / 2, f32) - low) / (high - low)).clamp(0, 1);
    const auto extrapolationFactor = 1 - ramp;
    return interpolation * (1 - extrapolationFactor) + extrapolation * extrapolationFactor;
}

} // namespace

torch::Tensor rotaryInverseFrequencies(int64_t rotaryDim, double theta, const RopeScaling &scaling, const torch::Device &device, int64_t seqLen,
                                       double *attentionFactor)
{
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    const double dim = static_cast<double>(rotaryDim);
    if (attentionFactor)
        *attentionFactor = 1.0;
    // Transformers' exponent arange(0, dim, 2, int64).float() / dim: the same fp32 values as here.
    const auto exponent = torch::arange(0, rotaryDim, 2, f32) / dim;
    const auto invFreq = 1.0 / torch::pow(theta, exponent);
    switch (scaling.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear: return invFreq / scaling.factor;
    case RopeScalingType::Llama3: return llama3Frequencies(invFreq, scaling);
    case RopeScalingType::Yarn: return yarnFrequencies(rotaryDim, theta, scaling, device, attentionFactor);
    case RopeScalingType::LongRope: {
        // _compute_longrope_parameters: the long factors once the sequence exceeds the pre-training
        // context (longrope_frequency_update picks them per forward), the short ones within it.
        const auto &factors = seqLen > scaling.originalMaxPositions ? scaling.longFactor : scaling.shortFactor;
        const auto ext = torch::tensor(std::vector<float>(factors.begin(), factors.end()), f32);
        if (attentionFactor) {
            const double factor = scaling.factor;
            *attentionFactor = scaling.attentionFactor > 0 ? scaling.attentionFactor
                               : factor <= 1.0           ? 1.0
                                                          : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(scaling.originalMaxPositions)));
        }
        return 1.0 / (ext * torch::pow(theta, exponent));
    }
    }
    return invFreq;
}

LoraLinearImpl::LoraLinearImpl(int64_t in, int64_t out, bool hasBias, const RunConfig &config, const std::string &role, const torch::TensorOptions &options)
    : m_dropout(config.train.lora.dropout), m_nf4(config.train.mode == TrainMode::Qlora), m_fp8(isFp8(config.train.precision) && !m_nf4),
      m_fp8Scaling(config.train.precision == Precision::Fp8Tensorwise ? Fp8Scaling::Tensorwise : Fp8Scaling::Rowwise),
      m_computeType(config.train.precision == Precision::Fp16Mixed ? at::kHalf : at::kBFloat16)
{
    if (m_nf4) {
        base = nf4Allocate({out, in}, options.device());
        const char *suffixes[] = {"_nf4", "_absmax", "_absmax_scale", "_absmax_offset"};
        torch::Tensor *parts[] = {&base.packed, &base.absmax, &base.scales, &base.offset};
        for (int i = 0; i < 4; ++i)
            register_buffer(std::string("weight") + suffixes[i], *parts[i]);
    } else {
        weight = register_parameter("weight", emptyParam({out, in}, options));
    }
    if (hasBias)
        bias = register_parameter("bias", emptyParam({out}, options));
    if (loraTargets(config, role)) {
        const int64_t rank = config.train.lora.rank;
        loraA = register_module("lora_A", WeightHolder(emptyParam({rank, in}, options)));
        loraB = register_module("lora_B", WeightHolder(emptyParam({out, rank}, options)));
        m_scaling = config.train.lora.alpha / static_cast<double>(rank);
    }
}

void LoraLinearImpl::setBase(const torch::Tensor &w)
{
    TORCH_CHECK(m_nf4, "setBase: this projection has no NF4 base");
    TORCH_CHECK(w.sizes().vec() == base.shape, "setBase: shape ", w.sizes(), " differs from the base's");
    nf4Quantize(w, base);
}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor &x)
{
    auto y = m_nf4 ? nf4Linear(x, base, m_computeType) : m_fp8 ? fp8Linear(x, weight, bias, m_fp8Scaling) : torch::nn::functional::linear(x, weight, bias);
    if (m_nf4 && bias.defined())
        y = y + bias;
    if (!loraA)
        return y;
    RECORD_USER_SCOPE("pb.lora");
    auto input = m_dropout > 0 && is_training() ? torch::dropout(x, m_dropout, true) : x;
    auto adapted = torch::nn::functional::linear(torch::nn::functional::linear(input, loraA->weight), loraB->weight);
    return y + adapted * m_scaling;
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions &options, bool fused, const ModelTraits &traits)
    : m_eps(eps), m_unitOffset(traits.normUnitOffset), m_scaleInFp32(traits.normScaleInFp32)
{
    m_fused = fused;
    weight = register_parameter("weight", emptyParam({dim}, options));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.norm");
    if (m_fused)
        return fusedRmsNorm(x, weight, m_eps, m_unitOffset, m_scaleInFp32);
    // As LlamaRMSNorm: normalise in fp32, return to the input dtype, then scale. Gemma and OLMo 2
    // scale the fp32 value (Gemma by 1 + weight) and round once at the end.
    const auto inputType = x.scalar_type();
    auto h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + m_eps);
    if (m_scaleInFp32)
        return (h * (m_unitOffset ? 1.0 + weight.to(torch::kFloat) : weight.to(torch::kFloat))).to(inputType);
    return (m_unitOffset ? 1.0 + weight : weight) * h.to(inputType);
}

namespace {

// Attention as Transformers' eager_attention_forward where the fused kernel cannot take the model's
// form: soft-capped logits (Gemma 2), or no fused kernel in this build. q [B, H, T, D], k and v
// [B, KV, T, D]; the softmax in fp32, rounded back to q's dtype. `windowMask` [T, T]: true where a
// key is seen; undefined: causal.
torch::Tensor eagerAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, double softcap, const torch::Tensor &windowMask)
{
    const int64_t groups = q.size(1) / k.size(1);
    auto scores = torch::matmul(q, compat::expandKvHeads(k, groups).transpose(-2, -1)) * scale;
    if (softcap > 0)
        scores = torch::tanh(scores / softcap) * softcap;
    const auto t = q.size(-2);
    const auto hidden = windowMask.defined() ? windowMask.logical_not()
                                             : torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type()), compat::expandKvHeads(v, groups));
}

// Sliding-window or rescaled attention on the fused kernel: SDPA with the window as a boolean mask
// (shared by every sliding layer) and the model's scale; k and v expanded to all heads, since the
// kernels that take a mask have no grouped heads.
torch::Tensor fusedMaskedAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, const torch::Tensor &windowMask)
{
#if PB_TORCH_AT_LEAST(2, 1)
    const int64_t groups = q.size(1) / k.size(1);
    if (!windowMask.defined()) {
#if PB_TORCH_AT_LEAST(2, 5)
        // As compat::groupedCausalAttention: shared heads for 16-bit q; fp32 (no GQA kernel) expands.
        if (q.scalar_type() != at::kFloat)
            return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, scale, /*enable_gqa=*/groups > 1);
#endif
        return at::scaled_dot_product_attention(q, compat::expandKvHeads(k, groups), compat::expandKvHeads(v, groups), {}, 0.0, /*is_causal=*/true, scale);
    }
    return at::scaled_dot_product_attention(q, compat::expandKvHeads(k, groups), compat::expandKvHeads(v, groups), windowMask, 0.0, /*is_causal=*/false, scale);
#else
    return eagerAttention(q, k, v, scale, 0.0, windowMask);
#endif
}

// GLM's rotate_half: pairs (2i, 2i+1) -> (-x[2i+1], x[2i]).
torch::Tensor rotateInterleaved(const torch::Tensor &x)
{
    const auto pairs = x.unflatten(-1, {x.size(-1) / 2, 2});
    return torch::stack({pairs.select(-1, 1).neg(), pairs.select(-1, 0)}, -1).flatten(-2);
}

} // namespace

SelfAttentionImpl::SelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options)
    : m_heads(config.model.attentionHeads), m_kvHeads(config.model.kvHeads), m_headDim(config.model.effectiveHeadDim()),
      m_qkNorm(config.model.qkNorm), m_fused(runtime.fusedAttention), m_interleaved(config.model.traits.ropeInterleaved),
      m_softcap(config.model.traits.attentionSoftcap), m_temperatureBeta(config.model.traits.queryTemperatureBeta),
      m_temperatureLength(config.model.traits.queryTemperatureLength), m_temperatureOffset(config.model.traits.queryTemperatureOffset),
      m_temperatureNoRope(config.model.traits.queryTemperatureNoRope), m_temperatureFp32(config.model.traits.queryTemperatureFp32),
      m_ropeFp32(config.model.traits.ropeFp32), m_normEps(config.model.normEps), m_outputGate(config.model.traits.attentionOutputGate)
{
    const auto &m = config.model;
    m_scale = m.traits.attentionScale > 0 ? m.traits.attentionScale : 1.0 / std::sqrt(static_cast<double>(m_headDim));
    m_rescaled = !usesDefaultAttentionScale(m);
    // The fused rotary turns whole heads in Llama's layout.
    m_fusedRotary = config.train.kernels == KernelPath::Fused && m.rotaryDim() == m_headDim && !m_interleaved;
    for (const auto &p : denseProjections(m)) {
        if (!p.attention)
            continue;
        auto layer = register_module(p.name, LoraLinear(p.in, p.out, p.bias, config, p.name, options));
        (p.name == "qkv_proj" ? qkv : p.name == "q_proj" ? q : p.name == "k_proj" ? k : p.name == "v_proj" ? v : o) = layer;
    }
    const int64_t qDim = m_heads * m_headDim, kvDim = m_kvHeads * m_headDim;
    if (m.traits.attentionSinks)
        sinks = register_parameter("sinks", emptyParam({m_heads}, options));
    if (m_qkNorm == QkNorm::Head || m_qkNorm == QkNorm::Full) {
        const bool perHead = m_qkNorm == QkNorm::Head;
        const bool fusedNorm = config.train.kernels == KernelPath::Fused;
        qNorm = register_module("q_norm", RmsNorm(perHead ? m_headDim : qDim, m.normEps, options, fusedNorm, m.traits));
        kNorm = register_module("k_norm", RmsNorm(perHead ? m_headDim : kvDim, m.normEps, options, fusedNorm, m.traits));
    }
}

torch::Tensor SelfAttentionImpl::rotate(const torch::Tensor &x, const torch::Tensor &c, const torch::Tensor &s) const
{
    // x [B, H, T, D]; the first rotaryDim dimensions turn, the rest pass (partial rotary).
    const int64_t rotaryDim = c.size(-1);
    if (rotaryDim == x.size(-1))
        return x * c + (m_interleaved ? rotateInterleaved(x) : rotateHalf(x)) * s;
    const auto turned = x.narrow(-1, 0, rotaryDim);
    const auto rotated = turned * c + (m_interleaved ? rotateInterleaved(turned) : rotateHalf(turned)) * s;
    return torch::cat({rotated, x.narrow(-1, rotaryDim, x.size(-1) - rotaryDim)}, -1);
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor &x, const LayerInputs &in)
{
    RECORD_USER_SCOPE("pb.attention");
    const auto b = x.size(0), t = x.size(1);
    const int64_t qDim = m_heads * m_headDim, kvDim = m_kvHeads * m_headDim;
    torch::Tensor qp, kp, vp;
    if (qkv) { // Phi-3: one projection, split as query, key, value
        const auto all = qkv->forward(x);
        qp = all.narrow(-1, 0, qDim);
        kp = all.narrow(-1, qDim, kvDim);
        vp = all.narrow(-1, qDim + kvDim, kvDim);
    } else {
        qp = q->forward(x);
        kp = k->forward(x);
    }
    torch::Tensor gate;
    if (m_outputGate) {
        // Qwen3NextAttention: per head [query | gate], split before the q norm sees the query.
        const auto both = qp.view({b, t, m_heads, 2 * m_headDim});
        gate = both.narrow(-1, m_headDim, m_headDim).reshape({b, t, qDim});
        qp = both.narrow(-1, 0, m_headDim).reshape({b, t, qDim});
    }
    if (m_qkNorm == QkNorm::Full) { // OLMoE, OLMo 2: over the whole projection
        qp = qNorm->forward(qp);
        kp = kNorm->forward(kp);
    }
    qp = qp.view({b, t, m_heads, m_headDim});
    kp = kp.view({b, t, m_kvHeads, m_headDim});
    if (m_qkNorm == QkNorm::Head) { // Qwen3, Gemma 3: each head on its own
        qp = qNorm->forward(qp);
        kp = kNorm->forward(kp);
    }
    torch::Tensor qs, ks;
    // The fused rotary keeps each tensor's dtype; eager promotes k to an fp32 q's (a q_norm with an
    // fp32 weight), so that case stays eager.
    if (!in.cos.defined()) { // a layer without rotary (NoPE)
        qs = qp.transpose(1, 2);
        ks = kp.transpose(1, 2);
    } else if (m_fusedRotary && qp.scalar_type() == kp.scalar_type()) {
        qs = fusedRotary(qp, in.cos, in.sin).transpose(1, 2);
        ks = fusedRotary(kp, in.cos, in.sin).transpose(1, 2);
    } else {
        // As apply_rotary_pos_emb: q and k turned by tables cast to q's dtype (OLMo 2/3: by the fp32
        // tables, the result cast back to each one's dtype). A partial rotary turns the [B, T, heads,
        // hd] projections before the transpose, so its concatenation keeps their layout: SDPA then
        // returns [B, T, heads, hd] and o_proj reads a view, not a copy.
        const auto c = m_ropeFp32 ? in.cos : in.cos.to(qp.scalar_type()), s = m_ropeFp32 ? in.sin : in.sin.to(qp.scalar_type());
        if (c.size(-1) == m_headDim) {
            qs = rotate(qp.transpose(1, 2), c, s);
            ks = rotate(kp.transpose(1, 2), c, s);
        } else {
            qs = rotate(qp, c.unsqueeze(1), s.unsqueeze(1)).transpose(1, 2);
            ks = rotate(kp, c.unsqueeze(1), s.unsqueeze(1)).transpose(1, 2);
        }
        if (m_ropeFp32) {
            qs = qs.to(qp.scalar_type());
            ks = ks.to(kp.scalar_type());
        }
    }
    const bool rotary = in.cos.defined();
    if (m_qkNorm == QkNorm::L2 && rotary) {
        // Llama4TextL2Norm: each head's q and k scaled to unit RMS in fp32, no weight, after the rotary.
        auto l2 = [this](const torch::Tensor &a) {
            const auto f = a.to(torch::kFloat);
            return (f * torch::rsqrt(f.pow(2).mean(-1, /*keepdim=*/true) + m_normEps)).to(a.scalar_type());
        };
        qs = l2(qs);
        ks = l2(ks);
    }
    if (m_temperatureBeta > 0 && t - 1 + m_temperatureOffset >= m_temperatureLength && !(m_temperatureNoRope && rotary)) {
        // The attention temperature on queries past the pre-training context (k untouched):
        // Ministral 3's on every layer from position 0, Llama 4's on its NoPE layers from 1.
        const auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kFloat).device(x.device()));
        const auto scale = 1 + m_temperatureBeta * torch::log1p(torch::floor((pos + static_cast<double>(m_temperatureOffset)) / static_cast<double>(m_temperatureLength)));
        // Llama 4 multiplies by the fp32 scale and rounds once; Ministral 3 rounds the scale first.
        qs = m_temperatureFp32 ? (qs * scale.view({1, 1, t, 1})).to(qs.scalar_type()) : qs * scale.view({1, 1, t, 1}).to(qs.scalar_type());
    }
    auto vs = (qkv ? vp : v->forward(x)).view({b, t, m_kvHeads, m_headDim}).transpose(1, 2);
    const bool window = in.windowMask.defined();
    torch::Tensor attended;
    if (sinks.defined()) // gpt-oss: no kernel has sinks; one more key carries them on the fused one
        attended = m_fused ? sinkKeyAttention(qs, ks, vs, sinks, m_scale, in.windowMask) : sinkEagerAttention(qs, ks, vs, sinks, m_scale, in.windowMask);
    else if (usesEagerAttentionForm(m_softcap, m_fused, window, m_rescaled))
        attended = eagerAttention(qs, ks, vs, m_scale, m_softcap, in.windowMask);
    else if (window || m_rescaled)
        attended = fusedMaskedAttention(qs, ks, vs, m_scale, in.windowMask);
    else
        attended = compat::groupedCausalAttention(qs, ks, vs, m_fused);
    auto merged = attended.transpose(1, 2).reshape({b, t, m_heads * m_headDim});
    if (gate.defined())
        merged = merged * torch::sigmoid(gate);
    return o->forward(merged);
}

MlpImpl::MlpImpl(const RunConfig &config, const torch::TensorOptions &options, int64_t intermediate, const std::array<std::string, 3> &names,
                 bool fusedSwiglu)
    : m_fusedGate(fusedSwiglu && !config.model.traits.fusedGateUp),
      m_activation(config.model.activation)
{
    const auto &m = config.model;
    const int64_t width = intermediate > 0 ? intermediate : m.intermediateSize;
    if (intermediate == 0) { // the dense MLP: the model's own projections
        for (const auto &p : denseProjections(m)) {
            if (p.attention)
                continue;
            auto layer = register_module(p.name, LoraLinear(p.in, p.out, p.bias, config, p.name, options));
            (p.name == "gate_up_proj" ? gateUp : p.name == "gate_proj" ? gate : p.name == "up_proj" ? up : down) = layer;
        }
        return;
    }
    if (m.activation != ActivationKind::Gelu)
        gate = register_module(names[0], LoraLinear(m.hiddenSize, width, false, config, "gate_proj", options));
    up = register_module(names[1], LoraLinear(m.hiddenSize, width, false, config, "up_proj", options));
    down = register_module(names[2], LoraLinear(width, m.hiddenSize, false, config, "down_proj", options));
}

torch::Tensor MlpImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.mlp");
    if (!gate && !gateUp)
        return down->forward(torch::gelu(up->forward(x), "tanh"));
    // Gate first on both paths, so LoRA dropout draws its masks in one order.
    torch::Tensor g, u;
    if (gateUp) {
        const auto both = gateUp->forward(x);
        const int64_t width = both.size(-1) / 2;
        g = both.narrow(-1, 0, width);
        u = both.narrow(-1, width, width);
    } else {
        g = gate->forward(x);
        u = up->forward(x);
    }
    switch (m_activation) {
    case ActivationKind::GeGlu: return down->forward(m_fusedGate ? fusedGatedActivation(g, u, GateActivation::GeluTanh) : torch::gelu(g, "tanh") * u);
    case ActivationKind::GeGluErf: return down->forward(m_fusedGate ? fusedGatedActivation(g, u, GateActivation::GeluErf) : torch::gelu(g) * u);
    default: break;
    }
    // SwiGLU as LlamaMLP: down(silu(gate(x)) * up(x)).
    return down->forward(m_fusedGate ? fusedSwiglu(g, u) : torch::silu(g) * u);
}

DecoderBlockImpl::DecoderBlockImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options, int64_t layer)
    : m_residualScale(config.model.traits.residualScale)
{
    const auto &m = config.model;
    const bool fused = config.train.kernels == KernelPath::Fused;
    const BlockNormNames names = blockNormNames(m);
    auto norm = [&](const std::string &name) {
        return name.empty() ? RmsNorm(nullptr) : register_module(name, RmsNorm(m.hiddenSize, m.normEps, options, fused, m.traits));
    };
    // Registered in the checkpoint's order of names within a layer.
    beforeAttention = norm(names.beforeAttention);
    if (layer >= 0 && m.linear.linear(layer)) {
        const LinearAttention &l = m.linear;
        GatedDeltaNetOptions o;
        o.hidden = m.hiddenSize;
        o.keyHeads = l.keyHeads;
        o.valueHeads = l.valueHeads;
        o.keyHeadDim = l.keyHeadDim;
        o.valueHeadDim = l.valueHeadDim;
        o.convKernel = l.convKernel;
        o.normEps = m.normEps;
        o.layout = l.layout == LinearAttentionLayout::QkvzBa ? GatedDeltaNetLayout::InterleavedQkvzBa : GatedDeltaNetLayout::SeparateQkvZBA;
        o.makeProjection = [&config, options](const std::string &name, int64_t in, int64_t out) {
            return torch::nn::AnyModule(LoraLinear(in, out, false, config, name, options));
        };
        linearAttention = register_module("linear_attn", GatedDeltaNet(o, options));
    } else if (m.latent.enabled())
        latentAttention = register_module("self_attn", makeLatentAttention(config, runtime, options));
    else
        attention = register_module("self_attn", SelfAttention(config, runtime, options));
    afterAttention = norm(names.afterAttention);
    beforeMlp = norm(names.beforeMlp);
    if (layer >= 0 && m.moe.sparse(layer)) {
        const std::string name = expertNames(m).prefix;
        moe = register_module(name.substr(0, name.size() - 1), SparseMoe(config, options));
    } else {
        const std::string name = denseMlpPrefix(m);
        mlp = register_module(name.substr(0, name.size() - 1), Mlp(config, options, 0, std::array<std::string, 3> {"gate_proj", "up_proj", "down_proj"}, fused));
    }
    afterMlp = norm(names.afterMlp);
}

torch::Tensor DecoderBlockImpl::forward(const torch::Tensor &x, const LayerInputs &in)
{
    RECORD_USER_SCOPE("pb.block"); // the residual adds
    auto scaled = [this](torch::Tensor t) { return m_residualScale == 1.0 ? t : t * m_residualScale; };
    const auto attentionInput = beforeAttention ? beforeAttention->forward(x) : x;
    auto a = linearAttention ? linearAttention->forward(attentionInput)
             : attention     ? attention->forward(attentionInput, in)
                             : latentAttention->forward(attentionInput, in);
    if (afterAttention)
        a = afterAttention->forward(a);
    auto h = x + scaled(a);
    const auto normed = beforeMlp ? beforeMlp->forward(h) : h;
    auto f = moe ? moe->forward(normed) : mlp->forward(normed);
    if (afterMlp)
        f = afterMlp->forward(f);
    return h + scaled(f);
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
    norm = register_module("norm", RmsNorm(m.hiddenSize, m.normEps, options, config.train.kernels == KernelPath::Fused, m.traits));
}

DecoderModelImpl::DecoderModelImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::Device &device)
    : m_runtime(runtime), m_shape(config.model), m_moe(config.model.moe), m_kernels(config.train.kernels)
{
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
    stack = register_module("model", DecoderStack(config, runtime, options));
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

void DecoderModelImpl::rotaryTables(int64_t seqLen, const torch::Device &device, double theta, const RopeScaling &scaling, torch::Tensor &cos,
                                    torch::Tensor &sin) const
{
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    double attentionFactor = 1.0;
    const auto invFreq = rotaryInverseFrequencies(m_shape.rotaryDim(), theta, scaling, device, seqLen, &attentionFactor);
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

torch::Tensor DecoderModelImpl::hidden(const torch::Tensor &inputs)
{
    if (m_blockHooks)
        m_blockHooks->beforeModel();
    const ModelTraits &traits = m_shape.traits;
    const int64_t t = inputs.size(1);
    torch::Tensor h, chunkMask;
    LayerInputs global, local;
    {
        RECORD_USER_SCOPE("pb.embedding");
        h = torch::embedding(stack->embedTokens->weight, inputs);
        if (traits.embeddingScale != 1.0) // Gemma rounds sqrt(hidden) to the embedding's dtype first
            h = traits.embeddingScaleRounded ? h * torch::scalar_tensor(traits.embeddingScale, h.options()) : h * traits.embeddingScale;
        if (m_inputNeedsGrad)
            h.requires_grad_(true);
        rotaryTables(t, inputs.device(), m_shape.ropeTheta, m_shape.ropeScaling, global.cos, global.sin);
        if (traits.attentionChunk > 0 && t > traits.attentionChunk) {
            // One mask for every chunked layer: key j is seen from query i when j <= i in i's chunk.
            // Within one chunk it is the causal mask, which the unmasked kernels apply themselves.
            const auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(inputs.device()));
            const auto chunk = pos.div(traits.attentionChunk, "floor");
            chunkMask = pos.unsqueeze(1).ge(pos.unsqueeze(0)).logical_and(chunk.unsqueeze(1).eq(chunk.unsqueeze(0)));
        }
        if (traits.slidingWindow > 0) {
            // One mask for every sliding layer: key j is seen from query i when i - W < j <= i.
            const auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(inputs.device()));
            const auto distance = pos.unsqueeze(1) - pos.unsqueeze(0);
            local.windowMask = distance.ge(0).logical_and(distance.lt(traits.slidingWindow));
            if (traits.localRopeTheta > 0)
                rotaryTables(t, inputs.device(), traits.localRopeTheta, RopeScaling {}, local.cos, local.sin);
            else
                local.cos = global.cos, local.sin = global.sin;
        }
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
        const int64_t layer = static_cast<int64_t>(i);
        LayerInputs in = traits.usesSliding(layer) ? local : global;
        if (!traits.usesRope(layer))
            in.cos = in.sin = torch::Tensor();
        if (traits.usesChunks(layer))
            in.windowMask = chunkMask;
        torch::Tensor layerProbabilities;
        if (m_runtime.recompute && is_training()) {
            // A custom autograd function takes defined tensors only: an absent input travels empty.
            const auto none = torch::empty({0}, h.options().dtype(torch::kFloat));
            auto present = [&none](const torch::Tensor &t) { return t.defined() ? t : none; };
            auto outputs = BlockRecompute::apply(h, present(in.cos), present(in.sin), present(in.windowMask), reinterpret_cast<int64_t>(block.get()));
            h = outputs[0];
            layerProbabilities = outputs[1];
        } else {
            h = block->forward(h, in);
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

torch::Tensor DecoderModelImpl::headLogits(const torch::Tensor &h)
{
    const auto &headWeight = lmHead ? lmHead->weight : stack->embedTokens->weight;
    const ModelTraits &traits = m_shape.traits;
    auto logits = torch::nn::functional::linear(h, headWeight);
    // Granite divides the logits; Gemma 2 soft-caps them (divide, tanh, multiply).
    if (traits.logitsDivisor != 1.0)
        logits = logits / traits.logitsDivisor;
    if (traits.finalSoftcap > 0)
        logits = torch::tanh(logits / traits.finalSoftcap) * traits.finalSoftcap;
    return logits;
}

torch::Tensor DecoderModelImpl::logits(const torch::Tensor &inputs)
{
    return headLogits(hidden(inputs));
}

torch::Tensor DecoderModelImpl::loss(const torch::Tensor &inputs, const torch::Tensor &targets)
{
    auto h = hidden(inputs);
    RECORD_USER_SCOPE("pb.head"); // the language-model head and the loss (the peak recorder's logits)
    const auto &headWeight = lmHead ? lmHead->weight : stack->embedTokens->weight;
    torch::Tensor loss;
    const ModelTraits &traits = m_shape.traits;
    if (m_kernels == KernelPath::Fused) {
        loss = linearCrossEntropy(h.reshape({-1, h.size(-1)}), headWeight, targets.reshape({-1}), 0, LogitsTransform {traits.logitsDivisor, traits.finalSoftcap});
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
