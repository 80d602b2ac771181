#!/usr/bin/env python3
"""One JSON row of an H200 bench from a pilot's last --jsonl line (stdin) and its --memory-snapshot
file: the given fields, then step time, throughput, the overall peak, the training steps' peak
(warm-up and measured, not model construction) and the estimator's error against it, the whole
run's peak error and each phase's [estimated, measured] bytes.

    pilotbench-cli pilot ... --jsonl --memory-snapshot SNAP | tail -1 | python3 tests/bench/pilot_row.py SNAP '{"config": "x"}'
"""
import json, sys

d = json.loads(sys.stdin.read())
row = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
snap = json.load(open(sys.argv[1]))
e = snap.get("estimate", {}).get("peak_allocated_bytes")
m = max(d.get("peak_allocated_by_phase", {}).get(p, 0) for p in ("warmup", "train"))
row.update({"step_ms": d.get("step_time_mean_ms"), "tokens_per_s": d.get("tokens_per_s"), "mfu": d.get("mfu"),
            "peak_allocated_bytes": d.get("peak_allocated_bytes"), "training_peak_bytes": m, "estimated_bytes": e,
            "estimate_error_pct": round(100 * (e - m) / m, 2) if e and m else None,
            "run_peak_error_pct": round(snap.get("run_peak", {}).get("difference_percent", float("nan")), 2),
            "phases": {p["phase"]: [p.get("estimated_bytes"), p.get("measured_bytes")] for p in snap.get("phases", [])},
            "verdict": d.get("verdict"), "message": d.get("message")})
print(json.dumps(row))
