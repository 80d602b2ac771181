#!/usr/bin/env bash
# The scaling step (issue 10) on two H200s of one host (device kind nvidia-h200-x2), from the
# repository root with .cuda-deps staged:  bash tests/bench/h200_scale.sh
# One baseline on cuda:0 at the ranks' effective batch, then DDP with its all-reduce overlapped with
# backward, DDP with it after backward, and ZeRO-2, each against that baseline (reused), on the
# llama-3.2-1b preset; prints efficiency, exposed communication and per-rank peak memory beside the
# estimator's prediction. Overrides for a dry run elsewhere: PB_SKIP_BUILD=1 CLI=... DEVICE=cpu
# PRESET=tiny GPUS=2 STEPS=3 EXTRA="--set ...".
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DEVICE=${DEVICE:-cuda} PRESET=${PRESET:-llama-3.2-1b} GPUS=${GPUS:-2} STEPS=${STEPS:-10} EXTRA=${EXTRA:-}
CLI=${CLI:-build-cuda/app/pilotbench-cli}
DB=${DB:-/tmp/pb-scale.db}
if [ -z "${PB_SKIP_BUILD:-}" ]; then
  . .cuda-deps/env.sh
  # PyTorch wheels keep nccl.h in the nvidia-nccl package, outside LibTorch's include path; without
  # it the build leaves NCCL out and `scale --device cuda` refuses to start.
  NCCL_INC=$(python3 -c 'import nvidia.nccl as n; import os; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null)
  if [ -n "$NCCL_INC" ] && [ -f "$NCCL_INC/nccl.h" ]; then export CXXFLAGS="${CXXFLAGS:-} -isystem $NCCL_INC"; echo "nccl.h from $NCCL_INC"; fi
  start=$(date +%s)
  PB_TARGETS="pilotbench-cli" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
  echo "build_seconds=$(( $(date +%s) - start ))"
fi
$CLI --version
command -v nvidia-smi >/dev/null && nvidia-smi topo -m | tee "$OUT/topo.txt"
rm -f "$DB"
common=(scale --config "preset:$PRESET" --device "$DEVICE" --gpus "$GPUS" --steps "$STEPS" --warmup 3 --db "$DB" --jsonl $EXTRA)
baseline=()
for run in ddp ddp-after-backward zero2; do
  case $run in
    ddp) args=(--strategy ddp) ;;
    ddp-after-backward) args=(--strategy ddp --no-overlap) ;;
    zero2) args=(--strategy zero2) ;;
  esac
  $CLI "${common[@]}" "${args[@]}" "${baseline[@]}" > "$OUT/scale_$run.jsonl" 2> "$OUT/scale_$run.err"
  echo "$run exit=$?"; tail -3 "$OUT/scale_$run.err"
  id=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("event")=="baseline": print(e["run_id"])' "$OUT/scale_$run.jsonl" 2>/dev/null)
  [ -n "$id" ] && baseline=(--baseline-run "$id")
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
gib = lambda b: "n/a" if b is None else "%.2f GiB" % (b / 2**30)
for run in ("ddp", "ddp-after-backward", "zero2"):
    path = os.path.join(out, "scale_%s.jsonl" % run)
    events = [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
    s = next((e for e in events if e.get("event") == "summary"), None)
    if s is None:
        err = next((e for e in events if e.get("event") == "error"), {})
        print("%-20s no summary: %s" % (run, err.get("message", "see scale_%s.err" % run)))
        continue
    print("%-20s %s x %d: baseline %.0f tok/s, scaled %.0f tok/s, efficiency %.3f, exposed comm %.2f ms of %.1f ms/step" % (
        run, s["strategy"], s["gpus"], s["baseline_tokens_per_s"], s["tokens_per_s"], s["scaling_efficiency"], s["comm_ms_per_step"], s["step_time_ms"]))
    print("%-20s peak allocated per rank %s (predicted %s); baseline %s (predicted %s)" % (
        "", ", ".join(gib(p) for p in s["per_rank_peak_allocated_bytes"]), gib(s.get("predicted_per_rank_peak_allocated_bytes")),
        gib(s.get("baseline_peak_allocated_bytes")), gib(s.get("predicted_baseline_peak_allocated_bytes"))))
PY
