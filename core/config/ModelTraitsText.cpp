#include "config/ModelTraitsText.h"

#include <cstddef>
#include <cstdio>

namespace pb {
namespace {

std::string number(double v)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", v);
    return buffer;
}

// 79674391296 -> "79,674,391,296".
std::string grouped(int64_t n)
{
    std::string digits = std::to_string(n < 0 ? -n : n);
    for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
        digits.insert(static_cast<size_t>(i), ",");
    return (n < 0 ? "-" : "") + digits;
}

std::string ordinal(int64_t n)
{
    const int64_t tens = n % 100;
    const char *suffix = tens >= 11 && tens <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    return std::to_string(n) + suffix;
}

} // namespace

std::string describeLayerSelection(const LayerSelection &s)
{
    std::string out;
    if (s.every == 1)
        out = "every layer";
    else if (s.every > 1)
        out = "every " + ordinal(s.every) + " layer";
    if (!s.layers.empty()) {
        out += out.empty() ? (s.layers.size() == 1 ? "layer " : "layers ") : (s.layers.size() == 1 ? " and layer " : " and layers ");
        for (size_t i = 0; i < s.layers.size(); ++i)
            out += (i ? ", " : "") + std::to_string(s.layers[i]);
    }
    return out.empty() ? "none" : out;
}

std::string describeGlobalLayers(const ModelShape &m)
{
    const LayerSelection &s = m.traits.globalLayers;
    const int64_t last = m.layers - 1;
    if (!m.traits.lastLayerGlobal || last < 0 || s.contains(last))
        return describeLayerSelection(s);
    return s.empty() ? "the last layer (" + std::to_string(last) + ")" : describeLayerSelection(s) + " and the last (" + std::to_string(last) + ")";
}

std::string describeLinearLayers(const ModelShape &m)
{
    if (!m.linear.enabled())
        return {};
    const int64_t full = m.fullAttentionLayers();
    return std::to_string(m.layers - full) + " Gated DeltaNet layers of " + std::to_string(m.layers) +
           (full > 0 ? " (full attention on " + describeLayerSelection(m.linear.fullLayers) + ")" : std::string(" (no full attention)"));
}

std::string describeModelSummary(const RunConfig &config)
{
    const ModelShape &m = config.model;
    std::string layers;
    if (m.linear.enabled()) {
        layers = describeLinearLayers(m);
    } else {
        layers = std::to_string(m.layers) + " layers";
        if (m.latent.enabled())
            layers += " of multi-head latent attention";
        else if (m.traits.slidingWindow > 0)
            layers += ", " + std::to_string(m.slidingLayers()) + " with a sliding window of " + std::to_string(m.traits.slidingWindow);
        else if (m.traits.attentionChunk > 0)
            layers += ", chunked attention (" + std::to_string(m.traits.attentionChunk) + ") on those with rotary";
    }
    std::string text = m.family + ": " + layers;
    if (m.moe.enabled()) {
        const MoeConfig &e = m.moe;
        int64_t sparse = 0;
        for (int64_t i = 0; i < m.layers; ++i)
            sparse += e.sparse(i) ? 1 : 0;
        text += "; " + std::to_string(e.experts) + " experts, " + std::to_string(e.expertsPerToken) + " per token" +
                (e.sharedExpertIntermediateSize > 0 ? ", and a shared expert" : "") +
                (sparse < m.layers ? " (" + std::to_string(sparse) + " of " + std::to_string(m.layers) + " layers sparse)" : std::string());
    }
    const ParamCounts counts = countParameters(config);
    text += "; " + grouped(counts.total) + " parameters";
    if (m.moe.enabled())
        text += ", " + grouped(counts.active) + " active per token";
    if (counts.trainable < counts.total)
        text += ", " + grouped(counts.trainable) + " trainable";
    return text;
}

std::vector<std::pair<std::string, std::string>> describeModelTraits(const ModelShape &m)
{
    const ModelTraits &t = m.traits;
    const ModelTraits d;
    std::vector<std::pair<std::string, std::string>> out;
    if (t.attentionChunk > 0) {
        int64_t chunked = 0;
        for (int64_t i = 0; i < m.layers; ++i)
            chunked += t.usesChunks(i) ? 1 : 0;
        out.push_back({"attention", "chunks of " + std::to_string(t.attentionChunk) + " on " + std::to_string(chunked) + " of " + std::to_string(m.layers) +
                                        " layers (those with rotary)" + (chunked < m.layers ? "; full attention on the others" : std::string())});
    }
    if (t.slidingWindow > 0) {
        const int64_t full = m.layers - m.slidingLayers();
        out.push_back({"attention", "sliding window of " + std::to_string(t.slidingWindow) + " on " + std::to_string(m.slidingLayers()) + " of " + std::to_string(m.layers) +
                                        " layers" + (full > 0 ? "; full attention on " + describeGlobalLayers(m) : std::string())});
    }
    if (m.latent.enabled()) {
        const LatentAttention &l = m.latent;
        out.push_back({"attention", "multi-head latent: " + (l.qLoraRank > 0 ? "query latent " + std::to_string(l.qLoraRank) + ", " : std::string("no query latent, ")) +
                                        "key/value latent " + std::to_string(l.kvLoraRank) + "; q/k heads " + std::to_string(l.qkNopeHeadDim) + " + " +
                                        std::to_string(l.qkRopeHeadDim) + " rotary" + (l.ropeInterleave ? " (interleaved pairs)" : "") + ", v heads " +
                                        std::to_string(l.vHeadDim)});
    }
    if (m.linear.enabled()) {
        const LinearAttention &l = m.linear;
        const int64_t linearLayers = m.layers - m.fullAttentionLayers();
        out.push_back({"attention", std::to_string(linearLayers) + " Gated DeltaNet (linear_attn) layers of " + std::to_string(m.layers) + ": " +
                                        std::to_string(l.keyHeads) + " key heads of " + std::to_string(l.keyHeadDim) + ", " + std::to_string(l.valueHeads) +
                                        " value heads of " + std::to_string(l.valueHeadDim) + ", conv " + std::to_string(l.convKernel) + ", " +
                                        (l.layout == LinearAttentionLayout::QkvzBa ? "in_proj_qkvz + in_proj_ba" : "in_proj_qkv/z/b/a") + "; full attention on " +
                                        describeLayerSelection(l.fullLayers)});
    }
    if (m.moe.enabled() && m.moe.scoring == RouterScoring::Sigmoid) {
        const MoeConfig &e = m.moe;
        out.push_back({"routing", std::string("sigmoid scores") + (e.scoreCorrectionBias ? " + correction bias for the choice" : "") + ", top " +
                                      std::to_string(e.expertsPerToken) + (e.groups > 1 ? " within the best " + std::to_string(e.groupsPerToken) + " of " + std::to_string(e.groups) + " groups" : "") +
                                      (e.normalizeTopK ? ", renormalised" : "") + (e.routedScale != 1.0 ? ", x" + number(e.routedScale) : "") +
                                      (e.scaleExpertInput ? ", the weight scales the expert's input" : "")});
    }
    if (m.moe.enabled() && (m.moe.softmaxAfterTopK || m.moe.routerBias))
        out.push_back({"routing", std::string("top ") + std::to_string(m.moe.expertsPerToken) + " of the logits" + (m.moe.routerBias ? " (router bias)" : "") +
                                      (m.moe.softmaxAfterTopK ? ", softmax over the chosen" : "")});
    if (m.moe.enabled() && m.moe.stackedExperts) {
        const MoeConfig &e = m.moe;
        out.push_back({"experts", std::string("stacked [experts, in, out] tensors, gate/up ") + (e.interleavedGateUp ? "interleaved" : "halves") +
                                      (e.expertBias ? ", biases" : "") +
                                      (e.swigluLimit > 0 ? ", clamped SwiGLU (limit " + number(e.swigluLimit) + ", alpha " + number(e.swigluAlpha) + ", up + 1)" : "")});
    }
    if (m.layerShapesVary()) {
        std::string global = "global layers: ";
        if (t.globalHeadDim > 0)
            global += "heads of " + std::to_string(t.globalHeadDim);
        if (t.globalKvHeads > 0)
            global += std::string(t.globalHeadDim > 0 ? ", " : "") + std::to_string(t.globalKvHeads) + " key/value heads";
        if (t.globalValuesFromKeys)
            global += std::string(t.globalHeadDim > 0 || t.globalKvHeads > 0 ? ", " : "") + "values from k_proj (no v_proj)";
        out.push_back({"attention", global});
    }
    if (m.kvShared(m.layers - 1)) {
        // The layers whose keys and values the shared ones read, by kind.
        std::string sources;
        for (int64_t i = m.firstKvSharedLayer(); i < m.layers; ++i) {
            const int64_t source = m.kvSourceLayer(i);
            const std::string item = std::to_string(source) + (m.usesSliding(i) ? " (sliding)" : " (global)");
            if (source >= 0 && sources.find(item) == std::string::npos)
                sources += (sources.empty() ? "" : ", ") + item;
        }
        out.push_back({"shared k/v", "layers " + std::to_string(m.firstKvSharedLayer()) + ".." + std::to_string(m.layers - 1) +
                                         " compute no keys or values: they attend to layer " + sources + (t.doubleWideMlp ? "; their MLPs twice as wide" : "")});
    }
    if (t.perLayerInput > 0)
        out.push_back({"per-layer input", std::to_string(t.perLayerInput) + " wide per layer, from a " + std::to_string(m.perLayerVocabSize()) +
                                              "-row table plus a projection of the embedded tokens; gated and added after each MLP"});
    std::string rotary;
    if (t.ropeProportional) {
        const int64_t globalDim = t.globalHeadDim > 0 ? t.globalHeadDim : m.effectiveHeadDim();
        rotary += "proportional on global layers (" + std::to_string(static_cast<int64_t>(t.partialRotary * static_cast<double>(globalDim) / 2)) + " of " +
                  std::to_string(globalDim / 2) + " frequency pairs turning), whole heads on sliding ones";
    } else if (t.partialRotary != 1.0)
        rotary += "partial (" + std::to_string(m.rotaryDim()) + " of " + std::to_string(m.effectiveHeadDim()) + " dimensions)";
    if (t.ropeInterleaved)
        rotary += std::string(rotary.empty() ? "" : ", ") + "interleaved pairs";
    if (t.ropeFp32)
        rotary += std::string(rotary.empty() ? "" : ", ") + "turned in fp32";
    if (m.ropeScaling.type != RopeScalingType::None)
        rotary += std::string(rotary.empty() ? "" : ", ") + toString(m.ropeScaling.type) + " scaling x" + number(m.ropeScaling.factor);
    if (t.localRopeTheta > 0)
        rotary += std::string(rotary.empty() ? "" : ", ") + "base " + number(m.ropeTheta) + " on full layers, " + number(t.localRopeTheta) + " unscaled on sliding ones";
    if (!t.noRopeLayers.empty())
        rotary += std::string(rotary.empty() ? "" : ", ") + "none on " + describeLayerSelection(t.noRopeLayers);
    if (!rotary.empty())
        out.push_back({"rotary", rotary});
    if (t.normPlacement != d.normPlacement || t.normUnitOffset || t.normScaleInFp32) {
        std::string norms = t.normPlacement == NormPlacement::Post       ? "post-norm (on each sub-layer's output)"
                            : t.normPlacement == NormPlacement::Sandwich ? "sandwich (four per layer)"
                                                                         : "pre-norm";
        if (t.normUnitOffset)
            norms += ", scaled by 1 + weight";
        if (t.normScaleInFp32)
            norms += ", scaled in fp32";
        out.push_back({"norms", norms});
    }
    std::string attention;
    if (t.attentionScale > 0)
        attention += "scale " + number(t.attentionScale);
    if (t.attentionSoftcap > 0)
        attention += std::string(attention.empty() ? "" : ", ") + "logits soft-capped at " + number(t.attentionSoftcap);
    if (t.queryTemperatureBeta > 0)
        attention += std::string(attention.empty() ? "" : ", ") + "query temperature 1 + " + number(t.queryTemperatureBeta) + " ln(1 + floor " +
                     (t.queryTemperatureOffset != 0 ? "(pos + " + std::to_string(t.queryTemperatureOffset) + ")" : std::string("pos")) + " / " +
                     std::to_string(t.queryTemperatureLength) + ")" + (t.queryTemperatureNoRope ? " on layers without rotary" : "") +
                     (t.queryTemperatureFp32 ? ", multiplied in fp32" : "");
    if (t.outputBias)
        attention += std::string(attention.empty() ? "" : ", ") + "o_proj bias";
    if (t.attentionSinks)
        attention += std::string(attention.empty() ? "" : ", ") + "a learned sink logit per head";
    if (t.attentionOutputGate)
        attention += std::string(attention.empty() ? "" : ", ") + "output gated by sigmoid(gate) from q_proj";
    if (t.fusedQkv)
        attention += std::string(attention.empty() ? "" : ", ") + "fused qkv_proj";
    if (t.valueNorm)
        attention += std::string(attention.empty() ? "" : ", ") + "values RMS-normalised per head (no weight)";
    if (!attention.empty())
        out.push_back({"attn details", attention});
    std::string mlp;
    if (t.fusedGateUp)
        mlp += "fused gate_up_proj";
    if (t.mlpBias)
        mlp += std::string(mlp.empty() ? "" : ", ") + "biases";
    if (!mlp.empty())
        out.push_back({"MLP", std::string(toString(m.activation)) + ", " + mlp});
    std::string scales;
    if (t.embeddingScale != 1.0)
        scales += "embeddings x" + number(t.embeddingScale) + (t.embeddingScaleRounded ? " (rounded to their dtype)" : "");
    if (t.residualScale != 1.0)
        scales += std::string(scales.empty() ? "" : ", ") + "residual branches x" + number(t.residualScale);
    if (t.logitsDivisor != 1.0)
        scales += std::string(scales.empty() ? "" : ", ") + "logits / " + number(t.logitsDivisor);
    if (t.finalSoftcap > 0)
        scales += std::string(scales.empty() ? "" : ", ") + "logits soft-capped at " + number(t.finalSoftcap);
    if (t.layerScalar)
        scales += std::string(scales.empty() ? "" : ", ") + "each layer's output x its layer_scalar (a checkpoint buffer)";
    if (!scales.empty())
        out.push_back({"scales", scales});
    return out;
}

} // namespace pb
