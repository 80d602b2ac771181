#include "config/HfDeepseek.h"

#include "config/HfJsonFields.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "util/Errors.h"

#include <algorithm>

namespace pb {
namespace {

// Keys that name an expert, a router or an MoE setting and that this import reads or knowingly
// leaves out; any other such key is refused by name (a variant read as the plain one is the wrong
// model). The same list for glm4_moe, whose Glm4MoeConfig has the same routing keys. Left out, as
// Transformers' DeepseekV3 leaves them out: aux_loss_alpha and seq_aux (the original code's
// load-balancing loss; DeepseekV3ForCausalLM adds none) and ep_size (expert parallelism of the
// original code).
const char *const kKnownMoeKeys[] = {"n_routed_experts", "num_local_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
                                     "moe_layer_freq", "routed_scaling_factor", "first_k_dense_replace", "norm_topk_prob", "n_group", "topk_group",
                                     "scoring_func", "topk_method", "aux_loss_alpha", "seq_aux", "ep_size"};

void refuseUnknownMoeKeys(const QJsonObject &json, const std::string &where, const std::string &type)
{
    for (auto it = json.begin(); it != json.end(); ++it) {
        const QString &key = it.key();
        const bool moeSetting = key.contains(QLatin1String("expert"), Qt::CaseInsensitive) || key.contains(QLatin1String("router"), Qt::CaseInsensitive) ||
                                key.contains(QLatin1String("moe"), Qt::CaseInsensitive) || key.contains(QLatin1String("topk"), Qt::CaseInsensitive);
        if (!moeSetting || it.value().isNull() || std::any_of(std::begin(kKnownMoeKeys), std::end(kKnownMoeKeys), [&](const char *k) { return key == QLatin1String(k); }))
            continue;
        std::string list;
        for (const char *k : kKnownMoeKeys)
            list += (list.empty() ? "" : ", ") + std::string(k);
        throw InvalidInputError(where + ": " + key.toStdString(), "is a mixture-of-experts setting this import does not model (read for " + type + ": " + list + ")");
    }
}

// A string key that must equal `expected` where present: the only form Transformers runs.
void requireString(const QJsonObject &json, const std::string &where, const char *key, const char *expected, const std::string &why)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return;
    if (!v.isString() || v.toString() != QLatin1String(expected))
        throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(v) + "; only \"" + expected + "\" is modelled (" + why + ")");
}

// The keys of one config.json: absent ones take the config class's defaults, except for a type
// that has no Transformers class to default them (`strict`: kimi_k2), where each is required.
struct Keys {
    const QJsonObject &json;
    const std::string &where;
    const std::string &type;
    bool strict = false;

    void require(const char *key) const
    {
        if (strict && !present(json, key))
            throw InvalidInputError(hfField(where, key), "required field is missing (" + type + " has no Transformers config class to default it)");
    }
    int64_t count(const char *key, int64_t fallback) const { return strict ? requiredInt(json, where, key) : optionalInt(json, where, key, fallback); }
    bool flag(const char *key, bool fallback) const
    {
        require(key);
        return optionalBool(json, where, key, fallback);
    }
    double number(const char *key, double fallback) const
    {
        require(key);
        return optionalNumber(json, where, key, fallback);
    }
};

// The routing's defaults of a config class, and the class named in messages.
struct RoutingDefaults {
    const char *modelClass;
    int64_t experts, expertsPerToken, expertIntermediate, sharedExperts, groups, groupsPerToken, firstDense;
    double routedScale;
};
constexpr RoutingDefaults kDeepseekV3Routing {"DeepseekV3", 256, 8, 2048, 1, 8, 4, 3, 2.5};
constexpr RoutingDefaults kGlm4MoeRouting {"Glm4Moe", 128, 8, 1408, 1, 1, 1, 1, 1.0};

// DeepSeek-V3's mixture of experts, which Glm4MoeMoE inherits: sigmoid scores, the correction bias
// for the choice only, group-limited top-k, the routed scaling factor, shared experts, and dense
// layers before first_k_dense_replace. Sets m.moe; mlp_bias is refused. The caller has refused the
// MoE keys neither reads (refuseUnknownMoeKeys).
void applySigmoidGroupRouting(const Keys &k, const RoutingDefaults &d, ModelShape &m)
{
    const QJsonObject &json = k.json;
    const std::string &where = k.where;
    const std::string model = std::string("Transformers' ") + d.modelClass;
    if (optionalBool(json, where, "mlp_bias", false))
        throw InvalidInputError(hfField(where, "mlp_bias"), "true is not supported (MLP biases are not modelled for experts)");
    requireString(json, where, "scoring_func", "sigmoid", model + " always scores by sigmoid");
    requireString(json, where, "topk_method", "noaux_tc", model + " always picks by the biased, group-limited scores");
    if (present(json, "moe_layer_freq") && requiredInt(json, where, "moe_layer_freq") != 1)
        throw InvalidInputError(hfField(where, "moe_layer_freq"), "only 1 is modelled (" + model + " makes every layer from first_k_dense_replace on sparse)");
    MoeConfig &e = m.moe;
    if (present(json, "n_routed_experts") && present(json, "num_local_experts") &&
        requiredInt(json, where, "num_local_experts") != requiredInt(json, where, "n_routed_experts"))
        throw InvalidInputError(hfField(where, "num_local_experts"), "is another name for n_routed_experts and must equal it");
    e.experts = present(json, "n_routed_experts") || k.strict ? k.count("n_routed_experts", d.experts) : optionalInt(json, where, "num_local_experts", d.experts);
    e.expertsPerToken = k.count("num_experts_per_tok", d.expertsPerToken);
    e.expertIntermediateSize = k.count("moe_intermediate_size", d.expertIntermediate);
    const int64_t shared = k.count("n_shared_experts", d.sharedExperts);
    e.sharedExpertIntermediateSize = e.expertIntermediateSize * shared;
    e.normalizeTopK = k.flag("norm_topk_prob", true);
    e.scoring = RouterScoring::Sigmoid;
    e.scoreCorrectionBias = true; // the router always has the buffer
    e.groups = k.count("n_group", d.groups);
    e.groupsPerToken = k.count("topk_group", d.groupsPerToken);
    e.routedScale = k.number("routed_scaling_factor", d.routedScale);
    e.auxLossWeight = 0; // the ForCausalLM class adds no load-balancing loss
    if (e.experts % e.groups != 0)
        throw InvalidInputError(hfField(where, "n_group"), "must divide n_routed_experts (" + std::to_string(e.experts) + " % " + std::to_string(e.groups) + " != 0)");
    if (e.groupsPerToken > e.groups)
        throw InvalidInputError(hfField(where, "topk_group"), "must not exceed n_group (" + std::to_string(e.groupsPerToken) + " > " + std::to_string(e.groups) + ")");
    // first_k_dense_replace: layers before it keep the dense MLP (intermediate_size).
    const QJsonValue firstDense = json.value(QLatin1String("first_k_dense_replace"));
    int64_t dense = d.firstDense;
    if (firstDense.isDouble() && firstDense.toDouble() == 0)
        dense = 0;
    else
        dense = k.count("first_k_dense_replace", d.firstDense);
    e.denseLayers.clear();
    for (int64_t i = 0; i < std::min(dense, m.layers); ++i)
        e.denseLayers.push_back(i);
}

} // namespace

bool isDeepseekV3Type(const std::string &type) { return type == "deepseek_v3" || type == "kimi_k2"; }

bool isGlm4MoeType(const std::string &type) { return type == "glm4_moe"; }

void applyDeepseekV3(const QJsonObject &json, const std::string &where, const std::string &type, ModelShape &m)
{
    refuseUnknownMoeKeys(json, where, type);
    // kimi_k2 has no Transformers class whose defaults could stand in for an absent key.
    const Keys k {json, where, type, type == "kimi_k2"};
    const bool strict = k.strict;

    // Latent attention, as DeepseekV3Attention builds it. q_lora_rank null: q_proj.
    LatentAttention &l = m.latent;
    const QJsonValue qRank = json.value(QLatin1String("q_lora_rank"));
    if (qRank.isNull())
        l.qLoraRank = 0;
    else if (qRank.isUndefined() && strict)
        throw InvalidInputError(hfField(where, "q_lora_rank"), "required field is missing (null for q_proj)");
    else
        l.qLoraRank = optionalInt(json, where, "q_lora_rank", 1536);
    l.kvLoraRank = k.count("kv_lora_rank", 512);
    l.qkRopeHeadDim = k.count("qk_rope_head_dim", 64);
    l.qkNopeHeadDim = k.count("qk_nope_head_dim", 128);
    l.vHeadDim = k.count("v_head_dim", 128);
    l.ropeInterleave = optionalBool(json, where, "rope_interleave", true);
    if (l.qkRopeHeadDim % 2 != 0)
        throw InvalidInputError(hfField(where, "qk_rope_head_dim"), "must be even (rotary pairs), got " + std::to_string(l.qkRopeHeadDim));
    // DeepseekV3Config sets head_dim to the rotary part: the rotary tables are built for it.
    if (present(json, "head_dim") && requiredInt(json, where, "head_dim") != l.qkRopeHeadDim)
        throw InvalidInputError(hfField(where, "head_dim"), "must equal qk_rope_head_dim (" + std::to_string(l.qkRopeHeadDim) + ") for " + type + ", got " +
                                                                std::to_string(requiredInt(json, where, "head_dim")));
    m.headDim = l.qkRopeHeadDim;
    // Transformers writes qk_head_dim into the configs it saves; it must be the sum it stands for.
    if (present(json, "qk_head_dim") && requiredInt(json, where, "qk_head_dim") != l.qkHeadDim())
        throw InvalidInputError(hfField(where, "qk_head_dim"), "must equal qk_nope_head_dim + qk_rope_head_dim (" + std::to_string(l.qkHeadDim()) + "), got " +
                                                                   std::to_string(requiredInt(json, where, "qk_head_dim")));
    if (m.kvHeads != m.attentionHeads)
        throw InvalidInputError(hfField(where, "num_key_value_heads"), "must equal num_attention_heads (" + std::to_string(m.attentionHeads) +
                                                                           ") for latent attention, got " + std::to_string(m.kvHeads));
    // attention_bias: on q_a_proj, kv_a_proj_with_mqa and o_proj.
    m.attentionBias = m.traits.outputBias = optionalBool(json, where, "attention_bias", false);

    // Routing, as DeepseekV3MoE.
    applySigmoidGroupRouting(k, kDeepseekV3Routing, m);
}

void applyGlm4Moe(const QJsonObject &json, const std::string &where, ModelShape &m)
{
    static const std::string type = "glm4_moe";
    refuseUnknownMoeKeys(json, where, type);
    // Glm4MoeAttention is grouped-query attention; latent attention is GLM-4.7-Flash's glm4_moe_lite,
    // another model type, and Glm4MoeConfig reads none of its keys: a file that gives them is not
    // the model Transformers would build from it.
    for (const char *key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
        if (present(json, key))
            throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(json.value(QLatin1String(key))) +
                                                              "; glm4_moe has no latent attention (Glm4MoeAttention is grouped-query attention; "
                                                              "GLM-4.7-Flash's latent attention is model_type glm4_moe_lite, which is not modelled)");
    if (present(json, "quantization_config"))
        throw InvalidInputError(hfField(where, "quantization_config"), "got " + jsonTypeName(json.value(QLatin1String("quantization_config"))) +
                                                                         "; quantised checkpoints are not modelled (a bf16 or fp32 base is, e.g. GLM-4.5-Air rather than GLM-4.5-Air-FP8)");
    const QJsonValue dropout = json.value(QLatin1String("attention_dropout"));
    if (dropout.isDouble() && dropout.toDouble() != 0)
        throw InvalidInputError(hfField(where, "attention_dropout"), "got " + jsonTypeName(dropout) + "; dropout is not modelled (expected 0)");

    // Glm4MoeConfig's defaults where they differ from Llama's.
    m.kvHeads = optionalInt(json, where, "num_key_value_heads", 8);
    m.normEps = optionalNumber(json, where, "rms_norm_eps", 1e-5);
    // Glm4MoeAttention: q/k/v biases under attention_bias, none on o_proj; q_norm and k_norm
    // (RMSNorm over head_dim, before the rotary) under use_qk_norm.
    m.attentionBias = optionalBool(json, where, "attention_bias", false);
    m.traits.outputBias = false;
    m.qkNorm = optionalBool(json, where, "use_qk_norm", false) ? QkNorm::Head : QkNorm::None;
    // Glm4MoeRotaryEmbedding builds int(head_dim * partial_rotary_factor) rotary dims; GPT-NeoX's
    // apply_rotary_pos_emb turns them with rotate_half (pairs (i, i + d/2)), the rest pass. The
    // factor inside rope_parameters (as Transformers 5 saves it) wins over the top-level key;
    // Glm4MoeConfig defaults it to 0.5.
    m.traits.ropeInterleaved = false;
    double partial = optionalNumber(json, where, "partial_rotary_factor", 0.5);
    if (present(json, "partial_rotary_factor") && !(partial > 0 && partial <= 1))
        throw InvalidInputError(hfField(where, "partial_rotary_factor"), "expected a number in (0, 1], got " + jsonTypeName(json.value(QLatin1String("partial_rotary_factor"))));
    const HfRope rope = hfRope(json, where, 10000.0);
    if (rope.partialRotary > 0)
        partial = rope.partialRotary;
    m.traits.partialRotary = partial;

    // The mixture of experts, as DeepseekV3MoE (Glm4MoeMoE's base class).
    applySigmoidGroupRouting(Keys {json, where, type, false}, kGlm4MoeRouting, m);
}

std::vector<std::string> latentLoraTargets(const ModelShape &m)
{
    std::vector<std::string> t;
    if (m.latent.qLoraRank > 0)
        t = {"q_a_proj", "q_b_proj"};
    else
        t = {"q_proj"};
    t.insert(t.end(), {"kv_a_proj_with_mqa", "kv_b_proj", "o_proj"});
    return t;
}

} // namespace pb
