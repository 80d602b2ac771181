#include "config/RunConfig.h"

#include "config/ParameterTable.h"

#include <algorithm>
#include <array>
#include <utility>

namespace pb {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<E, const char *>, N> &table, const std::string &name)
{
    for (const auto &[value, text] : table)
        if (name == text)
            return value;
    return std::nullopt;
}

template <typename E, size_t N>
const char *nameOf(const std::array<std::pair<E, const char *>, N> &table, E value)
{
    for (const auto &[v, text] : table)
        if (v == value)
            return text;
    return "?";
}

constexpr std::array<std::pair<TrainMode, const char *>, 4> kTrainModes {{{TrainMode::Full, "full"}, {TrainMode::Lora, "lora"}, {TrainMode::Freeze, "freeze"}, {TrainMode::Qlora, "qlora"}}};
constexpr std::array<std::pair<OptimizerKind, const char *>, 7> kOptimizers {{{OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Adam, "adam"}, {OptimizerKind::Sgd, "sgd"}, {OptimizerKind::Adagrad, "adagrad"}, {OptimizerKind::RmsProp, "rmsprop"}, {OptimizerKind::AdamW8bit, "adamw-8bit"}, {OptimizerKind::Adafactor, "adafactor"}}};
constexpr std::array<std::pair<Precision, const char *>, 6> kPrecisions {{{Precision::Fp32, "fp32"}, {Precision::Bf16Mixed, "bf16-mixed"}, {Precision::Bf16, "bf16"}, {Precision::Fp16Mixed, "fp16-mixed"}, {Precision::Fp8Rowwise, "fp8-rowwise"}, {Precision::Fp8Tensorwise, "fp8-tensorwise"}}};
constexpr std::array<std::pair<AttentionImpl, const char *>, 4> kAttention {{{AttentionImpl::Auto, "auto"}, {AttentionImpl::Math, "math"}, {AttentionImpl::Flash, "flash"}, {AttentionImpl::MemEfficient, "mem-efficient"}}};
constexpr std::array<std::pair<NormKind, const char *>, 2> kNorms {{{NormKind::RmsNorm, "rmsnorm"}, {NormKind::LayerNorm, "layernorm"}}};
constexpr std::array<std::pair<ActivationKind, const char *>, 4> kActivations {{{ActivationKind::SwiGlu, "swiglu"}, {ActivationKind::GeGlu, "geglu"}, {ActivationKind::Gelu, "gelu"}, {ActivationKind::GeGluErf, "geglu-erf"}}};
constexpr std::array<std::pair<ScheduleKind, const char *>, 3> kSchedules {{{ScheduleKind::Constant, "constant"}, {ScheduleKind::Cosine, "cosine"}, {ScheduleKind::Linear, "linear"}}};
constexpr std::array<std::pair<DataKind, const char *>, 3> kDataKinds {{{DataKind::Synthetic, "synthetic"}, {DataKind::TokenFile, "tokens"}, {DataKind::Jsonl, "jsonl"}}};
constexpr std::array<std::pair<LengthDistribution, const char *>, 3> kLengths {{{LengthDistribution::Fixed, "fixed"}, {LengthDistribution::Uniform, "uniform"}, {LengthDistribution::FromFile, "file"}}};
constexpr std::array<std::pair<JobUnit, const char *>, 2> kJobUnits {{{JobUnit::Tokens, "tokens"}, {JobUnit::Epochs, "epochs"}}};
constexpr std::array<std::pair<KernelPath, const char *>, 2> kKernelPaths {{{KernelPath::Eager, "eager"}, {KernelPath::Fused, "fused"}}};
constexpr std::array<std::pair<RouterScoring, const char *>, 2> kRouterScorings {{{RouterScoring::Softmax, "softmax"}, {RouterScoring::Sigmoid, "sigmoid"}}};
constexpr std::array<std::pair<LinearAttentionLayout, const char *>, 2> kLinearLayouts {{{LinearAttentionLayout::QkvzBa, "qkvz_ba"}, {LinearAttentionLayout::QkvZBA, "qkv_z_b_a"}}};
constexpr std::array<std::pair<QkNorm, const char *>, 4> kQkNorms {{{QkNorm::None, "none"}, {QkNorm::Head, "head"}, {QkNorm::Full, "full"}, {QkNorm::L2, "l2"}}};
constexpr std::array<std::pair<RopeScalingType, const char *>, 5> kRopeScalings {{{RopeScalingType::None, "none"}, {RopeScalingType::Llama3, "llama3"}, {RopeScalingType::Linear, "linear"}, {RopeScalingType::Yarn, "yarn"}, {RopeScalingType::LongRope, "longrope"}}};
constexpr std::array<std::pair<NormPlacement, const char *>, 3> kNormPlacements {{{NormPlacement::Pre, "pre"}, {NormPlacement::Post, "post"}, {NormPlacement::Sandwich, "sandwich"}}};

} // namespace

const char *toString(TrainMode v) { return nameOf(kTrainModes, v); }
const char *toString(OptimizerKind v) { return nameOf(kOptimizers, v); }
const char *toString(Precision v) { return nameOf(kPrecisions, v); }
const char *toString(AttentionImpl v) { return nameOf(kAttention, v); }
const char *toString(NormKind v) { return nameOf(kNorms, v); }
const char *toString(ActivationKind v) { return nameOf(kActivations, v); }
const char *toString(ScheduleKind v) { return nameOf(kSchedules, v); }
const char *toString(DataKind v) { return nameOf(kDataKinds, v); }
const char *toString(LengthDistribution v) { return nameOf(kLengths, v); }
const char *toString(JobUnit v) { return nameOf(kJobUnits, v); }
const char *toString(RopeScalingType v) { return nameOf(kRopeScalings, v); }
const char *toString(QkNorm v) { return nameOf(kQkNorms, v); }
const char *toString(NormPlacement v) { return nameOf(kNormPlacements, v); }
const char *toString(KernelPath v) { return nameOf(kKernelPaths, v); }
const char *toString(RouterScoring v) { return nameOf(kRouterScorings, v); }
const char *toString(LinearAttentionLayout v) { return nameOf(kLinearLayouts, v); }

template <> std::optional<TrainMode> parseEnum(const std::string &n) { return lookup(kTrainModes, n); }
template <> std::optional<OptimizerKind> parseEnum(const std::string &n) { return lookup(kOptimizers, n); }
template <> std::optional<Precision> parseEnum(const std::string &n) { return lookup(kPrecisions, n); }
template <> std::optional<AttentionImpl> parseEnum(const std::string &n) { return lookup(kAttention, n); }
template <> std::optional<NormKind> parseEnum(const std::string &n) { return lookup(kNorms, n); }
template <> std::optional<ActivationKind> parseEnum(const std::string &n) { return lookup(kActivations, n); }
template <> std::optional<ScheduleKind> parseEnum(const std::string &n) { return lookup(kSchedules, n); }
template <> std::optional<DataKind> parseEnum(const std::string &n) { return lookup(kDataKinds, n); }
template <> std::optional<LengthDistribution> parseEnum(const std::string &n) { return lookup(kLengths, n); }
template <> std::optional<JobUnit> parseEnum(const std::string &n) { return lookup(kJobUnits, n); }
template <> std::optional<RopeScalingType> parseEnum(const std::string &n) { return lookup(kRopeScalings, n); }
template <> std::optional<QkNorm> parseEnum(const std::string &n) { return lookup(kQkNorms, n); }
template <> std::optional<NormPlacement> parseEnum(const std::string &n) { return lookup(kNormPlacements, n); }
template <> std::optional<KernelPath> parseEnum(const std::string &n) { return lookup(kKernelPaths, n); }
template <> std::optional<RouterScoring> parseEnum(const std::string &n) { return lookup(kRouterScorings, n); }
template <> std::optional<LinearAttentionLayout> parseEnum(const std::string &n) { return lookup(kLinearLayouts, n); }

ParamCounts countParameters(const RunConfig &config)
{
    ParamCounts counts;
    const auto table = parameterTable(config);
    int64_t routed = 0;
    for (const auto &p : table) {
        counts.total += p.numel;
        if (p.routed())
            routed += p.numel;
        if (p.trainable)
            counts.trainable += p.numel;
        if (p.isLora)
            counts.lora += p.numel;
        if (p.name == "model.embed_tokens.weight")
            counts.embedding = p.numel;
        else if (p.name == "lm_head.weight")
            counts.head = p.numel;
        else if (p.layer == 0 && !p.isLora)
            counts.perLayer += p.numel;
    }
    // Every sparse layer has all `experts` alike, so the routed share is exact in integers.
    const MoeConfig &moe = config.model.moe;
    counts.active = counts.total - routed + (moe.enabled() ? routed / moe.experts * moe.expertsPerToken : 0);
    return counts;
}

} // namespace pb
