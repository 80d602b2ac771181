#!/usr/bin/env python3
"""The fused RMSNorm (every form) and gated-activation CUDA kernels (core/kernels/FusedKernels.cu)
against PyTorch's eager ops on the card, without building PilotBench: nvcc compiles the one .cu file
into a shared library, ctypes calls its functions on tensors' storage, on the current stream. For
a card session too short for a full build; engine_tst_fused_ops checks the same through FusedOps
where the build is there. From the repository root on a CUDA host:

    python3 tests/bench/h200_fused_kernels_check.py [--out DIR]

Prints one line per case (max relative error of each output) and exits non-zero when a case is
off by more than its tolerance (fp32: 1e-5 forward, 1e-4 gradients; bf16: one or two bf16 units).
"""
import argparse, ctypes, os, subprocess, sys, tempfile

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=tempfile.mkdtemp())
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
lib = os.path.join(args.out, "libfused_kernels_check.so")
nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
subprocess.run([nvcc, "-std=c++17", "-O2", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-I", os.path.join(root, "core"),
                os.path.join(root, "core/kernels/FusedKernels.cu"), "-o", lib], check=True)
symbols = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout.split()
so = ctypes.CDLL(lib)


def fn(name):
    mangled = [s for s in symbols if name in s and s.startswith("_ZN2pb7kernels")]
    if len(mangled) != 1:
        raise SystemExit("symbol %s: %s" % (name, mangled))
    return getattr(so, mangled[0])


class Form(ctypes.Structure):  # kernels::RmsNormForm
    _fields_ = [("unitOffset", ctypes.c_bool), ("scaleInFp32", ctypes.c_bool)]


DT = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}  # kernels::Dtype
P, I64, F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
rms_fwd = fn("14rmsNormForward")
rms_fwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, I64, I64, F, Form, P]
rms_bwd = fn("15rmsNormBackward")
rms_bwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, P, P, I64, I64, I64, Form, P]
partials = fn("15rmsNormPartials")
partials.argtypes, partials.restype = [I64], I64
glu_fwd = fn("13swigluForward")
glu_fwd.argtypes = [P, P, P, ctypes.c_int, I64, ctypes.c_int, P]
glu_bwd = fn("14swigluBackward")
glu_bwd.argtypes = [P, P, P, P, P, ctypes.c_int, I64, ctypes.c_int, P]
stream = lambda: P(torch.cuda.current_stream().cuda_stream)
ptr = lambda t: P(t.data_ptr())


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


failures = []


def report(case, errors, tols):
    bad = [k for k in errors if errors[k] > tols[k]]
    print("%-46s %s %s" % (case, " ".join("%s %.2e" % kv for kv in errors.items()), "FAIL " + ",".join(bad) if bad else "ok"), flush=True)
    if bad:
        failures.append(case)


torch.manual_seed(0)
for name, unit, fp32, cols in [("llama", False, False, 128), ("llama", False, False, 4096), ("gemma", True, True, 128), ("gemma", True, True, 3840),
                               ("olmo2", False, True, 128), ("olmo2", False, True, 5120), ("offset only", True, False, 256), ("llama odd", False, False, 67)]:
    for xt, wt, yt in [(torch.float32, torch.float32, torch.float32), (torch.bfloat16, torch.float32, torch.bfloat16),
                       (torch.bfloat16, torch.bfloat16, torch.bfloat16), (torch.float32, torch.float32, torch.bfloat16)]:
        rows = 2 * 2048 * (32 if cols <= 256 else 1) + 3
        x = (torch.randn(rows, cols, device="cuda") * 2).to(xt).requires_grad_(True)
        w = ((torch.rand(cols, device="cuda") - 0.5) * 0.4 + (0.0 if unit else 1.0)).to(wt).requires_grad_(True)
        dy = torch.randn(rows, cols, device="cuda").to(yt)
        eps = 1e-6
        h = x.float()
        xn = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        scale = (1.0 + w.float() if fp32 else 1.0 + w) if unit else (w.float() if fp32 else w)
        ref = (xn * scale).to(yt) if fp32 else (scale * xn.to(xt)).to(yt)
        ref.backward(dy)
        y = torch.empty(rows, cols, device="cuda", dtype=yt)
        rstd = torch.empty(rows, device="cuda")
        form = Form(unit, fp32)
        rms_fwd(ptr(x), DT[xt], ptr(w), DT[wt], ptr(y), DT[yt], ptr(rstd), rows, cols, eps, form, stream())
        n = partials(rows)
        dx = torch.empty_like(x)
        part = torch.empty(n, cols, device="cuda")
        rms_bwd(ptr(dy), DT[yt], ptr(x), DT[xt], ptr(w), DT[wt], ptr(rstd), ptr(dx), ptr(part), n, rows, cols, form, stream())
        torch.cuda.synchronize()
        dw = part.sum(0)
        low = yt == torch.bfloat16 or xt == torch.bfloat16
        report("rmsnorm %s cols %d x %s w %s y %s" % (name, cols, str(xt)[6:], str(wt)[6:], str(yt)[6:]),
               {"y": rel(y, ref), "dx": rel(dx, x.grad), "dw": rel(dw, w.grad)},
               {"y": 8e-3 if low else 1e-5, "dx": 2e-2 if low else 1e-4, "dw": 2e-2 if low else 1e-4})

for act, code in [("silu", 0), ("gelu tanh", 1), ("gelu erf", 2)]:
    for t in (torch.float32, torch.bfloat16):
        for n, offset in [(2048 * 14336 + 5, 0), (4099, 1)]:
            g0 = (torch.randn(n + offset, device="cuda") * 3).to(t)
            u0 = torch.randn(n + offset, device="cuda").to(t)
            g = g0[offset:].detach().requires_grad_(True)
            u = u0[offset:].detach().requires_grad_(True)
            d = torch.randn(n, device="cuda").to(t)
            a = torch.nn.functional.silu(g) if code == 0 else torch.nn.functional.gelu(g, approximate="tanh" if code == 1 else "none")
            ref = a * u
            ref.backward(d)
            out = torch.empty(n, device="cuda", dtype=t)
            glu_fwd(ptr(g), ptr(u), ptr(out), DT[t], n, code, stream())
            dg, du = torch.empty_like(g), torch.empty_like(u)
            glu_bwd(ptr(d), ptr(g), ptr(u), ptr(dg), ptr(du), DT[t], n, code, stream())
            torch.cuda.synchronize()
            low = t == torch.bfloat16
            report("gated %s %s n %d offset %d" % (act, str(t)[6:], n, offset), {"out": rel(out, ref), "du": rel(du, u.grad), "dg": rel(dg, g.grad)},
                   {"out": 8e-3 if low else 1e-6, "du": 8e-3 if low else 1e-6, "dg": 1.6e-2 if low else 1e-5})

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
