#!/usr/bin/env python3
"""Ranks the CUDA kernels of a Kineto/Chrome trace (bench_probe_overhead --trace, or
torch.profiler's export_chrome_trace) by total time, per step, with each one's share of all kernel
time. Kernel names are shortened to their first 70 characters. Then the same time by category
(GEMMs, attention, our kernels, the optimizer, ATen element-wise work, casts and copies, fills,
reductions, indexing, Triton, other), so a change shows where a step's time went; with --step-ms
(the step's wall time) also how much of the step the card was idle, which a launch-bound step shows.

With --by-op N, the kernel time is also grouped by what launched it: the innermost user scope
(our RECORD_USER_SCOPE names, e.g. pb.mlp), the autograd node in the backward, and the ATen op.

    python3 tests/bench/trace_top_kernels.py TRACE.json --steps 2 [--top 15] [--label NAME] [--step-ms MS] [--by-op 40]
"""
import argparse, collections, json

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--steps", type=int, default=1, help="steps the trace holds")
ap.add_argument("--top", type=int, default=15)
ap.add_argument("--label", default="")
ap.add_argument("--step-ms", type=float, default=0, help="the step's wall time, for the card's idle share")
ap.add_argument("--by-op", type=int, default=0, metavar="N",
                help="also the N costliest (scope, autograd node, launching op) groups, from each launch's enclosing CPU events")
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



def launching_ops(events):
    """correlation id -> (scope, autograd node, innermost op) of the CPU events enclosing each launch."""
    per_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat = e.get("cat", "")
        if cat in ("cpu_op", "user_annotation"):
            per_thread[(e.get("pid"), e.get("tid"))].append((float(e["ts"]), 0, float(e["ts"]) + float(e.get("dur", 0)), e))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            per_thread[(e.get("pid"), e.get("tid"))].append((float(e["ts"]), 1, float(e["ts"]), e))
    found = {}
    for items in per_thread.values():
        items.sort(key=lambda t: (t[0], t[1], -t[2]))
        stack = []
        for ts, kind, end, e in items:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if kind == 0:
                stack.append((end, e))
                continue
            scope = node = op = ""
            for _, o in stack:
                name = o.get("name", "")
                if name.startswith("pb.layer."):
                    continue  # a decoder block's index: group by what runs inside it, not by layer
                if o.get("cat") == "user_annotation" or name.startswith("pb."):
                    scope = name
                elif name.startswith("autograd::engine::evaluate_function: "):
                    node = name.split(": ", 1)[1]
                else:
                    op = name
            found[e["args"]["correlation"]] = (scope, node, op)
    return found


if args.by_op > 0:
    launched = launching_ops(events)
    group, group_calls, group_kernel = collections.Counter(), collections.Counter(), {}
    for e in events:
        if e.get("cat") == "kernel" and "dur" in e:
            key = launched.get(e.get("args", {}).get("correlation"), ("?", "", ""))
            group[key] += e["dur"]
            group_calls[key] += 1
            group_kernel.setdefault(key, collections.Counter())[e["name"]] += e["dur"]
    print("%9s %6s %6s  %-22s %-28s %-26s %s" % ("ms/step", "share", "calls", "scope", "autograd node", "op", "its costliest kernel"))
    for key, us in group.most_common(args.by_op):
        scope, node, op = key
        print("%9.2f %5.1f%% %6d  %-22s %-28s %-26s %s" % (us / 1000 / args.steps, 100 * us / busy, group_calls[key] / args.steps,
                                                          scope[:22], node[:28], op[:26], group_kernel[key].most_common(1)[0][0][:40]))
