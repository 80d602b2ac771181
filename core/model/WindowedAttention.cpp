#include "model/WindowedAttention.h"

#include "engine/TorchCompat.h"

#include <optional>
#include <type_traits>

#ifdef PB_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pb {

namespace {

#if PB_TORCH_AT_LEAST(2, 5)
// Whether this LibTorch's flash entry points take the window as called below: detected rather than
// assumed from the version, so a release that changes them leaves sliding layers on SDPA's mask
// (and engine_tst_windowed_attention skipping on a card) instead of failing the build.
template <typename T, typename = void> struct HasFlashWindow : std::false_type {};
template <typename T>
struct HasFlashWindow<
    T, std::void_t<decltype(at::_flash_attention_forward(std::declval<const T &>(), std::declval<const T &>(), std::declval<const T &>(), std::nullopt, std::nullopt,
                                                         int64_t(), int64_t(), 0.0, true, false, std::optional<double>(1.0), std::optional<int64_t>(0),
                                                         std::optional<int64_t>(0))),
                   decltype(at::_flash_attention_backward(std::declval<const T &>(), std::declval<const T &>(), std::declval<const T &>(), std::declval<const T &>(),
                                                          std::declval<const T &>(), std::declval<const T &>(), T(), T(), int64_t(), int64_t(), 0.0, true,
                                                          std::declval<const T &>(), std::declval<const T &>(), std::optional<double>(1.0),
                                                          std::optional<int64_t>(0), std::optional<int64_t>(0)))>> : std::true_type {};

// Flash's layout is [B, T, heads, D] (the rotary's output layout, so the callers' transposes are
// views). The window is flash's left width: keys up to window - 1 places back; right 0 (causal).
// (A template so that its calls are only compiled where HasFlashWindow holds.)
template <typename T> struct WindowedFlashFunction : public torch::autograd::Function<WindowedFlashFunction<T>> {
    static T forward(torch::autograd::AutogradContext *ctx, T q, T k, T v, double scale, int64_t window)
    {
        const int64_t t = q.size(1);
        auto [out, lse, rngState, unused, debugMask] =
            at::_flash_attention_forward(q, k, v, std::nullopt, std::nullopt, t, t, 0.0, /*is_causal=*/true, /*return_debug_mask=*/false, scale, window - 1, 0);
        (void)debugMask;
        ctx->save_for_backward({q, k, v, out, lse, rngState, unused});
        ctx->saved_data["scale"] = scale;
        ctx->saved_data["window"] = window;
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto s = ctx->get_saved_variables();
        const int64_t t = s[0].size(1);
        const double scale = ctx->saved_data["scale"].toDouble();
        const int64_t window = ctx->saved_data["window"].toInt();
        const T grad = grads[0].stride(-1) == 1 ? grads[0] : grads[0].contiguous();
        auto [dq, dk, dv] = at::_flash_attention_backward(grad, s[0], s[1], s[2], s[3], s[4], T(), T(), t, t, 0.0, /*is_causal=*/true, s[5], s[6], scale, window - 1, 0);
        return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
    }
};

template <typename T> T windowedFlash(const T &q, const T &k, const T &v, double scale, int64_t window)
{
    if constexpr (HasFlashWindow<T>::value)
        return WindowedFlashFunction<T>::apply(q, k, v, scale, window);
    else
        return T();
}
constexpr bool kFlashWindow = HasFlashWindow<at::Tensor>::value;
#else
constexpr bool kFlashWindow = false;
#endif

} // namespace

bool windowKernelRuns(const torch::Device &device, at::ScalarType type, int64_t headDim)
{
#if defined(PB_WITH_CUDA)
    if (!kFlashWindow || !device.is_cuda() || !at::globalContext().userEnabledFlashSDP() || !(type == at::kBFloat16 || type == at::kHalf) || headDim % 8 != 0 ||
        headDim > kSharedHeadsMaxHeadDim)
        return false;
    // Flash runs on compute capability 8.0 or later (as SDPA's own check).
    int major = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.has_index() ? device.index() : 0) == cudaSuccess && major >= 8;
#else
    (void)device, (void)type, (void)headDim;
    return false;
#endif
}

bool windowKernelTakes(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v)
{
    const auto type = q.scalar_type();
    return k.scalar_type() == type && v.scalar_type() == type && k.size(-1) == q.size(-1) && v.size(-1) == q.size(-1) && k.size(1) > 0 &&
           q.size(1) % k.size(1) == 0 && windowKernelRuns(q.device(), type, q.size(-1));
}

torch::Tensor slidingWindowMask(int64_t t, int64_t window, const torch::Device &device)
{
    const auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(device));
    const auto distance = pos.unsqueeze(1) - pos.unsqueeze(0);
    return distance.ge(0).logical_and(distance.lt(window));
}

torch::Tensor windowedAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v, double scale, int64_t window)
{
    TORCH_CHECK(windowKernelTakes(q, k, v) && window > 0, "the windowed attention kernel does not take these inputs");
#if PB_TORCH_AT_LEAST(2, 5)
    // The kernel wants the last dimension dense; the rotary's [B, T, heads, D] output already is.
    auto flashLayout = [](const torch::Tensor &x) {
        auto t = x.transpose(1, 2);
        return t.stride(-1) == 1 ? t : t.contiguous();
    };
    return windowedFlash(flashLayout(q), flashLayout(k), flashLayout(v), scale, window).transpose(1, 2);
#else
    (void)scale;
    return torch::Tensor();
#endif
}

} // namespace pb
