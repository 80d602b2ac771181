"""The fused loss's three GEMMs per chunk (logits = h W^T; grad h = G W; grad W += G^T h in fp32) at
an unaligned vocabulary, on a card, without building PilotBench (issue 28, Granite's head), in four
layouts: the logits rows contiguous (stop 53); padded apart to a multiple of 8 (stop 54); the
vocabulary's first multiple-of-8 rows in GEMMs of their own and its last few in tiny ones, no copy
(model/LinearCrossEntropy.cpp now); and, for comparison, a copy of the weight padded with zero
rows (every GEMM dimension a multiple of 8, as Inductor's pad_mm does). Prints each layout's time
for one step's chunks and which kernels cuBLAS picked, and checks that every layout's results equal
the contiguous one's to bf16 rounding.
    python3 tests/bench/h200_head_gemm_check.py [--vocab 49159 --hidden 4096 --tokens 8192 --chunk 5461]
"""
import argparse, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_library import rel, report, failures, timed  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--vocab", type=int, default=49159)  # Granite 3.3
ap.add_argument("--hidden", type=int, default=4096)
ap.add_argument("--tokens", type=int, default=8192)  # seq 2048 x micro-batch 4
ap.add_argument("--chunk", type=int, default=5461)   # linearCrossEntropyChunkTokens at this vocabulary, bf16
ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
a = ap.parse_args()
V, H, N, C = a.vocab, a.hidden, a.tokens, a.chunk
LD = (V + 7) // 8 * 8
torch.manual_seed(0)
dev = "cuda"
h = (torch.randn(N, H, device=dev) * 0.5).bfloat16()
w32 = torch.randn(V, H, device=dev) * 0.02


def add_into(acc, x, y, accumulate):
    """acc (fp32) += x @ y inside the GEMM, as compat::addMatmulInto does on 2.11."""
    torch.ops.aten.addmm.dtype_out(acc, x, y, torch.float32, beta=1.0 if accumulate else 0.0, alpha=1.0, out=acc)


def step(layout):
    """One step's chunks in `layout`; the softmax kernel between the GEMMs is left out (the same
    in all three): the logits stand in for their own gradient."""
    pad = layout == "padded weight"
    if pad:
        wc = torch.empty(LD, H, device=dev, dtype=torch.bfloat16)
        wc[:V].copy_(w32)
        wc[V:].zero_()
    else:
        wc = w32.bfloat16()
    gh = torch.empty(N, H, device=dev, dtype=torch.bfloat16)
    gw = torch.empty(wc.shape[0], H, device=dev, dtype=torch.float32)
    lead = V // 8 * 8
    for begin in range(0, N, C):
        x = h[begin:begin + C]
        if layout == "lead and tail":
            logits = torch.empty(x.shape[0], LD, device=dev, dtype=torch.bfloat16)[:, :V]
            torch.mm(x, wc[:lead].t(), out=logits[:, :lead])
            torch.mm(x, wc[lead:].t(), out=logits[:, lead:])
            out = gh[begin:begin + C]
            torch.mm(logits[:, lead:], wc[lead:], out=out)
            out.addmm_(logits[:, :lead], wc[:lead])
            add_into(gw[:lead], logits[:, :lead].t(), x, begin > 0)
            add_into(gw[lead:], logits[:, lead:].t(), x, begin > 0)
            continue
        if layout == "rows padded apart":
            full = torch.empty(x.shape[0], LD, device=dev, dtype=torch.bfloat16)[:, :V]
            torch.mm(x, wc.t(), out=full)
        else:
            full = x @ wc.t()
        torch.mm(full, wc, out=gh[begin:begin + C])
        add_into(gw, full.t(), x, begin > 0)
    return gh, gw[:V]


layouts = ["contiguous", "rows padded apart", "lead and tail", "padded weight"]
rows, results = [], {}
for layout in layouts:
    results[layout] = step(layout)
    us = timed(lambda: step(layout), reps=10)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(layout)
        torch.cuda.synchronize()
    gemms = sorted({e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                    and ("gemm" in e.name.lower() or "nvjet" in e.name or "cutlass" in e.name)})
    flops = 3 * 2 * N * H * V
    rows.append({"layout": layout, "ms": us / 1000, "tflops": flops / us / 1e6, "kernels": gemms})
    print("%-20s %8.2f ms  %6.0f TFLOP/s  %s" % (layout, us / 1000, flops / us / 1e6, "; ".join(gemms)), flush=True)

base = results["contiguous"]
for layout in layouts[1:]:
    gh, gw = results[layout]
    report("%s equals contiguous" % layout, {"grad_h": rel(gh, base[0]), "grad_w": rel(gw, base[1])}, {"grad_h": 1e-2, "grad_w": 1e-2})
print("time against contiguous: " + ", ".join("%s %.3f" % (r["layout"], r["ms"] / rows[0]["ms"]) for r in rows[1:]))
json.dump({"card": torch.cuda.get_device_name(), "torch": torch.__version__, "vocab": V, "hidden": H, "tokens": N, "chunk": C, "rows": rows,
           "failures": failures}, open(os.path.join(a.out, "head_gemm.json"), "w"), indent=1)
sys.exit(1 if failures else 0)
