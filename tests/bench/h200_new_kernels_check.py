#!/usr/bin/env python3
"""This session's fused-path kernels on a card without building PilotBench (as
h200_fused_kernels_check.py: nvcc compiles core/kernels/FusedKernels.cu alone, ctypes calls it):
Gemma 2's capped softmax and its backward (16-byte and scalar kernels) against Transformers' eager chain run by PyTorch on the
card (every op's rounding, so the kernel should agree to a bf16 unit), the cross-entropy kernel on
logits rows padded to a multiple of 8 (Granite's 49,159 tokens), and the gated activation on a
fused gate_up output. Then each at a step's shape, timed against the eager ops it replaces.

    python3 tests/bench/h200_new_kernels_check.py [--out DIR]

Exits non-zero when a case is off by more than its tolerance.
"""
import argparse, ctypes, os, sys, tempfile

import torch

import kernel_library
from kernel_library import DT, Cap, failures, ptr, rel, stream, timed

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=tempfile.mkdtemp())
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
fn = kernel_library.load("core/kernels/FusedKernels.cu", args.out, "libfused_kernels_new.so")
P, I64, C = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


class ScoreCap(ctypes.Structure):  # kernels::ScoreCap
    _fields_ = [("scale", ctypes.c_float), ("softcap", ctypes.c_float), ("window", ctypes.c_int64)]


cap_fwd = fn("20cappedSoftmaxForward")
cap_fwd.argtypes = [P, P, C, P, P, I64, I64, ScoreCap, P]
cap_bwd = fn("21cappedSoftmaxBackward")
cap_bwd.argtypes = [P, P, P, P, P, C, I64, I64, ScoreCap, P]
ce = fn("23crossEntropyGradInPlace")
ce.argtypes = [P, I64, C, P, I64, I64, I64, P, Cap, P, P]
packed_fwd = fn("18gatedForwardPacked")
packed_fwd.argtypes = [P, P, C, I64, I64, C, P]
packed_bwd = fn("19gatedBackwardPacked")
packed_bwd.argtypes = [P, P, P, C, I64, I64, C, P]


def report(case, errors, tols):
    kernel_library.report(case, errors, tols, width=58)


def seen_mask(t, window):
    pos = torch.arange(t, device="cuda")
    d = pos[:, None] - pos[None, :]
    return (d >= 0) & ((d < window) if window > 0 else True)


def eager_capped(s, scale, softcap, window):
    """Transformers' Gemma 2 eager_attention_forward between the two matmuls."""
    w = torch.tanh(s * scale / softcap) * softcap
    w = w.masked_fill(~seen_mask(s.shape[-1], window), float("-inf"))
    return torch.softmax(w, -1, dtype=torch.float32).to(s.dtype)


def capped(s, scale, softcap, window):
    b, h, t, _ = s.shape
    rows = b * h * t
    p = torch.empty_like(s)
    stats = torch.empty(2, rows, device="cuda")
    cap_fwd(ptr(s), ptr(p), DT[s.dtype], ptr(stats[0]), ptr(stats[1]), rows, t, ScoreCap(scale, softcap, window), stream())
    return p, stats


torch.manual_seed(0)
scale, softcap = 256 ** -0.5, 50.0
# Keys 256 and 2,048 (Gemma 2 at seq 2048): the 16-byte kernels, a pack a thread; 2,056 and 4,104:
# two and four packs a thread; 36: the scalar ones (not a multiple of 8), as is every shape on
# storage 2 bytes off 16 (`shifted`).
for t in (torch.float32, torch.bfloat16):
    for (b, h, keys), window in [((2, 4, 256), 0), ((2, 4, 256), 64), ((1, 2, 2048), 0), ((1, 1, 2056), 1500), ((1, 1, 4104), 0), ((1, 2, 36), 5)]:
        for shifted in (False, True):
            if shifted and keys != 256:
                continue
            n = b * h * keys * keys
            buf = torch.empty(n + 8, device="cuda", dtype=t)
            s = buf[1:n + 1].view(b, h, keys, keys) if shifted else buf[:n].view(b, h, keys, keys)
            s.copy_(torch.randn(b, h, keys, keys, device="cuda") * 600)
            s.requires_grad_(True)
            dp = torch.randn(b, h, keys, keys, device="cuda").to(t)
            ref = eager_capped(s, scale, softcap, window)
            ref.backward(dp)
            p, stats = capped(s.detach(), scale, softcap, window)
            ds = torch.empty_like(p)
            cap_bwd(ptr(s), ptr(stats[0]), ptr(stats[1]), ptr(dp), ptr(ds), DT[t], s.numel() // keys, keys, ScoreCap(scale, softcap, window), stream())
            torch.cuda.synchronize()
            low = t == torch.bfloat16
            report("capped softmax %s %d keys window %d%s" % (str(t)[6:], keys, window, " (2 bytes off)" if shifted else ""),
                   {"probs": rel(p, ref.detach()), "dscores": rel(ds, s.grad)}, {"probs": 8e-3 if low else 1e-5, "dscores": 1.6e-2 if low else 1e-4})
            del buf, s, dp, ref, p, ds

for t in (torch.float32, torch.bfloat16):
    rows, vocab, ld = 64, 49159, 49160
    buf = torch.full((rows, ld), 7.0, device="cuda", dtype=t)
    logits = buf[:, :vocab]
    logits.copy_(torch.randn(rows, vocab, device="cuda") * 4)
    targets = torch.randint(0, vocab, (rows,), device="cuda")
    targets[3] = -100
    lf = logits.float().requires_grad_(True)
    ref_loss = torch.nn.functional.cross_entropy(lf, targets, ignore_index=-100, reduction="none")
    (ref_loss.sum() * 0.5).backward()
    row_loss, half = torch.empty(rows, device="cuda"), torch.full((), 0.5, device="cuda")
    ce(ptr(buf), ld, DT[t], ptr(targets), rows, vocab, -100, ptr(half), Cap(1.0, 0.0), ptr(row_loss), stream())
    torch.cuda.synchronize()
    low = t == torch.bfloat16
    report("cross-entropy vocab %d in rows of %d %s" % (vocab, ld, str(t)[6:]),
           {"loss": rel(row_loss, ref_loss.detach()), "grad": rel(logits, lf.grad.to(t)), "pad": float((buf[:, vocab:] != 7).sum().item())},
           {"loss": 1e-5, "grad": 8e-3 if low else 1e-5, "pad": 0.0})

for act, code in [("silu", 0), ("gelu tanh", 1)]:
    for t in (torch.float32, torch.bfloat16):
        for rows, width in [(2048, 17920), (33, 13)]:
            gu = (torch.randn(rows, 2 * width, device="cuda") * 3).to(t).requires_grad_(True)
            d = torch.randn(rows, width, device="cuda").to(t)
            g, u = gu[:, :width], gu[:, width:]
            a = torch.nn.functional.silu(g) if code == 0 else torch.nn.functional.gelu(g, approximate="tanh")
            ref = a * u
            ref.backward(d)
            out, dgu = torch.empty(rows, width, device="cuda", dtype=t), torch.empty_like(gu)
            packed_fwd(ptr(gu), ptr(out), DT[t], rows, width, code, stream())
            packed_bwd(ptr(d), ptr(gu), ptr(dgu), DT[t], rows, width, code, stream())
            torch.cuda.synchronize()
            low = t == torch.bfloat16
            report("gated on gate_up %s %s %dx2x%d" % (act, str(t)[6:], rows, width), {"out": rel(out, ref.detach()), "dgate_up": rel(dgu, gu.grad)},
                   {"out": 8e-3 if low else 1e-6, "dgate_up": 1.6e-2 if low else 1e-5})

print("%d failed" % len(failures), flush=True)


bf = torch.bfloat16


def time_capped_at_gemma2():
    """Gemma-2-9B at 2048 x 4: 16 heads of [2048, 2048] scores per sequence; the 16-byte kernels
    against eager and against the scalar kernels (stop 54's, still the fallback), run on the same
    scores 2 bytes off 16."""
    s = torch.randn(4, 16, 2048, 2048, device="cuda", dtype=bf) * 600
    dp = torch.randn_like(s)
    p, stats = capped(s, scale, softcap, 4096)
    ds = torch.empty_like(s)
    rows = s.numel() // 2048
    fwd_us = timed(lambda: capped(s, scale, softcap, 4096), reps=10)
    bwd_us = timed(lambda: cap_bwd(ptr(s), ptr(stats[0]), ptr(stats[1]), ptr(dp), ptr(ds), 1, rows, 2048, ScoreCap(scale, softcap, 4096), stream()), reps=10)
    sr = s.detach().requires_grad_(True)
    eager_fwd_us = timed(lambda: eager_capped(sr, scale, softcap, 4096), reps=3)
    eager_both_us = timed(lambda: torch.autograd.grad(eager_capped(sr, scale, softcap, 4096), sr, dp), reps=3)
    n = s.numel() * 2
    seen = (2048 + 1) / (2 * 2048)  # a causal row reads only the keys it sees (and writes every one)
    print("capped softmax Gemma-2-9B 4x16x2048x2048 bf16: fwd %.0f us (%.2f TB/s, eager %.0f us, %.2fx); bwd %.0f us (%.2f TB/s); fwd+bwd %.0f us against eager's %.0f us (%.2fx)"
          % (fwd_us, 2 * n / fwd_us / 1e6, eager_fwd_us, eager_fwd_us / fwd_us, bwd_us, 3 * n / bwd_us / 1e6, fwd_us + bwd_us, eager_both_us,
             eager_both_us / (fwd_us + bwd_us)), flush=True)
    print("  counting only the bytes a causal row moves: fwd %.2f TB/s, bwd %.2f TB/s" % ((1 + seen) * n / fwd_us / 1e6, (1 + 2 * seen) * n / bwd_us / 1e6), flush=True)
    buf = torch.empty(s.numel() + 8, device="cuda", dtype=bf)
    s2 = buf[1:s.numel() + 1].view_as(s)
    s2.copy_(s)
    scalar_fwd_us = timed(lambda: cap_fwd(ptr(s2), ptr(p), 1, ptr(stats[0]), ptr(stats[1]), rows, 2048, ScoreCap(scale, softcap, 4096), stream()), reps=10)
    scalar_bwd_us = timed(lambda: cap_bwd(ptr(s2), ptr(stats[0]), ptr(stats[1]), ptr(dp), ptr(ds), 1, rows, 2048, ScoreCap(scale, softcap, 4096), stream()), reps=10)
    print("capped softmax Gemma-2-9B shape, scalar kernels: fwd %.0f us, bwd %.0f us; 16-byte / scalar time %.3f"
          % (scalar_fwd_us, scalar_bwd_us, (fwd_us + bwd_us) / (scalar_fwd_us + scalar_bwd_us)), flush=True)


time_capped_at_gemma2()
torch.cuda.empty_cache()
rows, width = 8192, 17920  # Phi-4's MLP at 2048 x 4
gu = torch.randn(rows, 2 * width, device="cuda", dtype=bf)
d = torch.randn(rows, width, device="cuda", dtype=bf)
o, dgu = torch.empty(rows, width, device="cuda", dtype=bf), torch.empty_like(gu)
f_us = timed(lambda: packed_fwd(ptr(gu), ptr(o), 1, rows, width, 0, stream()), reps=10)
b_us = timed(lambda: packed_bwd(ptr(d), ptr(gu), ptr(dgu), 1, rows, width, 0, stream()), reps=10)
gr = gu.detach().requires_grad_(True)
e_us = timed(lambda: torch.autograd.grad(torch.nn.functional.silu(gr[:, :width]) * gr[:, width:], gr, d), reps=5)
print("gated on gate_up Phi-4 8192x2x17920 bf16: fwd %.0f us (%.2f TB/s), bwd %.0f us (%.2f TB/s); fwd+bwd %.0f us against eager's fwd+bwd %.0f us (%.2fx)"
      % (f_us, 3 * rows * width * 2 / f_us / 1e6, b_us, 5 * rows * width * 2 / b_us / 1e6, f_us + b_us, e_us, e_us / (f_us + b_us)), flush=True)
sys.exit(1 if failures else 0)
