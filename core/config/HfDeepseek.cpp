#include "config/HfDeepseek.h"

#include "config/HfJsonFields.h"
#include "config/JsonReader.h"
#include "util/Errors.h"

#include <algorithm>

namespace pb {
namespace {

// Keys that name an expert, a router or an MoE setting and that this import reads or knowingly
// leaves out; any other such key is refused by name (a variant read as the plain one is the wrong
// model). Left out, as Transformers' DeepseekV3 leaves them out: aux_loss_alpha and seq_aux (the
// original code's load-balancing loss; DeepseekV3ForCausalLM adds none) and ep_size (expert
// parallelism of the original code).
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

// A string key that must equal `expected` where present: the only form Transformers' DeepseekV3 runs.
void requireString(const QJsonObject &json, const std::string &where, const char *key, const char *expected, const std::string &why)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull())
        return;
    if (!v.isString() || v.toString() != QLatin1String(expected))
        throw InvalidInputError(hfField(where, key), "got " + jsonTypeName(v) + "; only \"" + expected + "\" is modelled (" + why + ")");
}

} // namespace

bool isDeepseekV3Type(const std::string &type) { return type == "deepseek_v3" || type == "kimi_k2"; }

void applyDeepseekV3(const QJsonObject &json, const std::string &where, const std::string &type, ModelShape &m)
{
    refuseUnknownMoeKeys(json, where, type);
    // kimi_k2 has no Transformers class whose defaults could stand in for an absent key.
    const bool strict = type == "kimi_k2";
    auto count = [&](const char *key, int64_t fallback) { return strict ? requiredInt(json, where, key) : optionalInt(json, where, key, fallback); };
    auto flag = [&](const char *key, bool fallback) {
        if (strict && !present(json, key))
            throw InvalidInputError(hfField(where, key), "required field is missing (" + type + " has no Transformers config class to default it)");
        return optionalBool(json, where, key, fallback);
    };
    auto number = [&](const char *key, double fallback) {
        if (strict && !present(json, key))
            throw InvalidInputError(hfField(where, key), "required field is missing (" + type + " has no Transformers config class to default it)");
        return optionalNumber(json, where, key, fallback);
    };

    // Latent attention, as DeepseekV3Attention builds it. q_lora_rank null: q_proj.
    LatentAttention &l = m.latent;
    const QJsonValue qRank = json.value(QLatin1String("q_lora_rank"));
    if (qRank.isNull())
        l.qLoraRank = 0;
    else if (qRank.isUndefined() && strict)
        throw InvalidInputError(hfField(where, "q_lora_rank"), "required field is missing (null for q_proj)");
    else
        l.qLoraRank = optionalInt(json, where, "q_lora_rank", 1536);
    l.kvLoraRank = count("kv_lora_rank", 512);
    l.qkRopeHeadDim = count("qk_rope_head_dim", 64);
    l.qkNopeHeadDim = count("qk_nope_head_dim", 128);
    l.vHeadDim = count("v_head_dim", 128);
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
    if (optionalBool(json, where, "mlp_bias", false))
        throw InvalidInputError(hfField(where, "mlp_bias"), "true is not supported (MLP biases are not modelled for experts)");

    // Routing, as DeepseekV3MoE: sigmoid scores, the correction bias for the choice only, groups.
    requireString(json, where, "scoring_func", "sigmoid", "Transformers' DeepseekV3 always scores by sigmoid");
    requireString(json, where, "topk_method", "noaux_tc", "Transformers' DeepseekV3 always picks by the biased, group-limited scores");
    if (present(json, "moe_layer_freq") && requiredInt(json, where, "moe_layer_freq") != 1)
        throw InvalidInputError(hfField(where, "moe_layer_freq"), "only 1 is modelled (Transformers' DeepseekV3 makes every layer from first_k_dense_replace on sparse)");
    MoeConfig &e = m.moe;
    if (present(json, "n_routed_experts") && present(json, "num_local_experts") &&
        requiredInt(json, where, "num_local_experts") != requiredInt(json, where, "n_routed_experts"))
        throw InvalidInputError(hfField(where, "num_local_experts"), "is another name for n_routed_experts and must equal it");
    e.experts = present(json, "n_routed_experts") || strict ? count("n_routed_experts", 256) : optionalInt(json, where, "num_local_experts", 256);
    e.expertsPerToken = count("num_experts_per_tok", 8);
    e.expertIntermediateSize = count("moe_intermediate_size", 2048);
    const int64_t shared = count("n_shared_experts", 1);
    e.sharedExpertIntermediateSize = e.expertIntermediateSize * shared;
    e.normalizeTopK = flag("norm_topk_prob", true);
    e.scoring = RouterScoring::Sigmoid;
    e.scoreCorrectionBias = true; // DeepseekV3TopkRouter always has the buffer
    e.groups = count("n_group", 8);
    e.groupsPerToken = count("topk_group", 4);
    e.routedScale = number("routed_scaling_factor", 2.5);
    e.auxLossWeight = 0; // DeepseekV3ForCausalLM adds no load-balancing loss
    if (e.experts % e.groups != 0)
        throw InvalidInputError(hfField(where, "n_group"), "must divide n_routed_experts (" + std::to_string(e.experts) + " % " + std::to_string(e.groups) + " != 0)");
    if (e.groupsPerToken > e.groups)
        throw InvalidInputError(hfField(where, "topk_group"), "must not exceed n_group (" + std::to_string(e.groupsPerToken) + " > " + std::to_string(e.groups) + ")");
    // first_k_dense_replace: layers before it keep the dense MLP (intermediate_size).
    const QJsonValue firstDense = json.value(QLatin1String("first_k_dense_replace"));
    int64_t dense = 3;
    if (firstDense.isDouble() && firstDense.toDouble() == 0)
        dense = 0;
    else
        dense = count("first_k_dense_replace", 3);
    e.denseLayers.clear();
    for (int64_t i = 0; i < std::min(dense, m.layers); ++i)
        e.denseLayers.push_back(i);
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
