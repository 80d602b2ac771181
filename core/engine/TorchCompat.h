#pragma once
// Every difference between Debian's LibTorch 1.13 (CPU) and the LibTorch 2.x inside a CUDA host's
// PyTorch lives here, so the rest of the engine is written once.
#include "config/AttentionKernels.h"

#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#define PB_TORCH_AT_LEAST(major, minor) \
    (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if PB_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/autograd/profiler_kineto.h>
#endif
#ifdef PB_WITH_CUDA
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace pb::compat {

inline bool hasScaledDotProductAttention() { return PB_TORCH_AT_LEAST(2, 0); }
// float8 dtypes and _scaled_mm with rowwise scales and a tensor result (LibTorch >= 2.5).
inline bool hasFloat8() { return PB_TORCH_AT_LEAST(2, 5); }

// a [M, K] (row-major) times b [K, N] (column-major), both float8, each scaled (fp32: one value, or
// [M, 1] and [1, N]), accumulated in fp32 and returned in `outType`. Throws where hasFloat8() is false.
inline at::Tensor scaledMatmul(const at::Tensor &a, const at::Tensor &b, const at::Tensor &scaleA, const at::Tensor &scaleB, at::ScalarType outType)
{
#if PB_TORCH_AT_LEAST(2, 5)
    return at::_scaled_mm(a, b, scaleA, scaleB, c10::nullopt, c10::nullopt, outType);
#else
    (void)a, (void)b, (void)scaleA, (void)scaleB, (void)outType;
    throw std::runtime_error("float8 matmuls need LibTorch 2.5 or later");
#endif
}
// t rounded to float8 (e4m3 or e5m2, as `e5m2` says), saturated at the format's largest value.
inline at::Tensor toFloat8(const at::Tensor &t, bool e5m2)
{
#if PB_TORCH_AT_LEAST(2, 5)
    return t.clamp(e5m2 ? -57344.0 : -448.0, e5m2 ? 57344.0 : 448.0).to(e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn);
#else
    (void)t, (void)e5m2;
    throw std::runtime_error("float8 tensors need LibTorch 2.5 or later");
#endif
}
inline bool hasFusedAdamW() { return PB_TORCH_AT_LEAST(2, 1); }

// Whether work on `t`'s device is being captured into a CUDA graph on the current stream (where a
// host read of a device value would fail the capture).
inline bool streamCapturing(const at::Tensor &t)
{
#ifdef PB_WITH_CUDA
    return t.is_cuda() && c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
    (void)t;
    return false;
#endif
}

namespace detail {
// _fused_adamw_'s overload with the learning rate as a device tensor (read by the kernel, so a
// captured step takes each step's rate), where this LibTorch declares it.
template <typename T, typename = void> struct HasTensorLrAdamW : std::false_type {};
#if PB_TORCH_AT_LEAST(2, 1) // before, no _fused_adamw_ at all
template <typename T>
struct HasTensorLrAdamW<T, std::void_t<decltype(at::_fused_adamw_(std::declval<std::vector<T> &>(), std::declval<std::vector<T> &>(), std::declval<std::vector<T> &>(),
                                                                  std::declval<std::vector<T> &>(), std::declval<std::vector<T> &>(), std::declval<std::vector<T> &>(),
                                                                  std::declval<const T &>(), 0.9, 0.999, 0.0, 1e-8, false, false, std::optional<T>(),
                                                                  std::optional<T>()))>> : std::true_type {};
#endif
} // namespace detail
// Whether an AdamW step can run with no host value that changes between steps (the rate, the
// clipping divisor and the skip flag all device tensors): what a CUDA graph of the step needs.
inline constexpr bool kDeviceSideAdamW = detail::HasTensorLrAdamW<at::Tensor>::value;
// That step (see kDeviceSideAdamW); throws where it is false.
template <typename T = at::Tensor>
void fusedAdamWDeviceSide(std::vector<T> &params, std::vector<T> &grads, std::vector<T> &ms, std::vector<T> &vs, std::vector<T> &steps, const T &lr, double beta1,
                          double beta2, double weightDecay, double eps, const T &divisor, const T &foundInf)
{
#if PB_TORCH_AT_LEAST(2, 1)
    if constexpr (detail::HasTensorLrAdamW<T>::value) {
        std::vector<T> none;
        at::_fused_adamw_(params, grads, ms, vs, none, steps, lr, beta1, beta2, weightDecay, eps, false, false, std::optional<T>(divisor), std::optional<T>(foundInf));
        return;
    }
#endif
    {
        (void)params, (void)grads, (void)ms, (void)vs, (void)steps, (void)lr, (void)beta1, (void)beta2, (void)weightDecay, (void)eps, (void)divisor, (void)foundInf;
        throw std::runtime_error("a device-side AdamW step needs _fused_adamw_ with a tensor learning rate (LibTorch 2.2 or later)");
    }
}

namespace detail {
// addmm's out_dtype overload (a 16-bit product accumulated into fp32 by the GEMM itself), where
// this LibTorch declares it; chosen by overload resolution rather than a version number.
template <typename T>
auto addmmOutDtype(T &acc, const T &a, const T &b, double beta, int) -> decltype(at::addmm_out(acc, acc, a, b, acc.scalar_type(), beta), bool())
{
    at::addmm_out(acc, acc, a, b, acc.scalar_type(), beta);
    return true;
}
template <typename T> bool addmmOutDtype(T &, const T &, const T &, double, long) { return false; }
} // namespace detail

// acc += a @ b inside the GEMM (beta = 1): a 16-bit a and b into an fp32 acc through addmm's
// out_dtype on CUDA (from 2.11, the first release measured here: earlier ones declare the overload
// but some refuse an fp32 self with 16-bit matrices); elsewhere the product is made and added.
// `accumulate` false: acc = a @ b (beta = 0, which addmm defines as acc never read), so a first
// term needs no zero fill (a [vocab, hidden] fp32 weight gradient is 4 GB at Gemma's 262,144 tokens).
inline void addMatmulInto(at::Tensor &acc, const at::Tensor &a, const at::Tensor &b, bool accumulate = true)
{
    const double beta = accumulate ? 1.0 : 0.0;
    if (a.scalar_type() == acc.scalar_type()) {
        acc.addmm_(a, b, beta);
        return;
    }
    if (PB_TORCH_AT_LEAST(2, 11) && acc.is_cuda() && detail::addmmOutDtype(acc, a, b, beta, 0))
        return;
    if (accumulate)
        acc.add_(at::matmul(a, b));
    else
        acc.copy_(at::matmul(a, b));
}

// Runs `work` under the Kineto profiler (CPU ops and CUDA kernels) and writes its Chrome trace
// (Perfetto reads it) to `path`. False, running nothing, where the C++ profiler API is 1.13's.
template <typename F> bool traceToFile(const std::string &path, F &&work)
{
#if PB_TORCH_AT_LEAST(2, 0)
    namespace impl = torch::profiler::impl;
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    const std::set<impl::ActivityType> activities {impl::ActivityType::CPU, impl::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
    try {
        work();
    } catch (...) {
        torch::autograd::profiler::disableProfiler(); // not left on for whoever runs next
        throw;
    }
    torch::autograd::profiler::disableProfiler()->save(path);
    return true;
#else
    (void)path;
    (void)work;
    return false;
#endif
}

// The key torch::optim files a parameter's state under in Optimizer::state(): its TensorImpl's
// address printed as text in 1.13 (c10::guts::to_string), the pointer itself in later 2.x releases
// (pytorch#108480). Chosen by the map's key type rather than a version number, so every release
// gets the one it uses.
template <typename StateMap>
typename StateMap::key_type optimizerStateKey(const StateMap &, const at::Tensor &parameter)
{
    if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
        std::ostringstream text;
        text << parameter.unsafeGetTensorImpl();
        return text.str();
    } else {
        return parameter.unsafeGetTensorImpl();
    }
}

// Autocast for one device type. 2.4 replaced the per-device setters with ones taking a device type.
inline void setAutocast(c10::DeviceType device, bool enabled, at::ScalarType dtype)
{
#if PB_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(device, enabled);
    if (enabled)
        at::autocast::set_autocast_dtype(device, dtype);
#else
    if (device == c10::DeviceType::CPU) {
        at::autocast::set_cpu_enabled(enabled);
        if (enabled)
            at::autocast::set_autocast_cpu_dtype(dtype);
    } else {
        at::autocast::set_enabled(enabled);
        if (enabled)
            at::autocast::set_autocast_gpu_dtype(dtype);
    }
#endif
    if (!enabled)
        at::autocast::clear_cache();
}

// Causal attention over [B, H, T, D] tensors; k and v already expanded to H heads.
inline at::Tensor causalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, bool allowFused)
{
#if PB_TORCH_AT_LEAST(2, 0)
    if (allowFused)
        return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#endif
    (void)allowFused;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
    const auto t = q.size(-2);
    auto mask = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1, scores.scalar_type()), v);
}

} // namespace pb::compat

namespace pb::compat {

inline bool autocastEnabled(c10::DeviceType device)
{
#if PB_TORCH_AT_LEAST(2, 4)
    return at::autocast::is_autocast_enabled(device);
#else
    return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

inline at::ScalarType autocastDtype(c10::DeviceType device)
{
#if PB_TORCH_AT_LEAST(2, 4)
    return at::autocast::get_autocast_dtype(device);
#else
    return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

// Autocast for one device type set for a scope and put back as it was when the scope ends, also
// when an exception leaves it.
class AutocastGuard {
public:
    AutocastGuard(c10::DeviceType device, bool enabled, at::ScalarType dtype)
        : m_device(device), m_previous(autocastEnabled(device)), m_previousType(autocastDtype(device))
    {
        setAutocast(device, enabled, dtype);
    }
    ~AutocastGuard() { setAutocast(m_device, m_previous, m_previousType); }
    AutocastGuard(const AutocastGuard &) = delete;
    AutocastGuard &operator=(const AutocastGuard &) = delete;

private:
    c10::DeviceType m_device;
    bool m_previous;
    at::ScalarType m_previousType;
};

// Autocast off for a scope (the kernels and composites that round for themselves).
inline AutocastGuard autocastOff(c10::DeviceType device) { return AutocastGuard(device, false, autocastDtype(device)); }

// k or v [B, KV, T, D] repeated to `groups` x KV heads, each kv head serving `groups` query heads in
// a row (Transformers' repeat_kv); the tensor itself when groups == 1.
inline at::Tensor expandKvHeads(const at::Tensor &t, int64_t groups)
{
    if (groups == 1)
        return t;
    return t.unsqueeze(2).expand({t.size(0), t.size(1), groups, t.size(2), t.size(3)}).reshape({t.size(0), t.size(1) * groups, t.size(2), t.size(3)});
}

// Whether SDPA may read grouped key/value heads as they are (enable_gqa) and stay on a fused kernel:
// 16-bit q of a head width flash takes. Elsewhere the caller expands the heads.
inline bool sharedHeadsKernel(const at::Tensor &q)
{
    return q.scalar_type() != at::kFloat && q.size(-1) <= pb::kSharedHeadsMaxHeadDim;
}

// Causal attention with grouped key/value heads: q [B, H, T, D], k and v [B, KV, T, D].
inline at::Tensor groupedCausalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, bool allowFused)
{
    const int64_t groups = q.size(1) / k.size(1);
#if PB_TORCH_AT_LEAST(2, 5)
    // enable_gqa lets the flash kernel read the shared heads instead of materialising copies. Flash
    // takes only 16-bit inputs of heads up to 256 wide, and the memory-efficient kernel (which takes
    // fp32 and any width) has no GQA, so fp32 or a wider head with enable_gqa would fall back to the
    // math path and keep the seq x seq scores (in fp32): those expand the heads instead and stay on
    // a fused kernel.
    if (allowFused && sharedHeadsKernel(q))
        return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, /*enable_gqa=*/groups > 1);
#endif
    return causalAttention(q, expandKvHeads(k, groups), expandKvHeads(v, groups), allowFused);
}


namespace detail {

// at::_grouped_mm(a, b, offs) with offs the running ends of `counts` (int32 on the device), for
// bf16 CUDA inputs with rows; undefined where LibTorch or the card refuses them.
inline at::Tensor groupedMm(const at::Tensor &a, const at::Tensor &b, c10::ArrayRef<int64_t> counts, int64_t rows)
{
#if PB_TORCH_AT_LEAST(2, 8)
    if (a.is_cuda() && a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 && rows > 0) {
        std::vector<int32_t> ends(counts.size());
        int64_t sum = 0;
        for (size_t e = 0; e < counts.size(); ++e)
            ends[e] = static_cast<int32_t>(sum += counts[e]);
        const auto offs = at::tensor(ends, at::TensorOptions().dtype(at::kInt)).to(a.device(), /*non_blocking=*/true);
        try {
            return at::_grouped_mm(a, b, offs);
        } catch (const c10::Error &) {
            return {};
        }
    }
#else
    (void)a;
    (void)b;
    (void)counts;
    (void)rows;
#endif
    return {};
}

} // namespace detail

// Every expert's matmul in one kernel: x [N, K] (rows grouped by expert, counts on the host),
// w [E, K, M] -> [N, M]. LibTorch 2.8 has at::_grouped_mm for bf16 on CUDA (sm_90 and newer);
// elsewhere, or where it refuses the inputs, an undefined tensor tells the caller to loop.
inline at::Tensor groupedMatmul(const at::Tensor &x, const at::Tensor &w, c10::ArrayRef<int64_t> counts)
{
    return detail::groupedMm(x, w, counts, x.size(0));
}

// Whether at::_grouped_mm exists in this LibTorch (whether the card runs it is known on the call).
inline bool hasGroupedMatmul()
{
    return PB_TORCH_AT_LEAST(2, 8);
}

// Per expert, a_e^T b_e over its rows of a [n, O] and b [n, K]: [E, O, K] through one
// at::_grouped_mm over the shared dimension, or undefined as groupedMatmul. An expert without rows
// is left to the caller to zero.
inline at::Tensor groupedMatmulWeights(const at::Tensor &a, const at::Tensor &b, c10::ArrayRef<int64_t> counts)
{
    return detail::groupedMm(a.t(), b, counts, a.size(0));
}

} // namespace pb::compat
