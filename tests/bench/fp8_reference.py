#!/usr/bin/env python3
"""Issue 31: the plain-PyTorch float8 reference. Llama-3.1-8B's widths (LAYERS decoder layers,
default 8), full fine-tuning, seq 4096, micro-batch 1: fp32 master weights, autocast bf16 around
the forward, RMSNorm in fp32 as LlamaRMSNorm, rotary, SDPA (causal, grouped heads), SwiGLU, an fp32
cross-entropy over the bf16 logits, gradient clipping at 1.0 and fused AdamW, in eager PyTorch (no
torch.compile, no torchao). Under fp8 each projection's three matmuls run through torch._scaled_mm
with PilotBench's rowwise recipe (model/Fp8Linear.cpp): e4m3 throughout, every operand scaled per
row along the contracted dimension by amax / 448 (a true division, amax clamped at 1e-12), so
  forward  Y  = X W^T:   X per token (over in),   W per output row (over in)
  input    dX = dY W:    dY per token (over out), W per input column (over out)
  weight   dW = dY^T X:  dY per output (over tokens), X per input feature (over tokens)
with bf16 outputs. Everything else is the bf16 step. Both precisions are timed in one run (CUDA
events, median step after warm-up), then each precision's ratio to bf16.

    python3 tests/bench/fp8_reference.py [--layers 8] [--seq 4096] [--steps 10] [--gemms] [--json FILE]

--gemms also times each projection's GEMMs (forward, dX, dW) alone, bf16 against rowwise float8 on
random data, as the ceiling of what float8 can gain on these shapes.
"""
import argparse, json, math, statistics, sys

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
BF16 = torch.bfloat16


def quant_rows(t):
    """t [R, C] scaled per row over its columns: float8 values and fp32 scales [R, 1]."""
    t = t.float()
    scale = t.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / torch.full((1, 1), E4M3_MAX, device=t.device)
    return (t / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), scale


def quant_cols_t(t):
    """t [R, C] scaled per column over its rows, returned transposed: float8 [C, R] and scales [C, 1]."""
    t = t.float()
    scale = t.abs().amax(dim=0, keepdim=True).clamp(min=1e-12) / torch.full((1, 1), E4M3_MAX, device=t.device)
    return (t / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3).t().contiguous(), scale.t()


def scaled_mm(a, a_scale, b_t, b_scale):
    """a [M, K] times b_t [N, K] transposed, each float8 with scales [M, 1] and [N, 1], out in bf16."""
    if a.is_cuda:
        return torch._scaled_mm(a, b_t.t(), scale_a=a_scale, scale_b=b_scale.t(), out_dtype=BF16)
    return ((a.float() @ b_t.float().t()) * a_scale * b_scale.t()).to(BF16)  # CPU: only to check this script


class Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(BF16)
        xq, sx = quant_rows(x2)
        wq, sw = quant_rows(w)
        ctx.save_for_backward(x2, w)
        return scaled_mm(xq, sx, wq, sw).view(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        x2, w = ctx.saved_tensors
        g = gy.reshape(-1, w.shape[0]).to(BF16)
        gq, sg = quant_rows(g)
        wtq, swt = quant_cols_t(w)  # W^T [in, out] per input column
        gx = scaled_mm(gq, sg, wtq, swt)
        gtq, sgt = quant_cols_t(g)  # dY^T [out, tokens]
        xtq, sxt = quant_cols_t(x2)  # X^T [in, tokens]
        gw = scaled_mm(gtq, sgt, xtq, sxt)
        return gx.view(*gy.shape[:-1], w.shape[1]), gw.float()


class Linear(torch.nn.Module):
    def __init__(self, inp, out, fp8, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out, inp, device=device).normal_(0, 0.02))
        self.fp8 = fp8

    def forward(self, x):
        return Fp8LinearFn.apply(x, self.weight) if self.fp8 else F.linear(x, self.weight)


def rms_norm(x, weight, eps=1e-5):
    dtype = x.dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, a, fp8, device):
        super().__init__()
        h, hd = a.hidden, a.head_dim
        self.heads, self.kv, self.hd = a.heads, a.kv_heads, hd
        self.q, self.k = Linear(h, a.heads * hd, fp8, device), Linear(h, a.kv_heads * hd, fp8, device)
        self.v, self.o = Linear(h, a.kv_heads * hd, fp8, device), Linear(a.heads * hd, h, fp8, device)
        self.gate, self.up = Linear(h, a.intermediate, fp8, device), Linear(h, a.intermediate, fp8, device)
        self.down = Linear(a.intermediate, h, fp8, device)
        self.n1 = torch.nn.Parameter(torch.ones(h, device=device))
        self.n2 = torch.nn.Parameter(torch.ones(h, device=device))

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = rms_norm(x, self.n1)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        c, s = cos.to(q.dtype), sin.to(q.dtype)
        q, k = q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.heads)
        x = x + self.o(att.transpose(1, 2).reshape(b, t, self.heads * self.hd))
        h = rms_norm(x, self.n2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self, a, fp8, device):
        super().__init__()
        self.embed = torch.nn.Parameter(torch.empty(a.vocab, a.hidden, device=device).normal_(0, 0.02))
        self.layers = torch.nn.ModuleList(Layer(a, fp8, device) for _ in range(a.layers))
        self.norm = torch.nn.Parameter(torch.ones(a.hidden, device=device))
        self.lm_head = torch.nn.Parameter(torch.empty(a.vocab, a.hidden, device=device).normal_(0, 0.02))  # untied, bf16 under fp8 too
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, a.head_dim, 2, device=device).float() / a.head_dim))
        freqs = torch.outer(torch.arange(a.seq, device=device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, tokens, targets):
        x = F.embedding(tokens, self.embed)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        logits = F.linear(rms_norm(x, self.norm), self.lm_head)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def timed_run(a, fp8, device):
    torch.manual_seed(a.seed)
    model = Model(a, fp8, device)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, fused=device.type == "cuda")
    g = torch.Generator(device=device).manual_seed(a.seed)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device, generator=g)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    losses, times = [], []

    def step():
        with torch.autocast(device.type, dtype=BF16):
            loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=device.type == "cuda")
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    for _ in range(a.warmup):
        losses.append(step())
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(a.steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        losses.append(step())
        if cuda:
            end.record()
            times.append((start, end))
    if cuda:
        torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in times] if cuda else [float("nan")]
    med = statistics.median(ms)
    out = {"precision": "fp8-rowwise" if fp8 else "bf16-mixed", "median_ms": med, "mean_ms": statistics.fmean(ms),
           "min_ms": min(ms), "max_ms": max(ms), "tokens_per_s": a.batch * a.seq * 1000.0 / med,
           "peak_bytes": torch.cuda.max_memory_allocated() if cuda else 0, "losses": [float(l) for l in losses]}
    del model, opt, params
    if cuda:
        torch.cuda.empty_cache()
    return out


def bench(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


def gemms(a, device):
    """Each projection's three GEMMs of one layer at `tokens` rows, bf16 (as F.linear) against _scaled_mm rowwise."""
    n = a.batch * a.seq
    h, q, kv, i = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim, a.intermediate
    rows = []
    for name, inp, out in (("q", h, q), ("k", h, kv), ("v", h, kv), ("o", q, h), ("gate", h, i), ("up", h, i), ("down", i, h)):
        for kind, M, K, N in (("fwd", n, inp, out), ("dX", n, out, inp), ("dW", out, n, inp)):
            A = torch.randn(M, K, device=device, dtype=BF16)
            B = torch.randn(N, K, device=device, dtype=BF16)
            Aq, sA = quant_rows(A)
            Bq, sB = quant_rows(B)
            t16 = bench(lambda: torch.mm(A, B.t()))
            t8 = bench(lambda: scaled_mm(Aq, sA, Bq, sB))
            rows.append({"proj": name, "gemm": kind, "M": M, "K": K, "N": N, "bf16_ms": t16, "fp8_ms": t8,
                         "bf16_tflops": 2e-9 * M * K * N / t16, "fp8_tflops": 2e-9 * M * K * N / t8})
            del A, B, Aq, Bq
    # Whether rowwise scaling can write fp32 (a weight gradient straight into an fp32 master's dtype).
    A, sA = quant_rows(torch.randn(256, 256, device=device))
    try:
        torch._scaled_mm(A, A.t(), scale_a=sA, scale_b=sA.t(), out_dtype=torch.float32)
        print("rowwise _scaled_mm with fp32 output: supported")
    except Exception as e:  # noqa: BLE001
        print("rowwise _scaled_mm with fp32 output: refused (%s)" % str(e).splitlines()[0][:160])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--modes", default="bf16,fp8")
    ap.add_argument("--gemms", action="store_true")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    device = torch.device(a.device)
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "shape": {k: getattr(a, k) for k in ("layers", "seq", "batch", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")},
              "runs": []}
    for mode in a.modes.split(","):
        r = timed_run(a, mode == "fp8", device)
        result["runs"].append(r)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "losses"}), flush=True)
    base = next((r for r in result["runs"] if r["precision"] == "bf16-mixed"), None)
    for r in result["runs"]:
        if base and r is not base:
            r["speedup_over_bf16"] = base["median_ms"] / r["median_ms"]
            print("reference %s over bf16-mixed: %.3fx tokens/s (%.2f / %.2f ms)" % (r["precision"], r["speedup_over_bf16"], base["median_ms"], r["median_ms"]))
    if a.gemms and device.type == "cuda":
        rows = gemms(a, device)
        result["gemms"] = rows
        print("%-5s %-4s %6s %6s %6s %8s %8s %7s %7s %6s" % ("proj", "gemm", "M", "K", "N", "bf16 ms", "fp8 ms", "bf16 TF", "fp8 TF", "ratio"))
        for g in rows:
            print("%-5s %-4s %6d %6d %6d %8.3f %8.3f %7.0f %7.0f %6.2f" % (g["proj"], g["gemm"], g["M"], g["K"], g["N"], g["bf16_ms"], g["fp8_ms"],
                                                                          g["bf16_tflops"], g["fp8_tflops"], g["bf16_ms"] / g["fp8_ms"]))
        t16, t8 = sum(g["bf16_ms"] for g in rows), sum(g["fp8_ms"] for g in rows)
        print("one layer's projection GEMMs: bf16 %.3f ms, fp8 %.3f ms, ratio %.3f; x%d layers: %.2f / %.2f ms" % (t16, t8, t16 / t8, a.layers, a.layers * t16, a.layers * t8))
    if a.json:
        json.dump(result, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
