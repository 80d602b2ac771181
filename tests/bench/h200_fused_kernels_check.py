#!/usr/bin/env python3
"""The fused RMSNorm (every form), gated-activation, rotary, cross-entropy and LoRA dropout CUDA kernels
(core/kernels/FusedKernels.cu: the 16-byte-load row forms and the scalar ones they fall back to)
against PyTorch's eager ops on the card, without building PilotBench: nvcc compiles the one .cu file
into a shared library, ctypes calls its functions on tensors' storage, on the current stream. For
a card session too short for a full build; engine_tst_fused_ops checks the same through FusedOps
where the build is there. From the repository root on a CUDA host:

    python3 tests/bench/h200_fused_kernels_check.py [--out DIR]

Prints one line per case (max relative error of each output) and exits non-zero when a case is
off by more than its tolerance (fp32: 1e-5 forward, 1e-4 gradients; bf16: one or two bf16 units).
Then, at a step's shapes, each kernel's time and achieved bandwidth (bytes it must move / time;
the H200's HBM3e is 4.8 TB/s) beside the eager ops it replaces, timed in the same run (issue 34).
"""
import argparse, ctypes, os, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

import torch

import kernel_library
from kernel_library import DT, Cap, failures, ptr, rel, report, stream, timed

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=tempfile.mkdtemp())
ap.add_argument("--baseline", help="a tree holding core/kernels to time beside this one")
ap.add_argument("--compile-only", action="store_true", help="build the libraries into --out and stop (a later run with the same --out keeps them)")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
# Both trees compiled at once (nvcc takes about a minute each, one core apiece).
with ThreadPoolExecutor(2) as pool:
    built = pool.submit(kernel_library.load, "core/kernels/FusedKernels.cu", args.out, "libfused_kernels_check.so")
    built_base = pool.submit(kernel_library.load, "core/kernels/FusedKernels.cu", args.out, "libfused_kernels_base.so", args.baseline) if args.baseline else None
    fn, fn_base = built.result(), built_base.result() if built_base else None
if args.compile_only:
    sys.exit(0)


class Form(ctypes.Structure):  # kernels::RmsNormForm
    _fields_ = [("unitOffset", ctypes.c_bool), ("scaleInFp32", ctypes.c_bool)]


P, I64, F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float


class ResidualIn(ctypes.Structure):  # kernels::ResidualIn
    _fields_ = [("branch", ctypes.c_void_p), ("scale", ctypes.c_float), ("sum", ctypes.c_void_p)]


class ResidualGrad(ctypes.Structure):  # kernels::ResidualGrad
    _fields_ = [("dSum", ctypes.c_void_p), ("dBranch", ctypes.c_void_p), ("scale", ctypes.c_float)]


def bind(fn):
    """The library's kernels as ctypes functions with their argument types."""
    k = argparse.Namespace()
    k.rms_fwd = fn("14rmsNormForward")
    k.rms_fwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, I64, I64, F, Form, P]
    k.rms_bwd = fn("15rmsNormBackward")
    k.rms_bwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, P, P, I64, I64, I64, Form, P]
    k.partials = fn("15rmsNormPartials")
    k.partials.argtypes, k.partials.restype = [I64], I64
    k.glu_fwd = fn("13swigluForward")
    k.glu_fwd.argtypes = [P, P, P, ctypes.c_int, I64, ctypes.c_int, P]
    k.glu_bwd = fn("14swigluBackward")
    k.glu_bwd.argtypes = [P, P, P, P, P, ctypes.c_int, I64, ctypes.c_int, P]
    k.rot = fn("6rotary")
    k.rot.argtypes = [P, P, ctypes.c_int, P, P, I64, I64, I64, I64, ctypes.c_bool, P]
    ce = fn("23crossEntropyGradInPlace")
    # Rows `ld` apart since the padded logits; a --baseline tree may predate that (its name's
    # parameters start with the dtype, not an int64 after the pointer).
    strided = "crossEntropyGradInPlaceEPvl" in ce.__name__
    ce.argtypes = ([P, I64] if strided else [P]) + [ctypes.c_int, P, I64, I64, I64, P, Cap, P, P]  # the scale: a device fp32
    k.ce = lambda logits, ld, *rest: ce(logits, ld, *rest) if strided else ce(logits, *rest)
    try:  # the residual add folded into the norm (issue 34); a --baseline tree may predate it
        k.add_fwd = fn("17addRmsNormForward")
        k.add_fwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, I64, I64, F, Form, ResidualIn, P]
        k.add_bwd = fn("18addRmsNormBackward")
        k.add_bwd.argtypes = [P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int, P, P, P, I64, I64, I64, Form, ResidualGrad, P]
    except SystemExit:
        k.add_fwd = k.add_bwd = None
    try:  # LoRA dropout's gradient kernels (issue 34); a --baseline tree may predate them
        k.lora_drop = fn("17addDroppedLowRank")
        k.lora_drop.argtypes = [P, P, P, P, F, ctypes.c_int, I64, I64, I64, P]
        k.drop_chunks = fn("18droppedInputChunks")
        k.drop_chunks.argtypes, k.drop_chunks.restype = [I64, I64], I64
        k.drop_da = fn("19droppedInputProduct")
        k.drop_da.argtypes = [P, P, F, P, ctypes.c_int, P, I64, I64, I64, P]
    except SystemExit:
        k.lora_drop = k.drop_chunks = k.drop_da = None
    return k


lib = bind(fn)
# --baseline: the same kernels from another tree (e.g. the last commit's core/kernels, copied by the
# caller), timed beside these in the same run so a kernel change shows its before and after.
base = bind(fn_base) if fn_base else None
torch.manual_seed(0)
# Widths for each row shape of the 16-byte forms (8, 16, 32 threads a row with 1, 2, 4 packs each;
# a block a row with 1, 2, 4), the scalar fallbacks (67: not a multiple of 8; 9000: over 8192;
# "unaligned": storage 2 bytes off), and the families' hidden sizes.
for name, unit, fp32, cols in [("llama", False, False, 128), ("llama", False, False, 4096), ("gemma", True, True, 128), ("gemma", True, True, 3840),
                               ("olmo2", False, True, 128), ("olmo2", False, True, 5120), ("offset only", True, False, 256), ("llama odd", False, False, 67),
                               ("llama", False, False, 64), ("gemma", True, True, 512), ("llama", False, False, 1024), ("gemma", True, True, 1536),
                               ("llama", False, False, 8192), ("llama wide", False, False, 9000), ("llama unaligned", False, False, 2048)]:
    for xt, wt, yt in [(torch.float32, torch.float32, torch.float32), (torch.bfloat16, torch.float32, torch.bfloat16),
                       (torch.bfloat16, torch.bfloat16, torch.bfloat16), (torch.float32, torch.float32, torch.bfloat16)]:
        rows = 2 * 2048 * (32 if cols <= 256 else 1) + 3
        if name.endswith("unaligned"):
            x = (torch.randn(rows * cols + 1, device="cuda") * 2).to(xt)[1:].view(rows, cols).detach().requires_grad_(True)
        else:
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
        lib.rms_fwd(ptr(x), DT[xt], ptr(w), DT[wt], ptr(y), DT[yt], ptr(rstd), rows, cols, eps, form, stream())
        n = lib.partials(rows)
        dx = torch.empty_like(x) if not name.endswith("unaligned") else torch.empty(rows * cols + 1, device="cuda", dtype=xt)[1:].view(rows, cols)
        part = torch.empty(n, cols, device="cuda")
        lib.rms_bwd(ptr(dy), DT[yt], ptr(x), DT[xt], ptr(w), DT[wt], ptr(rstd), ptr(dx), ptr(part), n, rows, cols, form, stream())
        torch.cuda.synchronize()
        dw = part.sum(0)
        low = yt == torch.bfloat16 or xt == torch.bfloat16
        report("rmsnorm %s cols %d x %s w %s y %s" % (name, cols, str(xt)[6:], str(wt)[6:], str(yt)[6:]),
               {"y": rel(y, ref), "dx": rel(dx, x.grad), "dw": rel(dw, w.grad)},
               {"y": 8e-3 if low else 1e-5, "dx": 2e-2 if low else 1e-4, "dw": 2e-2 if low else 1e-4})

# The residual add folded into the norm against torch's add and the norm above, with a gradient
# arriving at the sum (the next residual add) and at the norm's output: the stream fp32 or bf16, the
# branch in the norm output's dtype, Granite's residual scale.
for cols, st, bt, scale in [(2048, torch.float32, torch.bfloat16, 1.0), (896, torch.float32, torch.bfloat16, 1.0),
                            (4096, torch.bfloat16, torch.bfloat16, 1.0), (2048, torch.float32, torch.float32, 1.0),
                            (1536, torch.float32, torch.bfloat16, 0.22), (64, torch.bfloat16, torch.bfloat16, 0.22)]:
    rows = 2 * 2048 + 3
    x = (torch.randn(rows, cols, device="cuda") * 2).to(st).requires_grad_(True)
    b = torch.randn(rows, cols, device="cuda").to(bt).requires_grad_(True)
    w = (1 + 0.2 * torch.randn(cols, device="cuda")).to(st).requires_grad_(True)
    d_sum, dy = torch.randn(rows, cols, device="cuda").to(st), torch.randn(rows, cols, device="cuda").to(bt)
    hr = x + (b * scale if scale != 1.0 else b)
    hf = hr.float()
    ref = (w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(st)).to(bt)
    torch.autograd.backward([hr, ref], [d_sum, dy])
    h, y, rstd = torch.empty_like(hr), torch.empty(rows, cols, device="cuda", dtype=bt), torch.empty(rows, device="cuda")
    dx, db = torch.empty_like(hr), torch.empty(rows, cols, device="cuda", dtype=bt)
    n = lib.partials(rows)
    part = torch.empty(n, cols, device="cuda")
    lib.add_fwd(ptr(x), DT[st], ptr(w), DT[st], ptr(y), DT[bt], ptr(rstd), rows, cols, 1e-6, Form(False, False), ResidualIn(b.data_ptr(), scale, h.data_ptr()),
                stream())
    lib.add_bwd(ptr(dy), DT[bt], ptr(h), DT[st], ptr(w), DT[st], ptr(rstd), ptr(dx), ptr(part), n, rows, cols, Form(False, False),
                ResidualGrad(d_sum.data_ptr(), db.data_ptr(), scale), stream())
    torch.cuda.synchronize()
    low = bt == torch.bfloat16
    report("add + rmsnorm cols %d stream %s branch %s scale %g" % (cols, str(st)[6:], str(bt)[6:], scale),
           {"h": rel(h, hr.detach()), "y": rel(y, ref.detach()), "dx": rel(dx, x.grad), "dbranch": rel(db, b.grad), "dw": rel(part.sum(0), w.grad)},
           {"h": 0.0, "y": 8e-3 if low else 1e-5, "dx": 2e-2 if st == torch.bfloat16 else 1e-5, "dbranch": 2e-2 if low else 1e-5,
            "dw": 2e-2 if low else 1e-4})

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
            lib.glu_fwd(ptr(g), ptr(u), ptr(out), DT[t], n, code, stream())
            dg, du = torch.empty_like(g), torch.empty_like(u)
            lib.glu_bwd(ptr(d), ptr(g), ptr(u), ptr(dg), ptr(du), DT[t], n, code, stream())
            torch.cuda.synchronize()
            low = t == torch.bfloat16
            report("gated %s %s n %d offset %d" % (act, str(t)[6:], n, offset), {"out": rel(out, ref), "du": rel(du, u.grad), "dg": rel(dg, g.grad)},
                   {"out": 8e-3 if low else 1e-6, "du": 8e-3 if low else 1e-6, "dg": 1.6e-2 if low else 1e-5})



def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], -1)


def rotary_ref(x, cos, sin, inverse):
    """x [b, t, heads, hd]; cos, sin [t, hd] fp32: FusedOps' composite, in fp32, rounded once."""
    xf, c, s_ = x.float(), cos[None, :, None, :], sin[None, :, None, :]
    if not inverse:
        return (xf * c + rotate_half(xf) * s_).to(x.dtype)
    u = xf * s_
    h = u.shape[-1] // 2
    return (xf * c + torch.cat([u[..., h:], -u[..., :h]], -1)).to(x.dtype)


def rotary_tables(t, hd):
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device="cuda").float() / hd))
    ang = torch.outer(torch.arange(t, device="cuda").float(), inv)
    ang = torch.cat([ang, ang], -1)
    return ang.cos().contiguous(), ang.sin().contiguous()


for hd in (128, 256, 96, 40):  # half a multiple of 8 takes the 16-byte form; 40 the scalar one
    for t in (torch.float32, torch.bfloat16):
        for inverse in (False, True):
            b, seq, heads = 2, 1024 + 3, 6
            x = torch.randn(b, seq, heads, hd, device="cuda").to(t)
            cos, sin = rotary_tables(seq, hd)
            y = torch.empty_like(x)
            lib.rot(ptr(x), ptr(y), DT[t], ptr(cos), ptr(sin), b * seq, heads, hd, seq, inverse, stream())
            torch.cuda.synchronize()
            low = t == torch.bfloat16
            report("rotary hd %d %s%s" % (hd, str(t)[6:], " inverse" if inverse else ""), {"y": rel(y, rotary_ref(x, cos, sin, inverse))},
                   {"y": 8e-3 if low else 1e-6})

# The loss against autograd in fp32 through the same cap (Granite's divisor, Gemma's soft cap).
for vocab, t, divisor, softcap in [(262144, torch.bfloat16, 1.0, 0.0), (151936, torch.bfloat16, 1.0, 0.0), (32001, torch.bfloat16, 1.0, 0.0),
                                   (32000, torch.float32, 1.0, 0.0), (50257, torch.float32, 1.0, 0.0), (262144, torch.bfloat16, 1.0, 30.0),
                                   (32001, torch.bfloat16, 1.0, 30.0), (32000, torch.float32, 1.0, 30.0), (49160, torch.bfloat16, 8.0, 0.0),
                                   (50257, torch.float32, 2.5, 20.0)]:
    rows = 67
    logits = (torch.randn(rows, vocab, device="cuda") * 40).to(t)
    targets = torch.randint(0, vocab, (rows,), device="cuda")
    targets[3] = -100
    targets[10] = vocab - 1
    lf = logits.float().requires_grad_(True)
    y = lf / divisor
    if softcap > 0:
        y = softcap * torch.tanh(y / softcap)
    ref_loss = torch.nn.functional.cross_entropy(y, targets, ignore_index=-100, reduction="none")
    (ref_loss.sum() * 0.5).backward()
    ref_grad = lf.grad.to(t)
    row_loss = torch.empty(rows, device="cuda")
    g = logits.clone()
    half = torch.full((), 0.5, device="cuda")
    lib.ce(ptr(g), vocab, DT[t], ptr(targets), rows, vocab, -100, ptr(half), Cap(divisor, softcap), ptr(row_loss), stream())
    torch.cuda.synchronize()
    low = t == torch.bfloat16
    report("cross-entropy vocab %d %s divisor %g softcap %g" % (vocab, str(t)[6:], divisor, softcap),
           {"loss": rel(row_loss, ref_loss.detach()), "grad": rel(g, ref_grad)}, {"loss": 1e-5, "grad": 8e-3 if low else 1e-5})

# LoRA dropout's share of the input's gradient against what autograd's form runs: dx +
# native_dropout_backward(dDown @ A, keep, scale); 16-byte packs, odd widths, storage 2 bytes off.
for rows, cols, rank, t, offset in [(4099, 2048, 16, torch.bfloat16, 0), (4099, 896, 16, torch.bfloat16, 0), (4099, 2048, 64, torch.bfloat16, 0),
                                    (4099, 2048, 16, torch.float32, 0), (517, 67, 8, torch.bfloat16, 0), (517, 256, 16, torch.bfloat16, 1)]:
    dx = torch.randn(rows * cols + offset, device="cuda").to(t)[offset:].view(rows, cols)
    d_down, a = torch.randn(rows, rank, device="cuda").to(t), (torch.randn(rank, cols, device="cuda") * 0.2).to(t)
    keep = torch.rand(rows, cols, device="cuda") > 0.1
    ref = dx + torch.ops.aten.native_dropout_backward(d_down @ a, keep, 1 / 0.9)
    lib.lora_drop(ptr(dx), ptr(d_down), ptr(a), ptr(keep), 1 / 0.9, DT[t], rows, cols, rank, stream())
    torch.cuda.synchronize()
    report("lora dropout dx add rows %d cols %d rank %d %s offset %d" % (rows, cols, rank, str(t)[6:], offset), {"dx": rel(dx, ref)},
           {"dx": 8e-3 if t == torch.bfloat16 else 1e-5})

# lora_A's gradient under dropout against the dropped copy and the GEMM it replaces (fp32 out).
for rows, cols, rank, t in [(4099, 2048, 16, torch.bfloat16), (4099, 896, 8, torch.bfloat16), (4099, 2048, 16, torch.float32), (517, 67, 3, torch.bfloat16)]:
    x, d_down = torch.randn(rows, cols, device="cuda").to(t), torch.randn(rows, rank, device="cuda").to(t)
    keep = torch.rand(rows, cols, device="cuda") > 0.1
    ref = d_down.t().float() @ torch.ops.aten.native_dropout_backward(x, keep, 1 / 0.9).float()
    part = torch.empty(lib.drop_chunks(rows, cols), rank, cols, device="cuda")
    lib.drop_da(ptr(x), ptr(keep), 1 / 0.9, ptr(d_down), DT[t], ptr(part), rows, cols, rank, stream())
    report("lora dropout dA rows %d cols %d rank %d %s" % (rows, cols, rank, str(t)[6:]), {"dA": rel(part.sum(0), ref)}, {"dA": 1e-5})

print("%d failed" % len(failures))


def ours_and_before(what, bytes_moved, ours, base_has_it=True):
    """ours(k): a call of library k's kernel. Its row's start (time and achieved bandwidth, and the
    --baseline tree's beside them where that tree has the kernel) and its time in us."""
    us = timed(lambda: ours(lib))
    line = "%-56s %8.1f us %5.2f TB/s" % (what, us, bytes_moved / us / 1e6)
    if base is not None and base_has_it:
        bus = timed(lambda: ours(base))
        line += "   before %8.1f us %5.2f TB/s (%.2fx)" % (bus, bytes_moved / bus / 1e6, bus / us)
    return line, us


def bench(what, bytes_moved, ours, eager, copy_of=None):
    """ours_and_before's row, then the eager ops' time; with copy_of (a tensor), a device copy of
    the same bytes (its elements read and written once): what this size can reach."""
    line, us = ours_and_before(what, bytes_moved, ours)
    eus = timed(eager)
    line += "   eager %8.1f us (%.2fx)" % (eus, eus / us)
    if copy_of is not None:
        dst = torch.empty_like(copy_of)
        cus = timed(lambda: dst.copy_(copy_of))
        line += "   device copy %.2f TB/s" % (2 * copy_of.numel() * copy_of.element_size() / cus / 1e6)
    print(line, flush=True)


SMS = torch.cuda.get_device_properties(0).multi_processor_count
print("kernel at a step's shape                                    time  achieved" + ("   before (--baseline)" if base else "") + "   eager ops it replaces")
bf = torch.bfloat16
for rows, cols, label in [(8192, 1536, "E2B hidden"), (8192, 2048, "Llama-3.2-1B hidden"), (8192, 3840, "Gemma-3-12B hidden"), (8192, 4096, "8B hidden"),
                          (8192 * 8, 256, "E2B q norm (8 heads of 256)"), (8192 * 32, 128, "Qwen3 q norm (32 heads of 128)")]:
    x = torch.randn(rows, cols, device="cuda", dtype=bf)
    w = torch.randn(cols, device="cuda", dtype=bf)
    y, rstd, dx = torch.empty_like(x), torch.empty(rows, device="cuda"), torch.empty_like(x)
    form = Form(False, False)
    eager_fwd = lambda: w * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf)
    bench("rmsnorm fwd %s %dx%d bf16" % (label, rows, cols), 2 * x.numel() * 2,
          lambda k: k.rms_fwd(ptr(x), 1, ptr(w), 1, ptr(y), 1, ptr(rstd), rows, cols, 1e-6, form, stream()), eager_fwd, copy_of=x)
    xr = x.detach().requires_grad_(True)
    wr = w.detach().requires_grad_(True)
    out = wr * (xr.float() * torch.rsqrt(xr.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf)
    bwd_parts = {}
    # dy apart from x: until stop 66 the backward read x as its dy, so half of what it counted as
    # read came from the cache, not from memory (its earlier figures are high by that much).
    dy = torch.randn_like(x)

    def bwd(k, n=None):
        n = n or k.partials(rows)
        part = bwd_parts.setdefault(n, torch.empty(n, cols, device="cuda"))
        k.rms_bwd(ptr(dy), 1, ptr(x), 1, ptr(w), 1, ptr(rstd), ptr(dx), ptr(part), n, rows, cols, form, stream())
        part.sum(0)

    bench("rmsnorm bwd %s %dx%d bf16" % (label, rows, cols), 3 * x.numel() * 2, bwd, lambda: torch.autograd.grad(out, (xr, wr), dy, retain_graph=True))
    # The dw partials (one row a block) against the blocks in flight: this kernel at 1..4 blocks an SM.
    print("    partials: " + "  ".join("%d/SM %.1f us" % (b, timed(lambda: bwd(lib, b * SMS))) for b in (1, 2, 3, 4)), flush=True)
# The residual add folded into the norm against the add kernel plus the norm kernel it replaces
# (both this library's), at Llama-3.2-1B's and Qwen2.5-0.5B's 2048 x 8 tokens: fp32 stream, bf16
# branch and output. Bytes an element: forward 4 + 2 read, 4 + 2 written; backward dy 2, the sum 4
# and its own gradient 4 read, dx 4 and the branch's gradient 2 written.
for rows, cols, label in [(16384, 2048, "Llama-3.2-1B"), (16384, 896, "Qwen2.5-0.5B")]:
    x = torch.randn(rows, cols, device="cuda")
    b, dy = torch.randn(rows, cols, device="cuda", dtype=bf), torch.randn(rows, cols, device="cuda", dtype=bf)
    w = torch.randn(cols, device="cuda")
    h, y, rstd = torch.empty_like(x), torch.empty(rows, cols, device="cuda", dtype=bf), torch.empty(rows, device="cuda")
    d_sum, dx, db = torch.randn_like(x), torch.empty_like(x), torch.empty_like(b)
    part = torch.empty(lib.partials(rows), cols, device="cuda")
    form = Form(False, False)
    folded_f = lambda k=lib: k.add_fwd(ptr(x), 0, ptr(w), 0, ptr(y), 1, ptr(rstd), rows, cols, 1e-6, form, ResidualIn(b.data_ptr(), 1.0, h.data_ptr()), stream())

    def apart_f():
        s_ = torch.add(x, b, out=h)
        lib.rms_fwd(ptr(s_), 0, ptr(w), 0, ptr(y), 1, ptr(rstd), rows, cols, 1e-6, form, stream())

    def folded_b(k=lib):
        k.add_bwd(ptr(dy), 1, ptr(h), 0, ptr(w), 0, ptr(rstd), ptr(dx), ptr(part), part.shape[0], rows, cols, form,
                    ResidualGrad(d_sum.data_ptr(), db.data_ptr(), 1.0), stream())
        part.sum(0)

    def apart_b():  # as autograd ran it: the norm's dx, the stream's gradient added, the branch's cast
        lib.rms_bwd(ptr(dy), 1, ptr(h), 0, ptr(w), 0, ptr(rstd), ptr(dx), ptr(part), part.shape[0], rows, cols, form, stream())
        part.sum(0)
        total = d_sum + dx
        total.to(bf)

    for what, folded, apart, bytes_el in [("fwd", folded_f, apart_f, 12), ("bwd", folded_b, apart_b, 16)]:
        line, fus = ours_and_before("add + rmsnorm %s %s %dx%d" % (what, label, rows, cols), bytes_el * rows * cols, folded,
                                    base is not None and base.add_bwd is not None)
        aus = timed(apart)
        print(line + "   add + norm apart %8.1f us (%.2fx)" % (aus, aus / fus), flush=True)
# LoRA's adapter product added by its GEMM (the fused path's LoraLinear: y.addmm_(down, B^T, 1, s))
# against PEFT's y + linear(down, B) * s, forward and backward, at Llama-3.2-1B's q and k shapes.
for rows, out_f, rank in [(16384, 2048, 16), (16384, 512, 16)]:
    y0 = torch.randn(rows, out_f, device="cuda", dtype=bf)
    down = torch.randn(rows, rank, device="cuda", dtype=bf, requires_grad=True)
    bw = torch.randn(out_f, rank, device="cuda", dtype=bf, requires_grad=True)
    gy = torch.randn(rows, out_f, device="cuda", dtype=bf)

    y_leaf = y0.requires_grad_(True)  # each side starts from a copy of it (the base output), the same cost on both

    def peft():
        (y_leaf.clone() + torch.nn.functional.linear(down, bw) * 2.0).backward(gy)

    def in_gemm():
        y_leaf.clone().addmm_(down, bw.t(), beta=1.0, alpha=2.0).backward(gy)

    pus, gus = timed(peft), timed(in_gemm)
    print("%-56s %8.1f us   PEFT's scale + add %8.1f us (%.2fx)" % ("LoRA B product added in its GEMM %dx%d r%d fwd+bwd" % (rows, out_f, rank), gus, pus, pus / gus),
          flush=True)
# LoRA dropout's share of the input's gradient (model/MixedLinear.cpp) against the three ops it
# replaces (the product, native_dropout_backward, the add), at Llama-3.2-1B's and Qwen2.5-0.5B's
# 2048 x 8 tokens, r16. Bytes an element: dx read and written (2 + 2), the mask read (1).
for rows, cols, rank, label in [(16384, 2048, 16, "Llama-3.2-1B"), (16384, 896, 16, "Qwen2.5-0.5B")]:
    dx = torch.randn(rows, cols, device="cuda", dtype=bf)
    d_down, a = torch.randn(rows, rank, device="cuda", dtype=bf), torch.randn(rank, cols, device="cuda", dtype=bf)
    keep = torch.rand(rows, cols, device="cuda") > 0.05
    line, us = ours_and_before("lora dropout dx add %s %dx%d r%d" % (label, rows, cols, rank), 5 * rows * cols,
                               lambda k: k.lora_drop(ptr(dx), ptr(d_down), ptr(a), ptr(keep), 1 / 0.95, 1, rows, cols, rank, stream()),
                               base is not None and base.lora_drop is not None)
    ous = timed(lambda: dx.add_(torch.ops.aten.native_dropout_backward(d_down @ a, keep, 1 / 0.95)))
    print(line + "   mm + dropout backward + add %8.1f us (%.2fx)" % (ous, ous / us), flush=True)
    # lora_A's gradient: x and the mask read (2 + 1 bytes an element), the partials written and summed.
    x = torch.randn(rows, cols, device="cuda", dtype=bf)
    part = torch.empty(lib.drop_chunks(rows, cols), rank, cols, device="cuda")
    line, us = ours_and_before("lora dropout dA %s %dx%d r%d" % (label, rows, cols, rank), 3 * rows * cols,
                               lambda k: (k.drop_da(ptr(x), ptr(keep), 1 / 0.95, ptr(d_down), 1, ptr(part), rows, cols, rank, stream()), part.sum(0)),
                               base is not None and base.drop_da is not None)
    acc = torch.empty(rank, cols, device="cuda")

    def dropped_gemm(into_fp32):  # as compat::addMatmulInto: addmm's out_dtype where this torch takes it
        dropped = torch.ops.aten.native_dropout_backward(x, keep, 1 / 0.95)
        if into_fp32:
            torch.addmm(acc, d_down.t(), dropped, out_dtype=torch.float32, beta=0.0, out=acc)
        else:
            acc.copy_(d_down.t() @ dropped)

    try:
        dropped_gemm(True)
        into_fp32 = True
    except (TypeError, RuntimeError):
        into_fp32 = False
    gus = timed(lambda: dropped_gemm(into_fp32))
    print(line + "   dropped copy + GEMM%s %8.1f us (%.2fx)" % ("" if into_fp32 else " (bf16 out)", gus, gus / us), flush=True)
for seq, heads, hd, label in [(2048, 8, 256, "E2B q"), (2048, 32, 64, "Llama-3.2-1B q"), (2048, 32, 128, "8B q")]:
    x = torch.randn(4, seq, heads, hd, device="cuda", dtype=bf)
    cos, sin = rotary_tables(seq, hd)
    y = torch.empty_like(x)
    bench("rotary %s %dx%dx%dx%d bf16" % (label, 4, seq, heads, hd), 2 * x.numel() * 2,
          lambda k: k.rot(ptr(x), ptr(y), 1, ptr(cos), ptr(sin), 4 * seq, heads, hd, seq, False, stream()), lambda: rotary_ref(x, cos, sin, False), copy_of=x)
for rows, vocab, softcap, label in [(1024, 262144, 30.0, "Gemma 4 chunk, soft cap 30"), (512, 262144, 0.0, "Gemma 3 chunk"),
                                    (1024, 128256, 0.0, "Llama-3 chunk")]:
    logits = torch.randn(rows, vocab, device="cuda", dtype=bf)
    targets = torch.randint(0, vocab, (rows,), device="cuda")
    row_loss = torch.empty(rows, device="cuda")
    unit = torch.ones((), device="cuda")
    capped = (lambda z: softcap * torch.tanh(z / softcap)) if softcap else (lambda z: z)
    bench("cross-entropy %s %dx%d bf16 (in place)" % (label, rows, vocab), 3 * logits.numel() * 2,
          lambda k: k.ce(ptr(logits), vocab, 1, ptr(targets), rows, vocab, -100, ptr(unit), Cap(1.0, softcap), ptr(row_loss), stream()),
          lambda: torch.nn.functional.cross_entropy(capped(logits.float()), targets))
for n, label in [(8192 * 6144, "E2B MLP (gelu tanh)"), (8192 * 8192, "Llama-3.2-1B MLP (silu)")]:
    code = 1 if "gelu" in label else 0
    g, u, d = (torch.randn(n, device="cuda", dtype=bf) for _ in range(3))
    out, dg, du = torch.empty_like(g), torch.empty_like(g), torch.empty_like(g)
    act = (lambda t: torch.nn.functional.gelu(t, approximate="tanh")) if code else torch.nn.functional.silu
    bench("gated fwd %s %d bf16" % (label, n), 3 * n * 2, lambda k: k.glu_fwd(ptr(g), ptr(u), ptr(out), 1, n, code, stream()), lambda: act(g) * u)
    bench("gated bwd %s %d bf16" % (label, n), 5 * n * 2, lambda k: k.glu_bwd(ptr(d), ptr(g), ptr(u), ptr(dg), ptr(du), 1, n, code, stream()),
          lambda: (act(g) * d, d * u), copy_of=g)
sys.exit(1 if failures else 0)
