#include "model/GatedDeltaScan.h"

#include "engine/TorchCompat.h"
#include "model/FusedOps.h"

#ifdef PB_WITH_CUDA_KERNELS
#include "kernels/GatedDeltaScanKernels.h"

#include <c10/cuda/CUDAStream.h>
#endif

namespace pb {
namespace {

#ifdef PB_WITH_CUDA_KERNELS
// The kernel indexes matrix (b, h, n) as one index m = (b * H + h) * N + n: B, H and N must step
// through memory as one dimension (true of contiguous tensors and of their last two dims transposed).
torch::Tensor flatLeading(const torch::Tensor &t)
{
    const bool flat = t.stride(1) == t.stride(2) * t.size(2) && t.stride(0) == t.stride(1) * t.size(1);
    return flat ? t : t.contiguous();
}

kernels::ScanMatrix scanMatrix(const torch::Tensor &t) { return {t.data_ptr<float>(), t.stride(2), t.stride(3), t.stride(4)}; }

bool scanOnKernel(const DeltaScanResult &out, const torch::Tensor &decay, const torch::Tensor &x, double xScale, const torch::Tensor &y,
                  const torch::Tensor &z, double zScale, const torch::Tensor &xr, const torch::Tensor &yr, const torch::Tensor &initial, bool reverse)
{
    const auto xf = flatLeading(x), yf = flatLeading(y), zf = flatLeading(z);
    const auto xrf = xr.defined() ? flatLeading(xr) : xr, yrf = yr.defined() ? flatLeading(yr) : yr;
    const auto decayC = decay.contiguous();
    const auto initialC = initial.defined() ? initial.contiguous() : initial;
    kernels::DeltaScanArgs a;
    a.heads = x.size(0) * x.size(1);
    a.chunks = x.size(2);
    a.chunk = y.size(3);
    a.dk = x.size(3);
    a.dv = y.size(4);
    a.decay = decayC.data_ptr<float>();
    a.x = scanMatrix(xf);
    a.y = scanMatrix(yf);
    a.z = scanMatrix(zf);
    if (xrf.defined()) {
        a.xr = scanMatrix(xrf);
        a.yr = scanMatrix(yrf);
    }
    a.xScale = static_cast<float>(xScale);
    a.zScale = static_cast<float>(zScale);
    a.initial = initialC.defined() ? initialC.data_ptr<float>() : nullptr;
    a.entering = out.entering.data_ptr<float>();
    a.final = out.final.data_ptr<float>();
    a.innovation = out.innovation.data_ptr<float>();
    a.reverse = reverse;
    return kernels::gatedDeltaScan(a, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
}
#endif

torch::Tensor at2(const torch::Tensor &t, int64_t i) { return t.select(2, i); }

struct ChunkLoopFunction : public torch::autograd::Function<ChunkLoopFunction> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &kCumDecay, const torch::Tensor &value,
                                                  const torch::Tensor &qDecayed, const torch::Tensor &intra, const torch::Tensor &kToEnd,
                                                  const torch::Tensor &ends, const torch::Tensor &initialState)
    {
        const auto autocastOff = compat::autocastOff(value.device().type());
        const auto type = c10::promoteTypes(qDecayed.scalar_type(), torch::kFloat);
        const bool hasInitial = initialState.numel() > 0;
        DeltaScanResult scan = deltaStateScan(ends.to(type), kToEnd.to(type), 1.0, value.to(type), kCumDecay.to(type), -1.0, {}, {},
                                              hasInitial ? initialState.to(type) : torch::Tensor(), /*reverse=*/false);
        auto output = torch::matmul(qDecayed.to(type), scan.entering);
        output.add_(torch::matmul(intra.to(type), scan.innovation));
        ctx->save_for_backward({kCumDecay, qDecayed, intra, kToEnd, ends, scan.entering, scan.innovation});
        ctx->saved_data["initial"] = hasInitial;
        ctx->set_materialize_grads(false);
        return {output, scan.final};
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &kCumDecay = saved[0], &qDecayed = saved[1], &intra = saved[2], &kToEnd = saved[3], &ends = saved[4], &entering = saved[5],
                   &vNew = saved[6];
        const auto type = entering.scalar_type();
        const auto autocastOff = compat::autocastOff(entering.device().type());
        auto gradOut = grads[0].defined() ? grads[0].to(type) : torch::zeros_like(vNew);
        const auto gradFinal = grads[1].defined() ? grads[1].to(type) : grads[1];
        // The state's gradient G runs backwards: entering chunk i from above it is G_{i+1}, and
        //   dvNew_i = intra_i^T dOut_i + kToEnd_i^T G_{i+1}
        //   G_i = ends_i G_{i+1} - kCumDecay_i^T dvNew_i + qDecayed_i^T dOut_i
        // the forward's recurrence with x = kCumDecay^T (scale -1), y = intra^T dOut, z = kToEnd^T
        // (scale +1) and the extra term qDecayed^T dOut.
        torch::Tensor gradValue, gradK, gradQ, gradIntra, gradKEnd, gradEnds, gradInitial;
        DeltaScanResult scan;
        {
            const auto qd = qDecayed.to(type);
            const auto y = torch::matmul(intra.to(type).transpose(-1, -2), gradOut);
            scan = deltaStateScan(ends.to(type), kCumDecay.to(type).transpose(-1, -2), -1.0, y, kToEnd.to(type).transpose(-1, -2), 1.0,
                                  qd.transpose(-1, -2), gradOut, gradFinal, /*reverse=*/true);
        }
        const auto &gradState = scan.entering;   // G_{i+1} for chunk i
        gradValue = scan.innovation;
        gradKEnd = torch::matmul(gradState, vNew.transpose(-1, -2));
        gradEnds = (gradState * entering).sum({-2, -1});
        scan.entering = torch::Tensor();
        const auto stateT = entering.transpose(-1, -2);
        gradK = torch::matmul(gradValue, stateT).neg_();
        gradQ = torch::matmul(gradOut, stateT);
        gradIntra = torch::matmul(gradOut, vNew.transpose(-1, -2));
        if (ctx->saved_data["initial"].toBool())
            gradInitial = scan.final;
        return {gradK, gradValue, gradQ, gradIntra, gradKEnd, gradEnds, gradInitial};
    }
};

} // namespace

DeltaScanResult deltaStateScan(const torch::Tensor &decay, const torch::Tensor &x, double xScale, const torch::Tensor &y, const torch::Tensor &z,
                               double zScale, const torch::Tensor &xr, const torch::Tensor &yr, const torch::Tensor &initial, bool reverse,
                               bool allowKernel)
{
    TORCH_CHECK(x.dim() == 5 && y.dim() == 5 && z.dim() == 5 && decay.dim() == 3, "gated delta scan: x, y, z must be [B, H, N, rows, cols], decay [B, H, N]");
    const int64_t b = x.size(0), heads = x.size(1), chunks = x.size(2), dk = x.size(3), c = x.size(4), dv = y.size(4);
    TORCH_CHECK(y.size(3) == c && z.size(3) == c && z.size(4) == dk && decay.size(2) == chunks, "gated delta scan: mismatched chunk shapes");
    TORCH_CHECK(xr.defined() == yr.defined(), "gated delta scan: xr and yr go together");
    const auto options = y.options();
    DeltaScanResult out;
    out.entering = torch::empty({b, heads, chunks, dk, dv}, options);
    out.final = torch::empty({b, heads, dk, dv}, options);
    out.innovation = torch::empty({b, heads, chunks, c, dv}, options);
#ifdef PB_WITH_CUDA_KERNELS
    if (allowKernel && fusedKernelsOn(y.device()) && y.scalar_type() == torch::kFloat
        && scanOnKernel(out, decay, x, xScale, y, z, zScale, xr, yr, initial, reverse))
        return out;
#else
    (void)allowKernel;
#endif
    torch::NoGradGuard noGrad;
    auto state = initial.defined() ? initial.clone() : torch::zeros({b, heads, dk, dv}, options);
    for (int64_t step = 0; step < chunks; ++step) {
        const int64_t i = reverse ? chunks - 1 - step : step;
        at2(out.entering, i).copy_(state);
        const auto innovation = torch::matmul(at2(z, i), state).mul_(zScale).add_(at2(y, i));
        at2(out.innovation, i).copy_(innovation);
        auto next = torch::matmul(at2(x, i), innovation).mul_(xScale);
        if (xr.defined())
            next.add_(torch::matmul(at2(xr, i), at2(yr, i)));
        state = next.add_(state * at2(decay, i).unsqueeze(-1).unsqueeze(-1));
    }
    out.final.copy_(state);
    return out;
}

ChunkLoopResult fusedChunkLoop(const torch::Tensor &kCumDecay, const torch::Tensor &value, const torch::Tensor &qDecayed, const torch::Tensor &intra,
                               const torch::Tensor &kToEnd, const torch::Tensor &ends, const torch::Tensor &initialState)
{
    // LibTorch 1.13's Function takes no undefined input: no initial state is an empty tensor.
    const auto outputs = ChunkLoopFunction::apply(kCumDecay, value, qDecayed, intra, kToEnd, ends,
                                                  initialState.defined() ? initialState : torch::empty({0}, value.options()));
    return {outputs[0], outputs[1]};
}

} // namespace pb
