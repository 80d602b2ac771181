#!/usr/bin/env python3
"""The gated delta rule's state-recurrence kernel (core/kernels/GatedDeltaScanKernels.cu, issue 30)
on the card, without building PilotBench: nvcc compiles the one .cu file into a shared library and
ctypes calls kernels::gatedDeltaScan on tensors' storage. CI runs the same device code on the host
(engine_tst_gated_delta_scan_kernel, under tests/core/engine/CudaEmulation.h); this checks what the
emulation cannot: the card's launch, shared memory opt-in, and fp32 rounding with fma contraction.
From the repository root on a CUDA host:

    python3 tests/bench/h200_delta_scan_check.py [--out DIR]

Per case, the forward form (S = d S + X (Y - Z S)) and the backward's (transposed views, the extra
product, chunks in reverse), the kernel's entering states, final state and innovations against the
same loop in float64; exits non-zero when one is off by more than 2e-5 of the largest value. Then,
at Qwen3-Next's shape (32 value heads of 128 x 128, chunks of 64), the kernel's time against the
LibTorch loop it replaces (fp32, about ten kernels a chunk), at 2k, 8k and 32k tokens.
"""
import argparse, ctypes, os, sys, tempfile

import torch

import kernel_library

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=tempfile.mkdtemp())
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
scan_fn = kernel_library.load("core/kernels/GatedDeltaScanKernels.cu", args.out, "libdelta_scan_check.so")("14gatedDeltaScan")
I64, P, F = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float


class ScanMatrix(ctypes.Structure):
    _fields_ = [("p", P), ("batch", I64), ("row", I64), ("col", I64)]


class Args(ctypes.Structure):  # kernels::DeltaScanArgs
    _fields_ = [("heads", I64), ("chunks", I64), ("chunk", I64), ("dk", I64), ("dv", I64), ("decay", P), ("x", ScanMatrix), ("y", ScanMatrix),
                ("z", ScanMatrix), ("xr", ScanMatrix), ("yr", ScanMatrix), ("xScale", F), ("zScale", F), ("initial", P), ("entering", P),
                ("final", P), ("innovation", P), ("reverse", ctypes.c_bool), ("tile", I64)]


scan_fn.argtypes = [Args, P]
scan_fn.restype = ctypes.c_bool


def matrix(t):
    if t is None:
        return ScanMatrix(None, 0, 0, 0)
    assert t.stride(1) == t.stride(2) * t.size(2) and t.stride(0) == t.stride(1) * t.size(1)
    return ScanMatrix(t.data_ptr(), t.stride(2), t.stride(3), t.stride(4))


def kernel(decay, x, xs, y, z, zs, xr, yr, initial, reverse):
    b, h, n, dk, c = x.shape
    dv = y.shape[-1]
    out = (torch.empty(b, h, n, dk, dv, device="cuda"), torch.empty(b, h, dk, dv, device="cuda"), torch.empty(b, h, n, c, dv, device="cuda"))
    a = Args(b * h, n, c, dk, dv, decay.data_ptr(), matrix(x), matrix(y), matrix(z), matrix(xr), matrix(yr), xs, zs,
             initial.data_ptr() if initial is not None else None, out[0].data_ptr(), out[1].data_ptr(), out[2].data_ptr(), reverse, 0)
    if not scan_fn(a, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)):
        raise SystemExit("the kernel refused the shape (shared memory)")
    return out


def loop(decay, x, xs, y, z, zs, xr, yr, initial, reverse):
    b, h, n, dk, c = x.shape
    dv = y.shape[-1]
    s = initial.clone() if initial is not None else torch.zeros(b, h, dk, dv, dtype=y.dtype, device=y.device)
    entering = torch.empty(b, h, n, dk, dv, dtype=y.dtype, device=y.device)
    innovation = torch.empty(b, h, n, c, dv, dtype=y.dtype, device=y.device)
    for step in range(n):
        i = n - 1 - step if reverse else step
        entering[:, :, i] = s
        inn = y[:, :, i] + zs * (z[:, :, i] @ s)
        innovation[:, :, i] = inn
        nxt = xs * (x[:, :, i] @ inn) + decay[:, :, i, None, None] * s
        if xr is not None:
            nxt = nxt + xr[:, :, i] @ yr[:, :, i]
        s = nxt
    return entering, s, innovation


def inputs(b, h, n, c, dk, dv, backward, initial, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, device="cuda", generator=g)
    decay = torch.rand(b, h, n, device="cuda", generator=g) * 0.5 + 0.5
    if not backward:
        x, y, z, xr, yr, xs, zs = r(b, h, n, dk, c) * 0.1, r(b, h, n, c, dv), r(b, h, n, c, dk) * 0.1, None, None, 1.0, -1.0
    else:
        x, y, z = (r(b, h, n, c, dk) * 0.1).transpose(-1, -2), r(b, h, n, c, dv), (r(b, h, n, dk, c) * 0.1).transpose(-1, -2)
        xr, yr, xs, zs = (r(b, h, n, c, dk) * 0.1).transpose(-1, -2), r(b, h, n, c, dv), -1.0, 1.0
    s0 = r(b, h, dk, dv) if initial else None
    return decay, x, xs, y, z, zs, xr, yr, s0, backward


failed = 0
cases = [(2, 3, 5, 16, 8, 6), (2, 3, 5, 16, 12, 10), (1, 4, 3, 64, 128, 128), (2, 2, 4, 64, 64, 96), (1, 32, 8, 64, 128, 128)]
for b, h, n, c, dk, dv in cases:
    for backward in (False, True):
        for initial in (False, True):
            a = inputs(b, h, n, c, dk, dv, backward, initial, 7 + n + dk)
            got = kernel(*a)
            ref = loop(*[t.double() if isinstance(t, torch.Tensor) else t for t in a])
            errors = []
            for name, o, r in zip(("entering", "final", "innovation"), got, ref):
                errors.append((name, ((o.double() - r).abs().max() / r.abs().max().clamp_min(1.0)).item()))
            bad = any(e > 2e-5 or e != e for _, e in errors)
            failed += bad
            print("%s B=%d H=%d N=%d C=%d dk=%d dv=%d %s %s: %s" % ("FAIL" if bad else "ok  ", b, h, n, c, dk, dv, "backward" if backward else "forward",
                  "initial" if initial else "zero", "  ".join("%s %.2e" % e for e in errors)))

print("\ntime per call at Qwen3-Next's shape (B=1, 32 heads, dk = dv = 128, C = 64): kernel against the LibTorch loop (fp32)")
for tokens in (2048, 8192, 32768):
    n = tokens // 64
    for backward in (False, True):
        a = inputs(1, 32, n, 64, 128, 128, backward, False, 1)
        times = []
        for f in (kernel, loop):
            for _ in range(2):
                f(*a)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            reps = 3
            for _ in range(reps):
                f(*a)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / reps)
        print("  %6d tokens %-8s kernel %8.2f ms   loop %8.2f ms   %.1fx" % (tokens, "backward" if backward else "forward", times[0], times[1], times[1] / times[0]))
sys.exit(1 if failed else 0)
