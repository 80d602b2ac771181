#!/usr/bin/env python3
"""Ranks the CUDA kernels of a Kineto/Chrome trace (bench_probe_overhead --trace, or
torch.profiler's export_chrome_trace) by total time, per step, with each one's share of all kernel
time. Kernel names are shortened to their first 70 characters. Then the same time by category
(GEMMs, attention, our kernels, the optimizer, ATen element-wise work, casts and copies, fills,
reductions, indexing, Triton, other), so a change shows where a step's time went; with --step-ms
(the step's wall time) also how much of the step the card was idle, which a launch-bound step shows.

    python3 tests/bench/trace_top_kernels.py TRACE.json --steps 2 [--top 15] [--label NAME] [--step-ms MS]
"""
import argparse, collections, json

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--steps", type=int, default=1, help="steps the trace holds")
ap.add_argument("--top", type=int, default=15)
ap.add_argument("--label", default="")
ap.add_argument("--step-ms", type=float, default=0, help="the step's wall time, for the card's idle share")
args = ap.parse_args()

# First match wins; names as CUDA, cuBLAS, CUTLASS, ATen and Triton print them.
CATEGORIES = [
    ("gemm", ("nvjet", "gemm", "cutlass", "xmma", "cublas", "Kernel2", "splitKreduce")),
    ("attention", ("flash", "fmha", "attention", "sdpa", "softmax")),
    ("ours", ("pb::kernels",)),
    ("optimizer", ("multi_tensor_apply", "FusedAdam", "fused_adam")),
    ("casts and copies", ("copy", "cast", "Cast")),
    ("fills", ("FillFunctor", "FillFunc", "fill")),
    ("reductions", ("reduce_kernel", "Reduce", "norm_kernel")),
    ("indexing", ("index", "gather", "scatter", "Index", "sort", "topk", "radix")),
    ("triton", ("triton",)),
    ("aten element-wise", ("elementwise", "at::native")),
]


def category(name):
    for label, keys in CATEGORIES:
        if any(k in name for k in keys):
            return label
    return "other"
events = json.load(open(args.trace))
events = events["traceEvents"] if isinstance(events, dict) else events
total, count = collections.Counter(), collections.Counter()
for e in events:
    if e.get("cat") == "kernel" and "dur" in e:
        total[e["name"]] += e["dur"]
        count[e["name"]] += 1
busy = sum(total.values())
if not busy:
    raise SystemExit("%s: no CUDA kernels in this trace" % args.trace)
print(json.dumps({"label": args.label, "kernel_ms_per_step": busy / 1000 / args.steps, "kernels_per_step": sum(count.values()) / args.steps}))
print("%9s %6s %6s  %s" % ("ms/step", "share", "calls", "kernel"))
for name, us in total.most_common(args.top):
    print("%9.2f %5.1f%% %6d  %s" % (us / 1000 / args.steps, 100 * us / busy, count[name] / args.steps, name[:70]))

by, calls = collections.Counter(), collections.Counter()
for name, us in total.items():
    by[category(name)] += us
    calls[category(name)] += count[name]
print("%9s %6s %7s %9s  %s" % ("ms/step", "share", "calls", "us/call", "category"))
for label, us in by.most_common():
    print("%9.2f %5.1f%% %7d %9.1f  %s" % (us / 1000 / args.steps, 100 * us / busy, calls[label] / args.steps, us / calls[label], label))
print(json.dumps({"label": args.label, "categories_ms_per_step": {k: round(v / 1000 / args.steps, 3) for k, v in by.most_common()}}))
if args.step_ms > 0:
    kernel_ms = busy / 1000 / args.steps
    print("step %.2f ms: kernels %.2f ms (%.1f%%), the card idle %.1f%% of the step; %.1f us per kernel launched in the step"
          % (args.step_ms, kernel_ms, 100 * kernel_ms / args.step_ms, max(0.0, 100 * (1 - kernel_ms / args.step_ms)),
             1000 * args.step_ms / (sum(count.values()) / args.steps)))

