#include "config/HfDenseFamilies.h"

#include "config/HfJsonFields.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>

namespace pb {
namespace {

// A positive number; absent or null: `fallback` (0 = off for the soft-caps).
double optionalPositive(const QJsonObject &json, const std::string &where, const char *key, double fallback)
{
    const double v = optionalNumber(json, where, key, fallback);
    if (present(json, key) && !(v > 0))
        throw InvalidInputError(hfField(where, key), "expected a positive number, got " + jsonTypeName(json.value(QLatin1String(key))));
    return v;
}

// The smallest period P with full layers exactly at (layer + 1) % P == 0, or 0.
int64_t periodOf(const std::vector<bool> &full)
{
    const int64_t n = static_cast<int64_t>(full.size());
    for (int64_t p = 1; p <= n; ++p) {
        bool ok = true;
        for (int64_t i = 0; i < n && ok; ++i)
            ok = full[static_cast<size_t>(i)] == ((i + 1) % p == 0);
        if (ok)
            return p;
    }
    return 0;
}

LayerSelection selectionOf(const std::vector<bool> &picked)
{
    LayerSelection s;
    if (std::none_of(picked.begin(), picked.end(), [](bool b) { return b; }))
        return s;
    // A period survives --set model.layers=N; a list is kept only where no period describes it.
    if (const int64_t p = periodOf(picked); p > 0 && p < static_cast<int64_t>(picked.size())) {
        s.every = p;
        return s;
    }
    for (size_t i = 0; i < picked.size(); ++i)
        if (picked[i])
            s.layers.push_back(static_cast<int64_t>(i));
    return s;
}

void setPattern(ModelShape &m, int64_t window, const std::vector<bool> &full)
{
    if (std::all_of(full.begin(), full.end(), [](bool b) { return b; })) {
        m.traits.slidingWindow = 0;
        m.traits.globalLayers = {};
        return;
    }
    m.traits.slidingWindow = window;
    m.traits.globalLayers = selectionOf(full);
}

// The sliding window of a config that has one: the key's value, else the class default.
int64_t windowOf(const QJsonObject &json, const std::string &where, int64_t fallback)
{
    return optionalInt(json, where, "sliding_window", fallback);
}

void refuseKey(const QJsonObject &json, const std::string &where, const char *key, const std::string &why)
{
    if (present(json, key))
        throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(json.value(QLatin1String(key))) + "; " + why);
}

// Dropout in training changes the steps the pilot measures; published configs set it to 0.
void refuseDropout(const QJsonObject &json, const std::string &where)
{
    for (const char *key : {"attention_dropout", "resid_pdrop", "embd_pdrop", "hidden_dropout", "embedding_dropout"}) {
        const QJsonValue v = json.value(QLatin1String(key));
        if (v.isDouble() && v.toDouble() != 0)
            throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(v) + "; dropout is not modelled (expected 0)");
    }
}

void gemmaCommon(const QJsonObject &json, const std::string &where, ModelShape &m)
{
    ModelTraits &t = m.traits;
    m.headDim = optionalInt(json, where, "head_dim", 256);
    m.tieEmbeddings = optionalBool(json, where, "tie_word_embeddings", true);
    m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-6);
    t.normPlacement = NormPlacement::Sandwich;
    t.normUnitOffset = t.normScaleInFp32 = true;
    t.attentionScale = 1.0 / std::sqrt(optionalPositive(json, where, "query_pre_attn_scalar", 256));
    t.embeddingScale = std::sqrt(static_cast<double>(m.hiddenSize));
    t.embeddingScaleRounded = true;
    const bool bias = optionalBool(json, where, "attention_bias", false);
    m.attentionBias = t.outputBias = bias;
}

} // namespace

LayerSelection hfLayerSelection(const std::vector<bool> &picked) { return selectionOf(picked); }

const std::vector<std::string> &hfDenseTraitTypes()
{
    static const std::vector<std::string> types {"qwen3", "gemma2", "gemma3_text", "olmo2", "olmo3", "phi3", "glm4", "smollm3", "granite", "ministral3"};
    return types;
}

std::optional<std::vector<bool>> hfFullLayers(const QJsonObject &json, const std::string &where, int64_t layers)
{
    const QJsonValue v = json.value(QLatin1String("layer_types"));
    if (v.isUndefined() || v.isNull())
        return std::nullopt;
    if (!v.isArray())
        throw InvalidInputError(hfField(where, "layer_types"), "expected an array of full_attention / sliding_attention, got " + jsonTypeName(v));
    const QJsonArray a = v.toArray();
    if (a.size() != layers)
        throw InvalidInputError(hfField(where, "layer_types"), "has " + std::to_string(a.size()) + " entries for " + std::to_string(layers) + " layers (num_hidden_layers)");
    std::vector<bool> full;
    for (qsizetype i = 0; i < a.size(); ++i) {
        const QString type = a[i].toString();
        if (type != QLatin1String("full_attention") && type != QLatin1String("sliding_attention"))
            throw InvalidInputError(hfField(where, ("layer_types[" + std::to_string(i) + "]").c_str()),
                                    "expected full_attention or sliding_attention, got " + jsonTypeName(a[i]));
        full.push_back(type == QLatin1String("full_attention"));
    }
    return full;
}

bool readLayerTypes(const QJsonObject &json, const std::string &where, ModelShape &m)
{
    const auto read = hfFullLayers(json, where, m.layers);
    if (!read)
        return false;
    const std::vector<bool> &full = *read;
    const bool anySliding = std::any_of(full.begin(), full.end(), [](bool b) { return !b; });
    if (anySliding && !present(json, "sliding_window"))
        throw InvalidInputError(hfField(where, "sliding_window"), "required by the sliding_attention layers of layer_types");
    setPattern(m, anySliding ? windowOf(json, where, 0) : 0, full);
    return true;
}

void applyDenseFamily(const QJsonObject &json, const std::string &where, const std::string &type, ModelShape &m)
{
    ModelTraits &t = m.traits;
    refuseDropout(json, where);
    auto rope = [&](double defaultTheta, const char *localKey = nullptr, double defaultLocalTheta = 0) {
        const HfRope r = hfRope(json, where, defaultTheta, localKey, defaultLocalTheta);
        m.ropeTheta = r.theta;
        m.ropeScaling = r.scaling;
        t.localRopeTheta = r.localTheta;
        // Only Phi-3's and GLM-4's default rotary reads partial_rotary_factor; every scaled type does.
        const bool partialApplies = type == "phi3" || type == "glm4" || r.scaling.type != RopeScalingType::None;
        if (r.partialRotary > 0 && partialApplies)
            t.partialRotary = r.partialRotary;
    };
    for (const char *key : {"use_bidirectional_attention", "quantization_config"})
        if (present(json, key) && !(json.value(QLatin1String(key)).isBool() && !json.value(QLatin1String(key)).toBool()))
            throw InvalidInputError(hfField(where, key), std::string("got ") + jsonTypeName(json.value(QLatin1String(key))) + "; " +
                                    (std::string(key) == "quantization_config" ? "quantised checkpoints are not modelled (a bf16 or fp32 base is)"
                                                                               : "bidirectional attention is not modelled (a causal language model is)"));
    auto pattern = [&](int64_t window, auto isFull) {
        if (readLayerTypes(json, where, m))
            return;
        std::vector<bool> full;
        for (int64_t i = 0; i < m.layers; ++i)
            full.push_back(isFull(i));
        setPattern(m, window, full);
    };
    if (type == "qwen3") {
        // Qwen3Attention: q_norm and k_norm per head; attention_bias on all four projections.
        m.headDim = optionalInt(json, where, "head_dim", 128);
        m.qkNorm = QkNorm::Head;
        m.attentionBias = t.outputBias = optionalBool(json, where, "attention_bias", false);
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-6);
        rope(10000.0);
        const bool sliding = optionalBool(json, where, "use_sliding_window", false);
        const int64_t fromLayer = optionalInt(json, where, "max_window_layers", 28);
        pattern(sliding ? windowOf(json, where, 4096) : 0, [&](int64_t i) { return !sliding || i < fromLayer; });
    } else if (type == "gemma2") {
        gemmaCommon(json, where, m);
        rope(10000.0);
        // Gemma2Config: 50 and 30 when the keys are absent; null turns a cap off.
        t.attentionSoftcap = json.contains(QLatin1String("attn_logit_softcapping")) ? optionalPositive(json, where, "attn_logit_softcapping", 0) : 50.0;
        t.finalSoftcap = json.contains(QLatin1String("final_logit_softcapping")) ? optionalPositive(json, where, "final_logit_softcapping", 0) : 30.0;
        // Gemma2Config: even layers slide, odd layers attend to everything.
        pattern(windowOf(json, where, 4096), [](int64_t i) { return i % 2 == 1; });
    } else if (type == "gemma3_text") {
        gemmaCommon(json, where, m);
        m.qkNorm = QkNorm::Head;
        rope(1000000.0, "rope_local_base_freq", 10000.0);
        if (t.localRopeTheta == 0)
            t.localRopeTheta = 10000.0;
        // Gemma3Attention does not pass attn_logit_softcapping to the attention in Transformers 5.17:
        // read, not applied. The final soft-cap applies (Gemma3ForCausalLM).
        optionalPositive(json, where, "attn_logit_softcapping", 0);
        t.finalSoftcap = optionalPositive(json, where, "final_logit_softcapping", 0);
        // Gemma3TextConfig: five sliding layers, then one full (sliding_window_pattern 6).
        const int64_t every = optionalInt(json, where, "sliding_window_pattern", 6);
        pattern(windowOf(json, where, 4096), [every](int64_t i) { return (i + 1) % every == 0; });
    } else if (type == "olmo2" || type == "olmo3") {
        // Olmo2DecoderLayer: norms on each sub-layer's output; q_norm, k_norm over the projections.
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-5);
        m.qkNorm = QkNorm::Full;
        t.normPlacement = NormPlacement::Post;
        t.normScaleInFp32 = true;
        t.ropeFp32 = true; // Olmo2RotaryEmbedding returns fp32 tables; apply_rotary_pos_emb casts back
        m.attentionBias = t.outputBias = optionalBool(json, where, "attention_bias", false);
        rope(type == "olmo3" ? 500000.0 : 10000.0, nullptr, type == "olmo3" ? 500000.0 : 0);
        if (type == "olmo3") {
            pattern(windowOf(json, where, 4096), [](int64_t i) { return (i + 1) % 4 == 0; });
            // Olmo3Config: a scaled rotary applies to the full layers; sliding ones keep the default.
            if (t.slidingWindow > 0 && t.localRopeTheta == 0 && m.ropeScaling.type != RopeScalingType::None)
                t.localRopeTheta = m.ropeTheta;
        }
        else
            refuseKey(json, where, "clip_qkv", "clipping queries, keys and values is not modelled (expected null)");
    } else if (type == "phi3") {
        // Phi3Attention: one qkv_proj; Phi3MLP: one gate_up_proj; sliding window on every layer.
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-5);
        t.fusedQkv = t.fusedGateUp = true;
        t.partialRotary = optionalPositive(json, where, "partial_rotary_factor", 1.0);
        rope(10000.0);
        const int64_t window = windowOf(json, where, 0);
        pattern(window, [](int64_t) { return false; });
    } else if (type == "glm4") {
        // Glm4DecoderLayer: four norms; Glm4MLP: gate_up_proj; rotary on interleaved pairs of the
        // first half of each head; q/k/v biases, none on o_proj.
        m.headDim = optionalInt(json, where, "head_dim", 128);
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1.5625e-07);
        m.attentionBias = optionalBool(json, where, "attention_bias", true);
        t.normPlacement = NormPlacement::Sandwich;
        t.fusedGateUp = true;
        t.ropeInterleaved = true;
        t.partialRotary = optionalPositive(json, where, "partial_rotary_factor", 0.5);
        rope(10000.0);
    } else if (type == "smollm3") {
        // SmolLM3: no_rope_layers[i] == 0 marks a layer without rotary (every 4th by default).
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-6);
        m.tieEmbeddings = optionalBool(json, where, "tie_word_embeddings", true);
        m.attentionBias = t.outputBias = optionalBool(json, where, "attention_bias", false);
        rope(2000000.0);
        std::vector<bool> noRope;
        const QJsonValue list = json.value(QLatin1String("no_rope_layers"));
        if (list.isArray()) {
            const QJsonArray a = list.toArray();
            if (a.size() != m.layers)
                throw InvalidInputError(hfField(where, "no_rope_layers"), "has " + std::to_string(a.size()) + " entries for " + std::to_string(m.layers) + " layers");
            for (qsizetype i = 0; i < a.size(); ++i) {
                if (!a[i].isDouble() || (a[i].toDouble() != 0 && a[i].toDouble() != 1))
                    throw InvalidInputError(hfField(where, ("no_rope_layers[" + std::to_string(i) + "]").c_str()), "expected 0 (no rotary) or 1, got " + jsonTypeName(a[i]));
                noRope.push_back(a[i].toDouble() == 0);
            }
        } else if (!list.isUndefined() && !list.isNull()) {
            throw InvalidInputError(hfField(where, "no_rope_layers"), "expected an array of 0 and 1, got " + jsonTypeName(list));
        } else {
            const int64_t every = optionalInt(json, where, "no_rope_layer_interval", 4);
            for (int64_t i = 0; i < m.layers; ++i)
                noRope.push_back((i + 1) % every == 0);
        }
        t.noRopeLayers = selectionOf(noRope);
        // SmolLM3Config: with use_sliding_window, only the layers without rotary slide.
        const bool sliding = optionalBool(json, where, "use_sliding_window", false) && present(json, "sliding_window");
        pattern(sliding ? windowOf(json, where, 0) : 0, [&](int64_t i) { return !sliding || !noRope[static_cast<size_t>(i)]; });
    } else if (type == "granite") {
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-6);
        m.attentionBias = t.outputBias = optionalBool(json, where, "attention_bias", false);
        t.embeddingScale = optionalPositive(json, where, "embedding_multiplier", 1.0);
        t.residualScale = optionalPositive(json, where, "residual_multiplier", 1.0);
        t.attentionScale = optionalPositive(json, where, "attention_multiplier", 1.0);
        t.logitsDivisor = optionalPositive(json, where, "logits_scaling", 1.0);
        rope(10000.0);
    } else if (type == "ministral3") {
        // Ministral3Config: yarn (x16 from 16384) by default; Llama 4's query temperature past the
        // pre-training context; every layer slides where a window is given.
        m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-5);
        m.headDim = optionalInt(json, where, "head_dim", 128);
        QJsonObject withRope = json;
        if (!present(json, "rope_parameters") && !present(json, "rope_scaling"))
            withRope.insert(QStringLiteral("rope_parameters"), QJsonObject {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 16.0},
                                                                            {"original_max_position_embeddings", 16384}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                                                            {"mscale_all_dim", 1.0}, {"mscale", 1.0}, {"llama_4_scaling_beta", 0.1}});
        const HfRope r = hfRope(withRope, where, 1000000.0);
        m.ropeTheta = r.theta;
        m.ropeScaling = r.scaling;
        const QJsonObject ropeObject = withRope.value(QLatin1String(present(withRope, "rope_parameters") ? "rope_parameters" : "rope_scaling")).toObject();
        const QJsonValue beta = ropeObject.value(QLatin1String("llama_4_scaling_beta"));
        if (beta.isDouble() && beta.toDouble() > 0) {
            t.queryTemperatureBeta = beta.toDouble();
            t.queryTemperatureLength = m.ropeScaling.originalMaxPositions > 0 ? m.ropeScaling.originalMaxPositions : 16384;
        }
        pattern(windowOf(json, where, 0), [](int64_t) { return false; });
    }
    t.mlpBias = optionalBool(json, where, "mlp_bias", false);
    // A window that spans every position the model has is full attention (Phi-3.5's 262144 over a
    // context of 131072): no mask, and the fused kernel with shared heads.
    if (t.slidingWindow >= m.maxPositions) {
        t.slidingWindow = 0;
        t.globalLayers = {};
    }
    // Without sliding layers there is no sliding layers' rotary (Gemma 3 with pattern 1).
    if (t.slidingWindow == 0)
        t.localRopeTheta = 0;
    if (t.mlpBias && type == "phi3")
        throw InvalidInputError(hfField(where, "mlp_bias"), "Phi-3's MLP has no biases");
}

} // namespace pb
