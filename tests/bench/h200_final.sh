#!/usr/bin/env bash
# Last call on two H200s (nvidia-h200-x2), from the repository root with .cuda-deps staged:
#   bash tests/bench/h200_final.sh
# The FSDP scaling step (issue 10; its own baseline), then the restoration proof with
# deterministic algorithms, where attention auto takes the deterministic math path (issue 6).
# Few files in $OUT: the device tool returns a handful.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
NCCL_INC=$(python3 -c 'import nvidia.nccl as n; import os; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null)
[ -n "$NCCL_INC" ] && [ -f "$NCCL_INC/nccl.h" ] && export CXXFLAGS="${CXXFLAGS:-} -isystem $NCCL_INC"
PB_TARGETS="pilotbench-cli" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "build_seconds=$(elapsed)"
CLI=build-cuda/app/pilotbench-cli
timeout 100 $CLI scale --config preset:llama-3.2-1b --device cuda --gpus 2 --strategy fsdp --steps ${STEPS:-10} --warmup 3 --db /tmp/pb-scale.db --jsonl \
  > "$OUT/fsdp.jsonl" 2> "$OUT/fsdp.err"
rc=$?
echo "fsdp exit=$rc at $(elapsed) s"
if [ $rc -ne 0 ]; then
  logs=$(grep -o '/tmp/pilotbench-scale-[A-Za-z0-9]*' "$OUT/fsdp.err" | head -1)
  [ -n "$logs" ] && for f in "$logs"/*; do echo "== $f"; grep -v "^frame #" "$f" | tail -15; done | tee -a "$OUT/fsdp.err"
fi
grep '"summary"' "$OUT/fsdp.jsonl" | python3 -c '
import json,sys
s=json.loads(sys.stdin.read()); g=lambda b: "n/a" if b is None else "%.2f GiB" % (b/2**30)
print("%s x %d: baseline %.0f tok/s, scaled %.0f tok/s, efficiency %.3f, comm %.1f ms of %.1f ms/step; peak per rank %s (predicted %s); baseline peak %s (predicted %s)" % (
 s["strategy"], s["gpus"], s["baseline_tokens_per_s"], s["tokens_per_s"], s["scaling_efficiency"], s["comm_ms_per_step"], s["step_time_ms"],
 ", ".join(g(p) for p in s["per_rank_peak_allocated_bytes"]), g(s.get("predicted_per_rank_peak_allocated_bytes")),
 g(s.get("baseline_peak_allocated_bytes")), g(s.get("predicted_baseline_peak_allocated_bytes"))))'
s=$(date +%s)
CUDA_VISIBLE_DEVICES=1 timeout 140 $CLI restore-check --config preset:llama-3.2-1b --device cuda:0 --steps-before 2 --steps-after 2 \
  --checkpoint-dir /tmp/ckpt --db /tmp/restore.db --jsonl --set train.micro_batch=2 --set train.schedule.warmup_steps=2 \
  --set train.schedule.total_steps=4 --set deterministic=true > "$OUT/restore.json" 2> "$OUT/restore.err"
echo "restore-check exit=$? in $(( $(date +%s) - s )) s"; tail -c 2500 "$OUT/restore.json"; echo; grep -v Warning "$OUT/restore.err" | tail -3
