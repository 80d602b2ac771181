#!/usr/bin/env python3
"""Where a --memory-snapshot's peak sits layer by layer: the tensors made in the step and live at
the peak (the snapshot's "live" list, each with the decoder layer that made it), summed per layer
and part, with the estimate's parts beside the measured ones. Where the snapshot carries the
estimate's saved_per_block, each layer's row also shows what the estimator says the block keeps for
its backward against the activations its forward made that are still live (equal for a block wholly
below the peak's point; a block at or above it holds transients, or has already freed its own). On a
card, where the estimate and the measured peak differ, the rows show whether one block kind (a global
layer, a shared one, a sparse one) or the head holds the difference.

    python3 tests/bench/snapshot_layers.py SNAPSHOT.json [--scopes]

--scopes also splits each layer by model scope (attention, mlp, norm, ...). Layer "-" is what no
decoder block made: the embedding, the head and loss, the rotary tables, the optimizer's work.
"""
import argparse, collections, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("snapshot")
ap.add_argument("--scopes", action="store_true", help="split each layer by model scope")
args = ap.parse_args()

with open(args.snapshot) as f:
    snap = json.load(f)
measured = snap["measured"]
live = measured.get("live")
if live is None:
    sys.exit("%s has no live list (written by a pilotbench-cli older than the per-layer snapshot)" % args.snapshot)

MiB = 1024.0 * 1024.0
parts = sorted({t["part"] for t in live})
rows = collections.defaultdict(lambda: collections.Counter())
for t in live:
    layer = t.get("layer", -1)
    key = (layer, t["scope"]) if args.scopes else (layer, "")
    rows[key][t["part"]] += t["bytes"]

print("peak %.2f MiB at %s (%s, step %d); %d live tensors made in the step" % (
    measured["peak_allocated_bytes"] / MiB, measured["peak_site"], measured["peak_phase"], measured["step"], len(live)))
kept = snap.get("estimate", {}).get("saved_per_block") or []
forwardMade = collections.Counter()
for t in live:
    if t["phase"] == "forward" and t["part"] == "activations" and t.get("layer", -1) >= 0:
        forwardMade[t["layer"]] += t["bytes"]
header = "%-6s %-22s" % ("layer", "scope" if args.scopes else "") + "".join("%14s" % p for p in parts) + "%14s" % "total MiB"
if kept:
    header += "%16s%16s%12s" % ("fwd act. MiB", "est. kept MiB", "est-meas")
print(header)
for (layer, scope), counts in sorted(rows.items(), key=lambda kv: (kv[0][0] < 0, kv[0][0], kv[0][1])):
    line = "%-6s %-22s" % ("-" if layer < 0 else layer, scope[:22]) + "".join("%14.3f" % (counts[p] / MiB) for p in parts) + \
           "%14.3f" % (sum(counts.values()) / MiB)
    first = not args.scopes or scope == min(s for (l, s) in rows if l == layer)
    if kept and 0 <= layer < len(kept) and first:
        line += "%16.3f%16.3f%+12.3f" % (forwardMade[layer] / MiB, kept[layer] / MiB, (kept[layer] - forwardMade[layer]) / MiB)
    print(line)
totals = collections.Counter()
for counts in rows.values():
    totals.update(counts)
print("%-6s %-22s" % ("all", "") + "".join("%14.3f" % (totals[p] / MiB) for p in parts) + "%14.3f" % (sum(totals.values()) / MiB))
if "comparison" in snap:
    print("\nthe step's parts, estimated against measured (resident tensors included):")
    for row in snap["comparison"]:
        print("  %-28s %12.3f %12.3f %+12.3f MiB" % (row["part"], row["estimated_bytes"] / MiB, row["measured_bytes"] / MiB,
                                                    row["difference_bytes"] / MiB))
