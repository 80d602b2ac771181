#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "model/FusedOps.h"
#include "model/MixedLinear.h"
#include "model/SinkAttention.h"
#include "model/WindowedAttention.h"
#include "engine/TorchCompat.h"

#include <algorithm>
#include <cmath>

namespace pb {

// A parameter's shape without its memory: zero strides over one element. DecoderModel gives each
// its storage in the dtype it keeps (frozen bf16, trainable fp32 ...) once the parameter table says
// which, so no full-precision copy of the model ever exists, as a loader with a dtype does.
torch::Tensor emptyParam(std::vector<int64_t> shape, const torch::TensorOptions &options)
{
    return torch::empty_strided(shape, std::vector<int64_t>(shape.size(), 0), options);
}

LoraLinearImpl::LoraLinearImpl(int64_t in, int64_t out, bool hasBias, const RunConfig &config, const std::string &role, const torch::TensorOptions &options)
    : m_dropout(config.train.lora.dropout), m_nf4(config.train.mode == TrainMode::Qlora), m_fp8(isFp8(config.train.precision) && !m_nf4),
      m_fp8Scaling(config.train.precision == Precision::Fp8Tensorwise ? Fp8Scaling::Tensorwise : Fp8Scaling::Rowwise),
      m_computeType(config.train.precision == Precision::Fp16Mixed ? at::kHalf : at::kBFloat16),
      m_addInGemm(config.train.kernels == KernelPath::Fused)
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

bool LoraLinearImpl::mixedBase(const torch::Tensor &x) const { return m_addInGemm && m_mixed && !m_nf4 && !m_fp8 && mixedLinearApplies(x); }

MixedAdapter LoraLinearImpl::nodeAdapter() const
{
    if (!loraA || !m_adaptersInNode)
        return {};
    return {loraA->weight, loraB->weight, m_scaling, m_dropout > 0 && is_training() ? m_dropout : 0.0};
}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor &x)
{
    if (mixedBase(x)) {
        const MixedAdapter adapter = nodeAdapter();
        const auto y = mixedLinearShared(x, {weight}, {bias}, {adapter})[0];
        return adapter.a.defined() ? y : withAdapter(x, y);
    }
    auto y = m_nf4 ? nf4Linear(x, base, m_computeType) : m_fp8 ? fp8Linear(x, weight, bias, m_fp8Scaling) : torch::nn::functional::linear(x, weight, bias);
    if (m_nf4 && bias.defined())
        y = y + bias;
    return withAdapter(x, y);
}

std::vector<torch::Tensor> LoraLinearImpl::forwardShared(const std::vector<LoraLinearImpl *> &projections, const torch::Tensor &x)
{
    const auto *first = projections.front();
    const bool fp8 = std::all_of(projections.begin(), projections.end(), [first](const LoraLinearImpl *p) {
        return p->m_fp8 && p->m_fp8Scaling == first->m_fp8Scaling;
    });
    const bool mixed = std::all_of(projections.begin(), projections.end(), [&x](const LoraLinearImpl *p) { return p->mixedBase(x); });
    std::vector<torch::Tensor> out;
    if (projections.size() < 2 || (!fp8 && !mixed)) {
        for (auto *p : projections)
            out.push_back(p->forward(x));
        return out;
    }
    std::vector<torch::Tensor> weights, biases;
    std::vector<MixedAdapter> adapters;
    for (const auto *p : projections) {
        weights.push_back(p->weight);
        biases.push_back(p->bias);
        adapters.push_back(fp8 ? MixedAdapter {} : p->nodeAdapter());
    }
    out = fp8 ? fp8LinearShared(x, weights, biases, first->m_fp8Scaling) : mixedLinearShared(x, weights, biases, adapters);
    // Adapters in the projections' order, so LoRA dropout draws its masks as forward() one by one does.
    for (size_t i = 0; i < projections.size(); ++i)
        if (!adapters[i].a.defined())
            out[i] = projections[i]->withAdapter(x, out[i]);
    return out;
}

torch::Tensor LoraLinearImpl::withAdapter(const torch::Tensor &x, torch::Tensor y)
{
    if (!loraA)
        return y;
    RECORD_USER_SCOPE("pb.lora");
    // The eager path is PEFT's twin: LoRA's Linear first casts its input to lora_A's dtype (fp32
    // under autocast; bitsandbytes' 4-bit layer only without autocast), which autocast casts back
    // for lora_A and keeps, a copy an adapter: 6% of Llama-3.2-1B's eager LoRA step on the H200
    // (281.3 ms against 264.2 without), and that copy's memory, in every PEFT run a user makes.
    const auto adapterType = loraA->weight.scalar_type();
    const bool peftCast = m_peftCast && !m_addInGemm && x.scalar_type() != adapterType && (!m_nf4 || !compat::autocastEnabled(x.device().type()));
    const auto cast = peftCast ? x.to(adapterType) : x;
    auto input = m_dropout > 0 && is_training() ? torch::dropout(cast, m_dropout, true) : cast;
    const auto down = torch::nn::functional::linear(input, loraA->weight);
    // Only where the sum keeps y's dtype (autocast, or one dtype throughout): a 16-bit base output
    // beside an fp32 adapter without autocast promotes to fp32 in PEFT's form, and keeps doing so.
    if (m_addInGemm && (compat::autocastEnabled(y.device().type()) ||
                        at::promote_types(at::promote_types(y.scalar_type(), down.scalar_type()), loraB->weight.scalar_type()) == y.scalar_type())) {
        // y += scaling * down @ B^T as the GEMM's own accumulation (beta = 1) into the base
        // output, which nothing else reads: where PEFT's form launches a scale and an add over the
        // [tokens, out] product (and their backward). One rounding instead of three; the eager
        // path keeps PEFT's.
        const auto down2 = down.reshape({-1, down.size(-1)}).to(y.scalar_type());
        const auto bT = loraB->weight.to(y.scalar_type()).t();
        // A view made inside a custom function (the float8 and NF4 bases' outputs) may not be
        // changed in place: there addmm writes a new tensor (one copy of y, still no scale or add).
        if (y.is_view() || !y.is_contiguous())
            return torch::addmm(y.reshape({-1, y.size(-1)}), down2, bT, 1.0, m_scaling).view(y.sizes());
        y.view({-1, y.size(-1)}).addmm_(down2, bT, 1.0, m_scaling);
        return y;
    }
    return y + torch::nn::functional::linear(down, loraB->weight) * m_scaling;
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

std::pair<torch::Tensor, torch::Tensor> RmsNormImpl::addForward(const torch::Tensor &x, const torch::Tensor &branch, double scale)
{
    if (m_fused) {
        RECORD_USER_SCOPE("pb.norm");
        return fusedAddRmsNorm(x, branch, scale, weight, m_eps, m_unitOffset, m_scaleInFp32);
    }
    auto h = residualAdd(x, branch, scale);
    return {h, forward(h)};
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
    if (softcap > 0) {
        // Transformers' three statements, each result replacing the last: two score-sized tensors
        // alive at a time. As one expression the old scores and each temporary lived to its end,
        // four at once (the peak recorder on CPU, Gemma 2 rebuilt under recompute).
        scores = scores / softcap;
        scores = torch::tanh(scores);
        scores = scores * softcap;
    }
    const auto t = q.size(-2);
    const auto hidden = windowMask.defined() ? windowMask.logical_not()
                                             : torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type()), compat::expandKvHeads(v, groups));
}

// Soft-capped attention on the capped softmax's kernel: eagerAttention's maths with one kernel (and
// its backward) between the two bmms in place of eight element-wise ops; no mask is built, and the
// heads sharing a key/value head read it as it is (groupedHeadsAttention: on an H100 profile of
// Gemma-2-9B, k and v expanded to all heads cost 2 copies a layer and 1.1 ms a step of sums back),
// in the layout the projections and the rotary left q, k, v (model/HeadLayoutProducts.h).
torch::Tensor cappedKernelAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, double softcap, int64_t window)
{
    return groupedHeadsAttention(q, k, v, [&](const torch::Tensor &scores) { return cappedSoftmax(scores, scale, softcap, window); });
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
        // As compat::groupedCausalAttention: shared heads for 16-bit q up to flash's width; fp32 or a
        // wider head (no GQA kernel takes them) expands.
        if (compat::sharedHeadsKernel(q))
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

SelfAttentionImpl::SelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options, int64_t layer)
    : m_heads(config.model.attentionHeads), m_kvHeads(layer >= 0 ? config.model.kvHeadsAt(layer) : config.model.kvHeads),
      m_headDim(layer >= 0 ? config.model.headDimAt(layer) : config.model.effectiveHeadDim()),
      m_qkNorm(config.model.qkNorm), m_fused(runtime.fusedAttention), m_interleaved(config.model.traits.ropeInterleaved),
      m_softcap(config.model.traits.attentionSoftcap), m_temperatureBeta(config.model.traits.queryTemperatureBeta),
      m_temperatureLength(config.model.traits.queryTemperatureLength), m_temperatureOffset(config.model.traits.queryTemperatureOffset),
      m_temperatureNoRope(config.model.traits.queryTemperatureNoRope), m_temperatureFp32(config.model.traits.queryTemperatureFp32),
      m_ropeFp32(config.model.traits.ropeFp32), m_eagerRotary(config.train.kernels == KernelPath::Eager), m_normEps(config.model.normEps), m_outputGate(config.model.traits.attentionOutputGate),
      m_valueNorm(config.model.traits.valueNorm), m_sharedKv(layer >= 0 && config.model.kvShared(layer)),
      m_keepsKv(layer >= 0 && config.model.kvSource(layer)),
      m_window(layer >= 0 && config.model.usesSliding(layer) ? config.model.traits.slidingWindow : 0),
      m_windowKernel(config.train.kernels == KernelPath::Fused && runtime.windowKernel),
      m_cappedKernel(config.train.kernels == KernelPath::Fused && config.model.traits.attentionSoftcap > 0)
{
    const auto &m = config.model;
    m_scale = m.traits.attentionScale > 0 ? m.traits.attentionScale : 1.0 / std::sqrt(static_cast<double>(m_headDim));
    m_rescaled = !usesDefaultAttentionScale(m, m_headDim);
    // The fused rotary turns whole heads in Llama's layout.
    m_fusedRotary = config.train.kernels == KernelPath::Fused && (layer >= 0 ? m.rotaryDimAt(layer) : m.rotaryDim()) == m_headDim && !m_interleaved;
    for (const auto &p : denseProjections(m, layer)) {
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
        if (!m_sharedKv)
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
    } else if (q->readsShared(x) && !m_sharedKv) {
        // One float8 cast of x for q, k and v (and of its transpose in the backward); on the fused
        // path one MixedLinear node, whose GEMMs sum x's gradient where three nodes' were added by
        // autograd (two [tokens, hidden] adds a layer: 2.1 ms of an H100's 183 ms Llama-3.2-1B LoRA step).
        std::vector<LoraLinearImpl *> readers {q.get(), k.get()};
        if (v)
            readers.push_back(v.get());
        const auto outs = LoraLinearImpl::forwardShared(readers, x);
        qp = outs[0];
        kp = outs[1];
        if (v)
            vp = outs[2];
    } else {
        qp = q->forward(x);
        if (!m_sharedKv)
            kp = k->forward(x);
    }
    const torch::Tensor kRaw = kp;
    torch::Tensor gate;
    if (m_outputGate) {
        // Qwen3NextAttention: per head [query | gate], split before the q norm sees the query.
        const auto both = qp.view({b, t, m_heads, 2 * m_headDim});
        gate = both.narrow(-1, m_headDim, m_headDim).reshape({b, t, qDim});
        qp = both.narrow(-1, 0, m_headDim).reshape({b, t, qDim});
    }
    // A shared layer (Gemma 4) has only its queries to make: its keys and values come from
    // LayerInputs, so the steps below run on the queries alone.
    const bool ownKv = !m_sharedKv;
    auto normed = [&](torch::Tensor p, int64_t heads, RmsNorm &norm) {
        if (m_qkNorm == QkNorm::Full) // OLMoE, OLMo 2: over the whole projection
            p = norm->forward(p);
        p = p.view({b, t, heads, m_headDim});
        if (m_qkNorm == QkNorm::Head) // Qwen3, Gemma 3: each head on its own
            p = norm->forward(p);
        return p;
    };
    qp = normed(qp, m_heads, qNorm);
    if (ownKv)
        kp = normed(kp, m_kvHeads, kNorm);
    // The fused rotary keeps each tensor's dtype; eager promotes k to an fp32 q's (a q_norm with an
    // fp32 weight), so that case stays eager.
    const bool fusedRotaryHere = m_fusedRotary && (!ownKv || qp.scalar_type() == kp.scalar_type());
    // q and k turned by the same tables cast once to q's dtype (OLMo 2/3: by the fp32 tables, the
    // result cast back to each one's dtype). Transformers casts the tables to the hidden stream's
    // dtype, so over fp32 masters under autocast its q * cos promotes and its rotary runs in fp32
    // until SDPA's cast: the eager path does the same, one rounding of q and k and the same fp32
    // traffic (hf_reference.py --rotary-in-compute-dtype times it), the fused one keeps q's dtype.
    const bool turnInFp32 = m_ropeFp32 || (m_eagerRotary && x.scalar_type() == torch::kFloat);
    torch::Tensor cosCast, sinCast;
    if (in.cos.defined() && !fusedRotaryHere) {
        cosCast = turnInFp32 ? in.cos : in.cos.to(qp.scalar_type());
        sinCast = turnInFp32 ? in.sin : in.sin.to(qp.scalar_type());
    }
    auto turned = [&](const torch::Tensor &p) -> torch::Tensor {
        if (!in.cos.defined()) // a layer without rotary (NoPE)
            return p.transpose(1, 2);
        if (fusedRotaryHere)
            return fusedRotary(p, in.cos, in.sin).transpose(1, 2);
        // A partial rotary turns the [B, T, heads, hd] projections before the transpose, so its
        // concatenation keeps their layout: SDPA then returns [B, T, heads, hd] and o_proj reads a
        // view, not a copy.
        auto r = cosCast.size(-1) == m_headDim ? rotate(p.transpose(1, 2), cosCast, sinCast)
                                               : rotate(p, cosCast.unsqueeze(1), sinCast.unsqueeze(1)).transpose(1, 2);
        return turnInFp32 ? r.to(p.scalar_type()) : r;
    };
    torch::Tensor qs = turned(qp), ks;
    if (ownKv)
        ks = turned(kp);
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
    torch::Tensor vs;
    if (ownKv) {
        // Gemma 4's global layers under attention_k_eq_v: the values are k_proj's output before its norm.
        auto vh = (vp.defined() ? vp : v ? v->forward(x) : kRaw).view({b, t, m_kvHeads, m_headDim});
        if (m_valueNorm) { // Gemma4RMSNorm(with_scale=False): in fp32, cast back
            const auto f = vh.to(torch::kFloat);
            vh = (f * torch::rsqrt(f.pow(2).mean(-1, /*keepdim=*/true) + m_normEps)).to(vh.scalar_type());
        }
        vs = vh.transpose(1, 2);
        if (m_keepsKv) {
            keptKeys = ks;
            keptValues = vs;
        }
    } else {
        // Gemma4TextAttention's shared layer: the earlier layer's keys and values, gradients flowing back to it.
        TORCH_CHECK(in.sharedKeys.defined() && in.sharedValues.defined(), "a shared key/value layer ran without its source layer's keys and values");
        ks = in.sharedKeys;
        vs = in.sharedValues;
    }
    const bool window = in.windowMask.defined() || m_window > 0;
    // DecoderModel leaves the shared mask out where it expects every sliding layer on the windowed
    // kernel; a layer the kernel still refuses makes its own.
    auto windowMask = [&] { return in.windowMask.defined() || m_window == 0 ? in.windowMask : slidingWindowMask(t, m_window, x.device()); };
    torch::Tensor attended;
    if (sinks.defined()) // gpt-oss: no kernel has sinks; one more key carries them on the fused one
        attended = m_fused ? sinkKeyAttention(qs, ks, vs, sinks, m_scale, windowMask()) : sinkEagerAttention(qs, ks, vs, sinks, m_scale, windowMask());
    else if (m_cappedKernel && (m_window > 0 || !in.windowMask.defined()) && cappedSoftmaxRuns(qs.device(), eagerComputeType(qs, ks)))
        attended = cappedKernelAttention(qs, ks, vs, m_scale, m_softcap, m_window);
    else if (usesEagerAttentionForm(m_softcap, m_fused, window, m_rescaled))
        attended = eagerAttention(qs, ks, vs, m_scale, m_softcap, windowMask());
    else if (m_window > 0 && m_windowKernel && windowKernelTakes(qs, ks, vs))
        attended = windowedAttention(qs, ks, vs, m_scale, m_window);
    else if (window || m_rescaled)
        attended = fusedMaskedAttention(qs, ks, vs, m_scale, windowMask());
    else
        attended = compat::groupedCausalAttention(qs, ks, vs, m_fused);
    auto merged = attended.transpose(1, 2).reshape({b, t, m_heads * m_headDim});
    if (gate.defined())
        merged = merged * torch::sigmoid(gate);
    return o->forward(merged);
}

MlpImpl::MlpImpl(const RunConfig &config, const torch::TensorOptions &options, int64_t intermediate, const std::array<std::string, 3> &names,
                 bool fusedGate, int64_t layerIndex)
    : m_fusedGate(fusedGate && !config.model.traits.fusedGateUp), m_packedGate(fusedGate && config.model.traits.fusedGateUp),
      m_activation(config.model.activation)
{
    const auto &m = config.model;
    const int64_t width = intermediate > 0 ? intermediate : m.intermediateSize;
    if (intermediate == 0) { // the dense MLP: the model's own projections
        for (const auto &p : denseProjections(m, layerIndex)) {
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
        if (m_packedGate)
            return down->forward(fusedGatedActivationPacked(both, m_activation == ActivationKind::GeGlu      ? GateActivation::GeluTanh
                                                                  : m_activation == ActivationKind::GeGluErf ? GateActivation::GeluErf
                                                                                                             : GateActivation::Silu));
        const int64_t width = both.size(-1) / 2;
        g = both.narrow(-1, 0, width);
        u = both.narrow(-1, width, width);
    } else {
        const auto both = LoraLinearImpl::forwardShared({gate.get(), up.get()}, x);
        g = both[0];
        u = both[1];
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
    : m_residualScale(config.model.traits.residualScale), m_foldResidualAdd(runtime.foldResidualAdd), m_layerScope("pb.layer." + std::to_string(layer))
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
        o.fusedLoop = fused;
        o.layout = l.layout == LinearAttentionLayout::QkvzBa ? GatedDeltaNetLayout::InterleavedQkvzBa : GatedDeltaNetLayout::SeparateQkvZBA;
        o.makeProjection = [&config, options](const std::string &name, int64_t in, int64_t out) {
            return torch::nn::AnyModule(LoraLinear(in, out, false, config, name, options));
        };
        linearAttention = register_module("linear_attn", GatedDeltaNet(o, options));
    } else if (m.latent.enabled())
        latentAttention = register_module("self_attn", makeLatentAttention(config, runtime, options));
    else
        attention = register_module("self_attn", SelfAttention(config, runtime, options, layer));
    afterAttention = norm(names.afterAttention);
    beforeMlp = norm(names.beforeMlp);
    if (layer >= 0 && m.moe.sparse(layer)) {
        const std::string name = expertNames(m).prefix;
        moe = register_module(name.substr(0, name.size() - 1), SparseMoe(config, options));
    } else {
        const std::string name = denseMlpPrefix(m);
        mlp = register_module(name.substr(0, name.size() - 1), Mlp(config, options, 0, std::array<std::string, 3> {"gate_proj", "up_proj", "down_proj"}, fused, layer));
    }
    afterMlp = norm(names.afterMlp);
    if (m.traits.perLayerInput > 0) {
        const int64_t p = m.traits.perLayerInput;
        perLayerGate = register_module("per_layer_input_gate", LoraLinear(m.hiddenSize, p, false, config, "per_layer_input_gate", options));
        perLayerProjection = register_module("per_layer_projection", LoraLinear(p, m.hiddenSize, false, config, "per_layer_projection", options));
        perLayerNorm = register_module("post_per_layer_input_norm", RmsNorm(m.hiddenSize, m.normEps, options, fused, m.traits));
        m_perLayerErf = m.activation == ActivationKind::GeGluErf;
    }
    // Loaded from the checkpoint, never trained (Gemma4TextDecoderLayer's persistent buffer).
    if (m.traits.layerScalar)
        layerScalar = register_buffer("layer_scalar", torch::ones({1}, options.dtype(torch::kFloat)));
}

bool DecoderBlockImpl::defersOutputAdd() const { return m_foldResidualAdd && beforeAttention && !perLayerGate && !layerScalar.defined(); }

std::pair<torch::Tensor, torch::Tensor> DecoderBlockImpl::forwardDeferred(torch::Tensor x, torch::Tensor pending, const LayerInputs &in)
{
    RECORD_USER_SCOPE(m_layerScope.c_str());
    return forwardParts(std::move(x), std::move(pending), in);
}

std::pair<torch::Tensor, torch::Tensor> DecoderBlockImpl::forwardParts(torch::Tensor x, torch::Tensor pending, const LayerInputs &in)
{
    RECORD_USER_SCOPE("pb.block"); // the residual adds
    torch::Tensor stream, attentionInput;
    if (pending.defined()) {
        std::tie(stream, attentionInput) = beforeAttention->addForward(x, pending, m_residualScale);
        // Their last holders: both parts go now (unless saved), as they did after the add this replaces.
        pending.reset();
        x.reset();
    } else {
        stream = std::move(x);
        attentionInput = beforeAttention ? beforeAttention->forward(stream) : stream;
    }
    auto a = linearAttention ? linearAttention->forward(attentionInput)
             : attention     ? attention->forward(attentionInput, in)
                             : latentAttention->forward(attentionInput, in);
    if (afterAttention)
        a = afterAttention->forward(a);
    torch::Tensor h, normed;
    if (beforeMlp && m_foldResidualAdd)
        std::tie(h, normed) = beforeMlp->addForward(stream, a, m_residualScale);
    else if (beforeMlp)
        normed = beforeMlp->forward(h = residualAdd(stream, a, m_residualScale));
    else
        normed = h = residualAdd(stream, a, m_residualScale);
    auto f = moe ? moe->forward(normed) : mlp->forward(normed);
    if (afterMlp)
        f = afterMlp->forward(f);
    return {h, f};
}

torch::Tensor DecoderBlockImpl::forward(const torch::Tensor &x, const LayerInputs &in)
{
    RECORD_USER_SCOPE(m_layerScope.c_str());
    return forwardWhole(x, in);
}

torch::Tensor DecoderBlockImpl::forwardWhole(const torch::Tensor &x, const LayerInputs &in)
{
    auto [h, f] = forwardParts(x, torch::Tensor(), in);
    RECORD_USER_SCOPE("pb.block");
    auto out = residualAdd(h, f, m_residualScale);
    if (perLayerGate) {
        // Gemma4TextDecoderLayer: gelu(per_layer_input_gate(h)) times the layer's input (fp32 under
        // autocast, so the product is too), projected back, normed, added.
        const auto g = perLayerGate->forward(out);
        const auto gated = (m_perLayerErf ? torch::gelu(g) : torch::gelu(g, "tanh")) * in.perLayer;
        out = out + perLayerNorm->forward(perLayerProjection->forward(gated));
    }
    // In place, as Transformers' `hidden_states *= self.layer_scalar`: the stream keeps its dtype
    // and no second copy of it is made (add's backward does not need its output).
    if (layerScalar.defined())
        out.mul_(layerScalar);
    return out;
}

} // namespace pb
