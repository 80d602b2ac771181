#include "config/HfGptOss.h"

#include "config/HfDenseFamilies.h"
#include "config/HfJsonFields.h"
#include "config/HfRope.h"
#include "config/JsonReader.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QJsonArray>

namespace pb {
namespace {

double positiveNumber(const QJsonObject &json, const std::string &where, const char *key, double fallback)
{
    const double v = optionalNumber(json, where, key, fallback);
    if (!(v > 0))
        throw InvalidInputError(hfField(where, key), "expected a positive number, got " + jsonTypeName(json.value(QLatin1String(key))));
    return v;
}

} // namespace

ModelShape hfGptOssShape(const QJsonObject &given, const std::string &where)
{
    QJsonObject json = given;
    // The published checkpoints store the experts in MXFP4 (the rest in bf16). Training here runs on
    // bf16 experts (Transformers dequantises them too when it trains), so the memory is bf16's.
    std::string quantization;
    if (present(json, "quantization_config")) {
        const QJsonValue q = json.value(QLatin1String("quantization_config"));
        const QString method = q.toObject().value(QLatin1String("quant_method")).toString();
        if (!q.isObject() || method != QLatin1String("mxfp4"))
            throw InvalidInputError(hfField(where, "quantization_config.quant_method"),
                                    "only mxfp4 (the published gpt-oss experts, trained here as bf16) is modelled, got " +
                                        (q.isObject() ? jsonTypeName(q.toObject().value(QLatin1String("quant_method"))) : jsonTypeName(q)));
        quantization = "mxfp4";
    }
    const double dropout = optionalNumber(json, where, "attention_dropout", 0);
    if (dropout != 0)
        throw InvalidInputError(hfField(where, "attention_dropout"), "dropout is not modelled (expected 0)");

    // GptOssConfig's defaults.
    ModelShape m = hfCommonShape(json, where, "gpt_oss", {201088, 2880, 2880, 36, 64, 8, 64, 131072, 1e-5, false});
    m.checkpointQuantization = quantization;
    // GptOssAttention: attention_bias on all four projections.
    m.attentionBias = m.traits.outputBias = optionalBool(json, where, "attention_bias", true);
    m.traits.attentionSinks = true;
    // GptOssRMSNorm: the weight multiplies the fp32 value, rounded once after.
    m.traits.normScaleInFp32 = true;
    m.norm = NormKind::RmsNorm;
    // hidden_act is read by no GptOss module: the experts' activation is always the clamped SwiGLU.
    m.activation = ActivationKind::SwiGlu;

    // GptOssConfig's rotary when the config gives none: YaRN x32 over 4096 positions, not truncated.
    if (!present(json, "rope_scaling") && !present(json, "rope_parameters"))
        json.insert(QStringLiteral("rope_parameters"), QJsonObject {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                                                     {"truncate", false}, {"original_max_position_embeddings", 4096}});
    const HfRope rope = hfRope(json, where, 150000.0);
    m.ropeTheta = rope.theta;
    m.ropeScaling = rope.scaling;

    // layer_types, by default sliding on even layers and full on odd ones; sliding_window 128.
    if (!json.contains(QLatin1String("sliding_window")))
        json.insert(QStringLiteral("sliding_window"), 128);
    if (!present(json, "layer_types")) {
        QJsonArray types;
        for (int64_t i = 0; i < m.layers; ++i)
            types.append((i + 1) % 2 ? QStringLiteral("sliding_attention") : QStringLiteral("full_attention"));
        json.insert(QStringLiteral("layer_types"), types);
    }
    readLayerTypes(json, where, m);

    MoeConfig &e = m.moe;
    // attribute_map: num_experts is num_local_experts.
    if (present(json, "num_local_experts") && present(json, "num_experts") &&
        optionalInt(json, where, "num_experts", 0) != optionalInt(json, where, "num_local_experts", 0))
        throw InvalidInputError(hfField(where, "num_experts"), "is another name for num_local_experts and must equal it");
    e.experts = present(json, "num_local_experts") ? optionalInt(json, where, "num_local_experts", 128) : optionalInt(json, where, "num_experts", 128);
    if (e.experts < 1)
        throw InvalidInputError(hfField(where, present(json, "num_local_experts") ? "num_local_experts" : "num_experts"),
                                "expected at least 1 expert, got " + std::to_string(e.experts));
    e.expertsPerToken = optionalInt(json, where, "num_experts_per_tok", 4);
    if (e.expertsPerToken < 1 || e.expertsPerToken > e.experts)
        throw InvalidInputError(hfField(where, "num_experts_per_tok"), "expected 1 to num_local_experts (" + std::to_string(e.experts) + "), got " +
                                                                           std::to_string(e.expertsPerToken));
    // The published configs also carry experts_per_token (openai's own name), which Transformers
    // stores but never reads: it must at least not contradict the one it reads.
    if (present(json, "experts_per_token") && optionalInt(json, where, "experts_per_token", 0) != e.expertsPerToken)
        throw InvalidInputError(hfField(where, "experts_per_token"), "differs from num_experts_per_tok (" + std::to_string(e.expertsPerToken) +
                                                                         "), which is the one Transformers routes with");
    e.expertIntermediateSize = m.intermediateSize;
    e.routerBias = true;
    e.softmaxAfterTopK = true;
    e.normalizeTopK = false; // the softmax over the k already sums to 1
    e.stackedExperts = true;
    e.interleavedGateUp = true;
    e.expertBias = true;
    e.swigluLimit = positiveNumber(json, where, "swiglu_limit", 7.0);
    e.swigluAlpha = positiveNumber(json, where, "swiglu_alpha", 1.702);
    // output_router_logits is read but, as for every family here, the load-balancing loss is always
    // added with router_aux_loss_coef as its weight (MoeConfig::auxLossWeight).
    optionalBool(json, where, "output_router_logits", false);
    e.auxLossWeight = optionalNumber(json, where, "router_aux_loss_coef", 0.001);
    e.routerJitter = 0;
    return m;
}

} // namespace pb
