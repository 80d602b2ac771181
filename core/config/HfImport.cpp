#include "config/HfImport.h"

#include "config/HfHubCache.h"
#include "config/HfJsonFields.h"
#include "config/HfDeepseek.h"
#include "config/HfDenseFamilies.h"
#include "config/HfGptOss.h"
#include "config/HfGemma4.h"
#include "config/HfLlama4.h"
#include "config/HfQwenHybrid.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "config/JsonText.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>

namespace pb {
namespace {

ActivationKind activationOf(const QJsonObject &json, const std::string &where)
{
    // Gemma's config classes name it hidden_activation (gelu_pytorch_tanh by default).
    const bool gemma = json.value(QLatin1String("model_type")).toString().startsWith(QLatin1String("gemma"));
    const QJsonValue v = !gemma                             ? json.value(QLatin1String("hidden_act"))
                         : present(json, "hidden_activation") ? json.value(QLatin1String("hidden_activation"))
                                                              : QJsonValue(QStringLiteral("gelu_pytorch_tanh"));
    const QString act = v.isString() ? v.toString() : QStringLiteral("silu");
    if (!v.isUndefined() && !v.isNull() && !v.isString())
        throw InvalidInputError(hfField(where, "hidden_act"), "expected a string, got " + jsonTypeName(v));
    // These families' MLPs are gated (gate_proj * act(up_proj)), so the activation names the gate.
    if (act == QLatin1String("silu") || act == QLatin1String("swish"))
        return ActivationKind::SwiGlu;
    // Transformers' "gelu" is the exact (erf) GELU; gelu_new and gelu_pytorch_tanh the tanh form.
    if (act == QLatin1String("gelu"))
        return ActivationKind::GeGluErf;
    if (act == QLatin1String("gelu_new") || act == QLatin1String("gelu_pytorch_tanh"))
        return ActivationKind::GeGlu;
    throw InvalidInputError(hfField(where, "hidden_act"), "unsupported activation '" + act.toStdString() + "' (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)");
}

// The Transformers model types whose MLP is a sparse mixture of experts.
bool isMoeType(const std::string &type) { return type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" || type == "olmoe"; }

// The keys of a mixture-of-experts config.json that this import reads, or knowingly leaves out, per
// type. Any other key that names an expert, router or MoE setting is refused by name: a routing
// variant (shared experts, expert biases, capacity factors) read as the plain one would give the
// wrong model. output_router_logits is left out: in Transformers it also decides whether the
// load-balancing loss joins the training loss (false in the published configs); here the loss is
// always added with router_aux_loss_coef as its weight, as MoeConfig::auxLossWeight defines.
const std::vector<const char *> &moeKeys(const std::string &type)
{
    static const std::vector<const char *> mixtral {"num_local_experts", "num_experts", "num_experts_per_tok", "router_aux_loss_coef", "router_jitter_noise", "output_router_logits"};
    static const std::vector<const char *> qwen2Moe {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size", "router_aux_loss_coef", "output_router_logits"};
    static const std::vector<const char *> qwen3Moe {"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "router_aux_loss_coef", "output_router_logits"};
    // A router z-loss weight (router_z_loss_coef), which OLMoE checkpoints may carry from their
    // training setup, is accepted but not added to the training loss: Transformers' OlmoeConfig does
    // not read it and OlmoeForCausalLM does not add it either.
    static const std::vector<const char *> olmoe {"num_experts", "num_local_experts", "num_experts_per_tok", "router_aux_loss_coef", "router_z_loss_coef", "output_router_logits"};
    return type == "mixtral" ? mixtral : type == "qwen2_moe" ? qwen2Moe : type == "qwen3_moe" ? qwen3Moe : olmoe;
}

void refuseUnmodelledMoeKeys(const QJsonObject &json, const std::string &where, const std::string &type)
{
    const auto &known = moeKeys(type);
    for (auto it = json.begin(); it != json.end(); ++it) {
        const QString &key = it.key();
        const bool moeSetting = key.contains(QLatin1String("expert"), Qt::CaseInsensitive) || key.contains(QLatin1String("router"), Qt::CaseInsensitive) ||
                                key.contains(QLatin1String("moe"), Qt::CaseInsensitive);
        // null sets nothing, as an absent key.
        if (!moeSetting || it.value().isNull() || std::any_of(known.begin(), known.end(), [&](const char *k) { return key == QLatin1String(k); }))
            continue;
        std::string list;
        for (const char *k : known)
            list += (list.empty() ? "" : ", ") + std::string(k);
        throw InvalidInputError(where + ": " + key.toStdString(), "is a mixture-of-experts setting this import does not model (read for " + type + ": " + list + ")");
    }
}

// A dense type with experts is a config.json this import would misread as a dense model.
void refuseExperts(const QJsonObject &json, const std::string &where, const std::string &type)
{
    for (const char *key : {"num_local_experts", "num_experts"}) {
        const QJsonValue v = json.value(QLatin1String(key));
        if (v.isUndefined() || v.isNull() || (v.isDouble() && v.toDouble() == 0))
            continue;
        throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(v) + ", but model_type '" + type +
                                "' is a dense model without experts (mixture-of-experts types: mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v3, kimi_k2, glm4_moe, llama4, gpt_oss, qwen3_next, qwen3_5_moe)");
    }
}

// The number of experts under `key`, or under `alias`, which the type's Transformers config maps
// onto the same attribute (its attribute_map); both given must agree.
int64_t expertCount(const QJsonObject &json, const std::string &where, const char *key, const char *alias)
{
    if (!present(json, key) && present(json, alias))
        return requiredInt(json, where, alias);
    const int64_t n = requiredInt(json, where, key);
    if (present(json, alias) && requiredInt(json, where, alias) != n)
        throw InvalidInputError(hfField(where, alias), std::string("is another name for ") + key + " and must equal it (" + std::to_string(requiredInt(json, where, alias)) +
                                " != " + std::to_string(n) + ")");
    return n;
}

// Qwen-MoE's mlp_only_layers: the indices of the layers kept dense.
std::vector<int64_t> layerList(const QJsonObject &json, const std::string &where, const char *key, int64_t layers)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return {};
    if (!v.isArray())
        throw InvalidInputError(hfField(where, key), "expected an array of layer indices, got " + jsonTypeName(v));
    std::vector<int64_t> list;
    const QJsonArray array = v.toArray();
    for (qsizetype i = 0; i < array.size(); ++i) {
        const QJsonValue e = array.at(i);
        const double d = e.toDouble(-1);
        const std::string name = std::string(key) + "[" + std::to_string(i) + "]";
        if (!e.isDouble() || std::floor(d) != d || d < 0 || d >= static_cast<double>(layers))
            throw InvalidInputError(hfField(where, name.c_str()), "expected a layer index from 0 to " + std::to_string(layers - 1) + " (num_hidden_layers - 1), got " + jsonTypeName(e));
        list.push_back(static_cast<int64_t>(d));
    }
    return list;
}

// The experts of a mixture-of-experts type. Absent optional keys take the defaults of the type's
// Transformers config class (MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, OlmoeConfig).
MoeConfig moeOf(const QJsonObject &json, const std::string &where, const std::string &type, const ModelShape &m)
{
    MoeConfig e;
    e.expertsPerToken = requiredInt(json, where, "num_experts_per_tok");
    if (type == "mixtral") {
        // Mixtral's intermediate_size is each expert's; every layer is sparse, and the top-2
        // weights are always renormalised to sum to 1 (there is no norm_topk_prob switch).
        e.experts = expertCount(json, where, "num_local_experts", "num_experts");
        e.expertIntermediateSize = m.intermediateSize;
        e.normalizeTopK = true;
        e.auxLossWeight = optionalNumber(json, where, "router_aux_loss_coef", 0.001);
        e.routerJitter = optionalNumber(json, where, "router_jitter_noise", 0.0);
    } else if (type == "olmoe") {
        // Likewise intermediate_size is each expert's, and every layer is sparse.
        e.experts = expertCount(json, where, "num_experts", "num_local_experts");
        e.expertIntermediateSize = m.intermediateSize;
        e.normalizeTopK = optionalBool(json, where, "norm_topk_prob", false);
        e.auxLossWeight = optionalNumber(json, where, "router_aux_loss_coef", 0.01);
    } else {
        // Qwen2-MoE, Qwen3-MoE: intermediate_size is the dense MLP of the layers decoder_sparse_step
        // and mlp_only_layers keep dense; moe_intermediate_size the experts'.
        e.experts = type == "qwen3_moe" ? expertCount(json, where, "num_experts", "num_local_experts") : requiredInt(json, where, "num_experts");
        e.expertIntermediateSize = requiredInt(json, where, "moe_intermediate_size");
        e.normalizeTopK = optionalBool(json, where, "norm_topk_prob", false);
        e.sparseStep = optionalInt(json, where, "decoder_sparse_step", 1);
        e.denseLayers = layerList(json, where, "mlp_only_layers", m.layers);
        e.auxLossWeight = optionalNumber(json, where, "router_aux_loss_coef", 0.001);
        if (type == "qwen2_moe") {
            // Qwen2-MoE's shared expert always has its sigmoid gate (shared_expert_gate).
            e.sharedExpertIntermediateSize = requiredInt(json, where, "shared_expert_intermediate_size");
            e.sharedExpertGate = true;
        }
    }
    return e;
}

// Sliding-window attention and q/k/v clipping change what attention computes and are not modelled:
// a config.json that turns them on is refused rather than trained as full attention.
void refuseUnmodelledAttention(const QJsonObject &json, const std::string &where, const std::string &type, const ModelShape &m)
{
    if (type == "mixtral") {
        // A window that spans every position the model has is full attention.
        const QJsonValue v = json.value(QLatin1String("sliding_window"));
        if (!v.isUndefined() && !v.isNull() && !(v.isDouble() && v.toDouble() >= static_cast<double>(m.maxPositions)))
            throw InvalidInputError(hfField(where, "sliding_window"), "got " + jsonTypeName(v) + "; sliding-window attention is not modelled (expected null, or at least max_position_embeddings = " +
                                    std::to_string(m.maxPositions) + ")");
    } else if (type == "qwen2_moe" || type == "qwen3_moe") {
        if (optionalBool(json, where, "use_sliding_window", false))
            throw InvalidInputError(hfField(where, "use_sliding_window"), "true is not supported (sliding-window attention is not modelled)");
    } else if (type == "olmoe") {
        if (present(json, "clip_qkv"))
            throw InvalidInputError(hfField(where, "clip_qkv"), "got " + jsonTypeName(json.value(QLatin1String("clip_qkv"))) +
                                    "; clipping queries, keys and values is not modelled (expected null)");
    }
}

QJsonObject readConfigJson(const QString &file)
{
    // A config.json is a few KiB; 16 MiB refuses /dev/zero and FIFOs without a hang.
    QJsonParseError error;
    const QByteArray text = readRegularFile(file, 16 * 1024 * 1024);
    const QJsonDocument doc = QJsonDocument::fromJson(text, &error);
    if (error.error == QJsonParseError::NoError)
        checkJsonText(text, file.toStdString());
    if (error.error != QJsonParseError::NoError)
        throw InvalidInputError(file.toStdString(), "not valid JSON at offset " + std::to_string(error.offset) + ": " + error.errorString().toStdString());
    if (!doc.isObject())
        throw InvalidInputError(file.toStdString(), "expected a JSON object at the top level");
    return doc.object();
}

} // namespace

const std::vector<std::string> &hfSupportedModelTypes()
{
    static const std::vector<std::string> types = [] {
        std::vector<std::string> t {"llama", "mistral", "qwen2"};
        for (const auto &dense : hfDenseTraitTypes())
            t.push_back(dense);
        // Multimodal configs whose text model is piloted (text_config; the vision tower is not),
        // then the mixtures of experts.
        for (const char *type : {"gemma3", "gemma4", "gemma4_text", "mistral3", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3", "kimi_k2", "glm4_moe", "llama4", "llama4_text", "gpt_oss",
                                 "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})
            t.emplace_back(type);
        return t;
    }();
    return types;
}

ModelShape hfModelShape(const QJsonObject &json, const std::string &where)
{
    const QJsonValue typeValue = json.value(QLatin1String("model_type"));
    if (!typeValue.isString())
        throw InvalidInputError(hfField(where, "model_type"), typeValue.isUndefined() ? "required field is missing" : "expected a string, got " + jsonTypeName(typeValue));
    const std::string type = typeValue.toString().toStdString();
    if (type == "gemma4_text") // its own keys and defaults: config/HfGemma4.cpp
        return hfGemma4TextShape(json, where);
    if (type == "gemma4") {
        // The text model of the multimodal config; its vision and audio towers are not piloted.
        const QJsonValue text = json.value(QLatin1String("text_config"));
        if (!text.isObject())
            throw InvalidInputError(hfField(where, "text_config"), text.isUndefined() ? "required field is missing (the text model of a gemma4 config)"
                                                                                       : "expected an object, got " + jsonTypeName(text));
        QJsonObject inner = text.toObject();
        const QJsonValue innerType = inner.value(QLatin1String("model_type"));
        if (!innerType.isUndefined() && innerType.toString() != QLatin1String("gemma4_text"))
            throw InvalidInputError(hfField(where, "text_config.model_type"), "expected gemma4_text (the text model of a gemma4 config), got " + jsonTypeName(innerType));
        if (!inner.contains(QLatin1String("tie_word_embeddings")) && json.contains(QLatin1String("tie_word_embeddings")))
            inner.insert(QStringLiteral("tie_word_embeddings"), json.value(QLatin1String("tie_word_embeddings")));
        return hfGemma4TextShape(inner, where + " text_config");
    }
    const auto &types = hfSupportedModelTypes();
    if (std::find(types.begin(), types.end(), type) == types.end()) {
        std::string list;
        for (const auto &t : types)
            list += (list.empty() ? "" : ", ") + t;
        throw InvalidInputError(hfField(where, "model_type"), "unsupported model type '" + type + "' (supported: " + list + ")");
    }
    const bool qwenMultimodal = type == "qwen3_5" || type == "qwen3_5_moe";
    if (type == "gemma3" || type == "mistral3" || type == "llama4" || qwenMultimodal) {
        // The text model of a multimodal config; its vision tower and projector are not piloted.
        const QJsonValue text = json.value(QLatin1String("text_config"));
        if (!text.isObject())
            throw InvalidInputError(hfField(where, "text_config"), text.isUndefined() ? "required field is missing (the text model of a " + type + " config)"
                                                                                       : "expected an object, got " + jsonTypeName(text));
        QJsonObject inner = text.toObject();
        if (!inner.contains(QLatin1String("model_type")))
            inner.insert(QStringLiteral("model_type"), type == "gemma3"        ? QStringLiteral("gemma3_text")
                                                       : type == "llama4"      ? QStringLiteral("llama4_text")
                                                       : type == "qwen3_5"     ? QStringLiteral("qwen3_5_text")
                                                       : type == "qwen3_5_moe" ? QStringLiteral("qwen3_5_moe_text")
                                                                               : QStringLiteral("mistral"));
        if (inner.value(QLatin1String("model_type")).toString() == QString::fromStdString(type))
            throw InvalidInputError(hfField(where, "text_config.model_type"), "names the multimodal type itself");
        // Keys the text config leaves to its parent (tied embeddings) are read from it; the sizes it
        // leaves out take its config class's defaults (Gemma3TextConfig, Ministral3Config), as
        // Transformers builds the text model (the published gemma-3-4b text_config omits several).
        if (!inner.contains(QLatin1String("tie_word_embeddings")) && json.contains(QLatin1String("tie_word_embeddings")))
            inner.insert(QStringLiteral("tie_word_embeddings"), json.value(QLatin1String("tie_word_embeddings")));
        const QString innerType = inner.value(QLatin1String("model_type")).toString();
        // Qwen3.5's text model is its own config class: a text_config of another type would be read
        // with the wrong defaults and the wrong linear-attention layout.
        if (qwenMultimodal && innerType.toStdString() != type + "_text")
            throw InvalidInputError(hfField(where, "text_config.model_type"), "expected " + type + "_text (the text model of a " + type + " config), got '" +
                                    innerType.toStdString() + "'");
        const QJsonObject defaults = innerType == QLatin1String("gemma3_text")
                                         ? QJsonObject {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                                                        {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256}, {"max_position_embeddings", 131072}}
                                     : innerType == QLatin1String("ministral3")
                                         ? QJsonObject {{"vocab_size", 131072}, {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 34},
                                                        {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 128}, {"max_position_embeddings", 262144}}
                                         : QJsonObject {};
        for (auto it = defaults.begin(); it != defaults.end(); ++it)
            if (!inner.contains(it.key()))
                inner.insert(it.key(), it.value());
        ModelShape m = hfModelShape(inner, where + " text_config");
        // Gemma3ForConditionalGeneration never soft-caps its final logits.
        if (type == "gemma3")
            m.traits.finalSoftcap = 0;
        return m;
    }
    if (type == "llama4_text") // its own keys and defaults: config/HfLlama4.cpp
        return hfLlama4TextShape(json, where);
    if (type == "gpt_oss") // likewise: config/HfGptOss.cpp
        return hfGptOssShape(json, where);
    if (isQwenHybridType(type)) // likewise: config/HfQwenHybrid.cpp
        return hfQwenHybridShape(json, where);
    const bool moe = isMoeType(type);
    const bool traitFamily = std::find(hfDenseTraitTypes().begin(), hfDenseTraitTypes().end(), type) != hfDenseTraitTypes().end();
    const bool deepseek = isDeepseekV3Type(type); // its own keys: config/HfDeepseek.cpp
    const bool glm4Moe = isGlm4MoeType(type);     // likewise
    if (moe)
        refuseUnmodelledMoeKeys(json, where, type);
    else if (!deepseek && !glm4Moe)
        refuseExperts(json, where, type);

    ModelShape m;
    m.family = type;
    m.preset = "hf-import";
    m.hiddenSize = requiredInt(json, where, "hidden_size");
    m.layers = requiredInt(json, where, "num_hidden_layers");
    if (m.layers > kMaxModelLayers) // before any per-layer list is built from it
        throw InvalidInputError(hfField(where, "num_hidden_layers"), "at most " + std::to_string(kMaxModelLayers) + " layers are supported, got " + std::to_string(m.layers));
    m.attentionHeads = requiredInt(json, where, "num_attention_heads");
    // Mixtral's, Qwen2-MoE's and Qwen3-MoE's config classes default the key/value heads to a fixed
    // count (8, 16, 4), not to the attention heads: required there rather than guessed.
    if (type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe")
        m.kvHeads = requiredInt(json, where, "num_key_value_heads");
    else
        m.kvHeads = optionalInt(json, where, "num_key_value_heads", m.attentionHeads);
    m.intermediateSize = requiredInt(json, where, "intermediate_size");
    m.vocabSize = requiredInt(json, where, "vocab_size");
    m.maxPositions = requiredInt(json, where, "max_position_embeddings");
    m.headDim = optionalInt(json, where, "head_dim", 0);
    m.tieEmbeddings = optionalBool(json, where, "tie_word_embeddings", false);
    const HfRope rope = hfRope(json, where, type == "mixtral" ? 1e6 : 10000.0);
    m.ropeTheta = rope.theta;
    m.ropeScaling = rope.scaling;
    m.normEps = optionalNumber(json, where, "rms_norm_eps", type == "mixtral" || type == "olmoe" ? 1e-5 : 1e-6);
    m.activation = activationOf(json, where);
    m.norm = NormKind::RmsNorm;
    if (traitFamily) {
        applyDenseFamily(json, where, type, m);
        return m;
    }
    if (deepseek) {
        applyDeepseekV3(json, where, type, m);
        return m;
    }
    if (glm4Moe) {
        applyGlm4Moe(json, where, m);
        return m;
    }
    if (type == "qwen2") {
        // Qwen2 always has q/k/v biases and no o_proj bias; its config has no switch for them.
        m.attentionBias = true;
    } else if (type == "qwen2_moe") {
        // Likewise Qwen2-MoE, whose newer config class names the switch qkv_bias.
        m.attentionBias = optionalBool(json, where, "qkv_bias", true);
    } else if (!moe) {
        // LlamaAttention's attention_bias puts a bias on all four projections, o_proj's included.
        m.attentionBias = m.traits.outputBias = optionalBool(json, where, "attention_bias", false);
    } else if (optionalBool(json, where, "attention_bias", false)) {
        throw InvalidInputError(hfField(where, "attention_bias"), "true is not supported for " + type + " (attention biases of expert models are not modelled)");
    }
    if (moe && optionalBool(json, where, "mlp_bias", false))
        throw InvalidInputError(hfField(where, "mlp_bias"), "true is not supported (MLP biases are not modelled for experts)");
    m.traits.mlpBias = !moe && optionalBool(json, where, "mlp_bias", false);
    if (type == "mistral" && present(json, "sliding_window")) {
        // MistralAttention: every layer slides when the config gives a window shorter than the context.
        const int64_t window = requiredInt(json, where, "sliding_window");
        if (window < m.maxPositions)
            m.traits.slidingWindow = window;
    }
    if (moe) {
        refuseUnmodelledAttention(json, where, type, m);
        // RMSNorm of the queries and keys before RoPE: per head (Qwen3), over the projection (OLMoE).
        m.qkNorm = type == "qwen3_moe" ? QkNorm::Head : type == "olmoe" ? QkNorm::Full : QkNorm::None;
        m.moe = moeOf(json, where, type, m);
    }
    return m;
}

std::string hfRevision(const QString &folder, const QJsonObject &json)
{
    // Through the file rule: a FIFO or a link to /dev/zero named "revision" must not hang the import.
    const QString revisionPath = QDir(folder).filePath(QStringLiteral("revision"));
    if (QFileInfo(revisionPath).exists() || QFileInfo(revisionPath).isSymLink()) {
        const QString first = QString::fromUtf8(readRegularFile(revisionPath, 4096)).section(QLatin1Char('\n'), 0, 0).trimmed();
        if (!first.isEmpty())
            return first.toStdString();
    }
    const QJsonValue commit = json.value(QLatin1String("_commit_hash"));
    if (commit.isString() && !commit.toString().isEmpty())
        return commit.toString().toStdString();
    // The Hugging Face cache keeps each revision in models--ORG--NAME/snapshots/<commit hash>/.
    const QFileInfo info(QDir::cleanPath(QFileInfo(folder).absoluteFilePath()));
    static const QRegularExpression hash(QStringLiteral("^[0-9a-f]{40}$"));
    if (info.dir().dirName() == QLatin1String("snapshots") && hash.match(info.fileName()).hasMatch())
        return info.fileName().toStdString();
    return "";
}

RunConfig hfRunConfig(const QJsonObject &json, const std::string &where)
{
    RunConfig c;
    c.model = hfModelShape(json, where);
    // Training defaults stay RunConfig's, except a sequence the model cannot hold.
    c.train.seqLen = std::min(c.train.seqLen, c.model.maxPositions);
    // Llama's default LoRA targets (q/k/v/o_proj) name nothing in latent attention.
    if (c.model.latent.enabled())
        c.train.lora.targets = latentLoraTargets(c.model);
    // Phi-3's attention is one qkv_proj: the default targets are the attention's projections by its names.
    else if (c.model.traits.fusedQkv)
        c.train.lora.targets = {"qkv_proj", "o_proj"};
    const auto issues = validateRunConfig(c);
    if (!issues.empty())
        throw InvalidInputError(where + " -> " + issues.front().field, issues.front().message);
    return c;
}

RunConfig importHfConfig(const QString &path)
{
    const QFileInfo info(path);
    if (!info.exists()) {
        if (const auto repo = parseHfRepoId(path)) {
            const HfCachedSnapshot snapshot = findHfCachedSnapshot(*repo);
            RunConfig c = importHfConfig(snapshot.folder);
            c.model.revision = snapshot.commit;
            return c;
        }
        throw InvalidInputError(path.toStdString(), "no such file or folder (expected a model folder with config.json, or a Hugging Face repository id OWNER/NAME[@REVISION] in the local cache)");
    }
    const QString folder = info.isDir() ? info.absoluteFilePath() : info.absolutePath();
    const QString file = info.isDir() ? QDir(folder).filePath(QStringLiteral("config.json")) : info.absoluteFilePath();
    if (!QFileInfo::exists(file))
        throw InvalidInputError(path.toStdString(), "no config.json in this folder");
    const QJsonObject json = readConfigJson(file);

    RunConfig c = hfRunConfig(json, file.toStdString());
    c.model.revision = hfRevision(folder, json);
    if (!QDir(folder).entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
        c.model.weightsPath = folder.toStdString();
    const QJsonValue nameOrPath = json.value(QLatin1String("_name_or_path"));
    c.name = QFileInfo(folder).fileName().toStdString();
    const QDir snapshots = QFileInfo(folder).dir();
    const QString repoDir = QFileInfo(snapshots.absolutePath()).absoluteDir().dirName();
    if (nameOrPath.isString() && !nameOrPath.toString().isEmpty())
        c.name = nameOrPath.toString().toStdString();
    else if (snapshots.dirName() == QLatin1String("snapshots") && repoDir.startsWith(QLatin1String("models--")))
        c.name = repoDir.mid(8).replace(QStringLiteral("--"), QStringLiteral("/")).toStdString();
    return c;
}

} // namespace pb
