#!/usr/bin/env bash
# Issue 14 on one H200, from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_watch.sh
# A real Hugging Face Trainer fine-tune (Llama-3.2-1B shape, random weights, seq 2048, micro-batch 8,
# bf16, fused AdamW) run plainly and under `pilotbench-cli watch` with the probe's callback, eager
# and with torch.compile, beside PilotBench's own pilot of the same config. The plain and watched
# eager runs give the cost of watching as a ratio of the job's own step times, in one call.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/resources/python${PYTHONPATH:+:$PYTHONPATH}
CLI=build-cuda/app/pilotbench-cli
STEPS=${STEPS:-30}
start=$(date +%s)
PB_TARGETS="pilotbench-cli" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "build_seconds=$(( $(date +%s) - start ))"
$CLI --version
$CLI config new --preset llama-3.2-1b --out /tmp/l1b.json --set train.micro_batch=8 --set train.seq_len=2048 > /dev/null
job=(python3 tests/bench/hf_trainer_watch.py --config /tmp/l1b.json --steps "$STEPS" --probe)

run() { # name, then the command
  local name=$1; shift
  local s=$(date +%s)
  timeout 400 "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  echo "$name exit=$? in $(( $(date +%s) - s )) s"
}
# The job alone, then watched (the probe is inert without PILOTBENCH_PROBE), then alone again so an
# order effect shows; the ratio uses the mean of the two plain runs.
[ "${MODE:-all}" = verify ] || run plain1 "${job[@]}"
run watched_eager $CLI watch --config /tmp/l1b.json --jsonl --db /tmp/w.db --warmup 3 -- "${job[@]}"
[ "${MODE:-all}" = verify ] || run plain2 "${job[@]}"
if [ "${MODE:-all}" = verify ]; then
  # The watched run as evidence: compare takes its measured step on the H200 it matched.
  $CLI compare --config /tmp/l1b.json --db /tmp/w.db --stack cuda --json > "$OUT/compare.json" 2> "$OUT/compare.err"
  python3 - "$OUT/compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
rows = [r for r in c["rows"] if r["card"].startswith("h200") and r["gpus"] == 1]
print("compare: pilot run", c["pilot_run_id"], "on", c["pilot_device"], "| h200 x1:", rows[0]["step_time_ms"], "ms", rows[0]["step_time_basis"])
PY
  $CLI history --db /tmp/w.db --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]; s=r["summary"]; print("watch run env:", s.get("environment"), "| catalog match:", s.get("catalog_match", {}).get("message"), "| predicted peak", s.get("predicted_peak_allocated_bytes"), "measured", s.get("peak_allocated_bytes"))'
fi
if [ "${MODE:-all}" = all ]; then
  run watched_compile $CLI watch --config /tmp/l1b.json --jsonl --db /tmp/w.db --warmup 3 -- "${job[@]}" --compile
  run pilot $CLI pilot --config /tmp/l1b.json --device cuda:0 --steps 10 --warmup 3 --jsonl --db /tmp/w.db
fi
# A real CUDA out-of-memory: the verdict does-not-fit, exit 3.
run oom $CLI watch --jsonl --db /tmp/w.db -- python3 -c "import torch; torch.ones(1, device='cuda'); x = torch.empty(400 * 2**30, dtype=torch.uint8, device='cuda')"
grep -h '"event":"summary"' "$OUT/oom.out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("oom:", d["verdict"], "-", d["message"][:200])'

python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def last_json(path, event=None):
    rows = []
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    if event:
        rows = [r for r in rows if r.get("event") == event]
    return rows[-1] if rows else {}
g = 2 ** 30
p1, p2 = [last_json(f"{out}/{n}.out") if os.path.exists(f"{out}/{n}.out") else {} for n in ("plain1", "plain2")]
for name in ("watched_eager", "watched_compile"):
    if not os.path.exists(f"{out}/{name}.out"):
        continue
    w = last_json(f"{out}/{name}.out", "summary")
    own = last_json(f"{out}/{name}.err")  # the job's own line went to stderr under --jsonl
    print(f"{name}: watch {w.get('step_time_mean_ms', 0):.1f} ms/step, {w.get('tokens_per_s', 0):.0f} tok/s, "
          f"peak alloc {w.get('peak_allocated_bytes', 0)/g:.2f} GiB, device used {w.get('peak_device_used_bytes', 0)/g:.2f} GiB "
          f"({w.get('device_source')}, steps from {w.get('step_source')}, {w.get('measured_steps')} measured); "
          f"job says {own.get('step_ms', 0):.1f} ms/step, {own.get('tokens_per_s', 0):.0f} tok/s, peak alloc {own.get('peak_allocated_bytes', 0)/g:.2f} GiB, "
          f"device used {own.get('device_used_bytes', 0)/g:.2f} GiB; verdict {w.get('verdict')} {w.get('message', '')}")
    if name == "watched_eager" and p1 and p2:
        plain = (p1["step_ms"] + p2["step_ms"]) / 2
        print(f"cost of watching: job step {own.get('step_ms', 0):.2f} ms watched / {plain:.2f} ms plain "
              f"(plain runs {p1['step_ms']:.2f} and {p2['step_ms']:.2f}) = ratio {own.get('step_ms', 0) / plain:.4f}")
p = last_json(f"{out}/pilot.out", "summary") if os.path.exists(f"{out}/pilot.out") else {}
if p: print(f"pilotbench pilot: {p.get('step_time_mean_ms', 0):.1f} ms/step, {p.get('tokens_per_s', 0):.0f} tok/s, "
      f"peak alloc {p.get('peak_allocated_bytes', 0)/g:.2f} GiB, device used {p.get('peak_device_used_bytes', 0)/g:.2f} GiB")
PY
