#include "config/ModelTraitsJson.h"

#include <QJsonArray>

namespace pb {
namespace {

QJsonValue integer(int64_t v) { return static_cast<double>(v); }

QJsonObject selectionJson(const LayerSelection &s)
{
    QJsonObject o;
    if (s.every > 0)
        o.insert(QStringLiteral("every"), integer(s.every));
    if (!s.layers.empty()) {
        QJsonArray layers;
        for (int64_t l : s.layers)
            layers.append(integer(l));
        o.insert(QStringLiteral("layers"), layers);
    }
    return o;
}

void readSelection(JsonReader &r, const char *key, LayerSelection &s)
{
    if (auto o = r.object(key)) {
        o->read("every", s.every);
        o->read("layers", s.layers);
        o->finish();
    }
}

} // namespace

void writeModelTraits(const ModelTraits &t, QJsonObject &m)
{
    const ModelTraits d;
    auto put = [&m](const char *key, const QJsonValue &v) { m.insert(QLatin1String(key), v); };
    if (t.slidingWindow != d.slidingWindow)
        put("sliding_window", integer(t.slidingWindow));
    if (!t.globalLayers.empty())
        put("global_layers", selectionJson(t.globalLayers));
    if (t.lastLayerGlobal)
        put("last_layer_global", true);
    if (!t.noRopeLayers.empty())
        put("no_rope_layers", selectionJson(t.noRopeLayers));
    if (t.partialRotary != d.partialRotary)
        put("partial_rotary", t.partialRotary);
    if (t.localRopeTheta != d.localRopeTheta)
        put("local_rope_theta", t.localRopeTheta);
    if (t.ropeInterleaved)
        put("rope_interleaved", true);
    if (t.ropeFp32)
        put("rope_fp32", true);
    if (t.normPlacement != d.normPlacement)
        put("norm_placement", QString::fromLatin1(toString(t.normPlacement)));
    if (t.normUnitOffset)
        put("norm_unit_offset", true);
    if (t.normScaleInFp32)
        put("norm_scale_fp32", true);
    if (t.attentionScale != d.attentionScale)
        put("attention_scale", t.attentionScale);
    if (t.attentionSoftcap != d.attentionSoftcap)
        put("attention_softcap", t.attentionSoftcap);
    if (t.finalSoftcap != d.finalSoftcap)
        put("final_softcap", t.finalSoftcap);
    if (t.queryTemperatureBeta != d.queryTemperatureBeta || t.queryTemperatureLength != d.queryTemperatureLength) {
        put("query_temperature_beta", t.queryTemperatureBeta);
        put("query_temperature_length", integer(t.queryTemperatureLength));
    }
    if (t.queryTemperatureOffset != d.queryTemperatureOffset)
        put("query_temperature_offset", integer(t.queryTemperatureOffset));
    if (t.queryTemperatureNoRope)
        put("query_temperature_no_rope", true);
    if (t.queryTemperatureFp32)
        put("query_temperature_fp32", true);
    if (t.attentionChunk != d.attentionChunk)
        put("attention_chunk", integer(t.attentionChunk));
    if (t.outputBias)
        put("o_bias", true);
    if (t.attentionSinks)
        put("attention_sinks", true);
    if (t.attentionOutputGate)
        put("attention_output_gate", true);
    if (t.mlpBias)
        put("mlp_bias", true);
    if (t.embeddingScale != d.embeddingScale)
        put("embedding_scale", t.embeddingScale);
    if (t.embeddingScaleRounded)
        put("embedding_scale_rounded", true);
    if (t.residualScale != d.residualScale)
        put("residual_scale", t.residualScale);
    if (t.logitsDivisor != d.logitsDivisor)
        put("logits_divisor", t.logitsDivisor);
    if (t.fusedQkv)
        put("fused_qkv", true);
    if (t.fusedGateUp)
        put("fused_gate_up", true);
    if (t.globalHeadDim != d.globalHeadDim)
        put("global_head_dim", integer(t.globalHeadDim));
    if (t.globalKvHeads != d.globalKvHeads)
        put("global_kv_heads", integer(t.globalKvHeads));
    if (t.globalValuesFromKeys)
        put("global_values_from_keys", true);
    if (t.ropeProportional)
        put("rope_proportional", true);
    if (t.valueNorm)
        put("value_norm", true);
    if (t.layerScalar)
        put("layer_scalar", true);
    if (t.perLayerInput != d.perLayerInput)
        put("per_layer_input", integer(t.perLayerInput));
    if (t.perLayerVocab != d.perLayerVocab)
        put("per_layer_vocab", integer(t.perLayerVocab));
    if (t.kvSharedLayers != d.kvSharedLayers)
        put("kv_shared_layers", integer(t.kvSharedLayers));
    if (t.doubleWideMlp)
        put("double_wide_mlp", true);
}

void readModelTraits(JsonReader &r, ModelTraits &t)
{
    r.read("sliding_window", t.slidingWindow);
    readSelection(r, "global_layers", t.globalLayers);
    r.read("last_layer_global", t.lastLayerGlobal);
    readSelection(r, "no_rope_layers", t.noRopeLayers);
    r.read("partial_rotary", t.partialRotary);
    r.read("local_rope_theta", t.localRopeTheta);
    r.read("rope_interleaved", t.ropeInterleaved);
    r.read("rope_fp32", t.ropeFp32);
    r.readEnum("norm_placement", t.normPlacement);
    r.read("norm_unit_offset", t.normUnitOffset);
    r.read("norm_scale_fp32", t.normScaleInFp32);
    r.read("attention_scale", t.attentionScale);
    r.read("attention_softcap", t.attentionSoftcap);
    r.read("final_softcap", t.finalSoftcap);
    r.read("query_temperature_beta", t.queryTemperatureBeta);
    r.read("query_temperature_length", t.queryTemperatureLength);
    r.read("query_temperature_offset", t.queryTemperatureOffset);
    r.read("query_temperature_no_rope", t.queryTemperatureNoRope);
    r.read("query_temperature_fp32", t.queryTemperatureFp32);
    r.read("attention_chunk", t.attentionChunk);
    r.read("o_bias", t.outputBias);
    r.read("attention_sinks", t.attentionSinks);
    r.read("attention_output_gate", t.attentionOutputGate);
    r.read("mlp_bias", t.mlpBias);
    r.read("embedding_scale", t.embeddingScale);
    r.read("embedding_scale_rounded", t.embeddingScaleRounded);
    r.read("residual_scale", t.residualScale);
    r.read("logits_divisor", t.logitsDivisor);
    r.read("fused_qkv", t.fusedQkv);
    r.read("fused_gate_up", t.fusedGateUp);
    r.read("global_head_dim", t.globalHeadDim);
    r.read("global_kv_heads", t.globalKvHeads);
    r.read("global_values_from_keys", t.globalValuesFromKeys);
    r.read("rope_proportional", t.ropeProportional);
    r.read("value_norm", t.valueNorm);
    r.read("layer_scalar", t.layerScalar);
    r.read("per_layer_input", t.perLayerInput);
    r.read("per_layer_vocab", t.perLayerVocab);
    r.read("kv_shared_layers", t.kvSharedLayers);
    r.read("double_wide_mlp", t.doubleWideMlp);
}

ModelTraits everyModelTraitSet()
{
    ModelTraits t;
    t.slidingWindow = 4096;
    t.globalLayers = {6, {0}};
    t.lastLayerGlobal = true;
    t.noRopeLayers = {4, {0}};
    t.partialRotary = 0.5;
    t.localRopeTheta = 10000;
    t.ropeInterleaved = t.ropeFp32 = true;
    t.normPlacement = NormPlacement::Sandwich;
    t.normUnitOffset = t.normScaleInFp32 = true;
    t.attentionScale = t.attentionSoftcap = t.finalSoftcap = 1;
    t.queryTemperatureBeta = 0.1;
    t.queryTemperatureLength = 16384;
    t.queryTemperatureOffset = 1;
    t.queryTemperatureNoRope = t.queryTemperatureFp32 = true;
    t.attentionChunk = 8192;
    t.outputBias = t.mlpBias = true;
    t.attentionSinks = true;
    t.attentionOutputGate = true;
    t.embeddingScale = t.residualScale = t.logitsDivisor = 2;
    t.embeddingScaleRounded = true;
    t.fusedQkv = t.fusedGateUp = true;
    t.globalHeadDim = 512;
    t.globalKvHeads = 4;
    t.globalValuesFromKeys = t.ropeProportional = t.valueNorm = t.layerScalar = true;
    t.perLayerInput = 256;
    t.perLayerVocab = 262144;
    t.kvSharedLayers = 20;
    t.doubleWideMlp = true;
    return t;
}

} // namespace pb
