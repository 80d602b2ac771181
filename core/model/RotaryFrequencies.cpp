// The rotary inverse frequencies with the model's rope scaling (Transformer.h's
// rotaryInverseFrequencies), as Transformers' ROPE_INIT_FUNCTIONS compute them.
#include "model/Transformer.h"

#include <cmath>

namespace pb {
namespace {

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

} // namespace pb
