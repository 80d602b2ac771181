#!/usr/bin/env python3
"""Ranks the CUDA kernels of a Kineto/Chrome trace (bench_probe_overhead --trace, or
torch.profiler's export_chrome_trace) by total time, per step, with each one's share of all kernel
time. Kernel names are shortened to their first 70 characters.

    python3 tests/bench/trace_top_kernels.py TRACE.json --steps 2 [--top 15] [--label NAME]
"""
import argparse, collections, json

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--steps", type=int, default=1, help="steps the trace holds")
ap.add_argument("--top", type=int, default=15)
ap.add_argument("--label", default="")
args = ap.parse_args()
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
