#!/usr/bin/env bash
# One call on two H200s of one host (device kind nvidia-h200-x2), from the repository root with
# .cuda-deps staged:  bash tests/bench/h200_x2.sh
# GPU 1 proves restoration (issue 6) while GPU 0 runs the scaling baseline and then the
# estimator's closed loop (issue 5, memory only, so the neighbour does not matter); then, with
# both GPUs otherwise idle, the scaling step (issue 10): DDP, FSDP and ZeRO-2 against that one
# baseline, llama-3.2-1b, micro-batch 8 per rank, seq 2048, bf16 autocast.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-10}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
NCCL_INC=$(python3 -c 'import nvidia.nccl as n; import os; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null)
[ -n "$NCCL_INC" ] && [ -f "$NCCL_INC/nccl.h" ] && export CXXFLAGS="${CXXFLAGS:-} -isystem $NCCL_INC"
PB_TARGETS="pilotbench-cli bench_estimator" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "build_seconds=$(elapsed)"
CLI=build-cuda/app/pilotbench-cli
DB=/tmp/pb-scale.db
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1

# GPU 1: the restoration proof, bf16 autocast, deterministic algorithms.
( s=$(date +%s)
  CUDA_VISIBLE_DEVICES=1 timeout 300 $CLI restore-check --config preset:llama-3.2-1b --device cuda:0 --steps-before 2 --steps-after 2 \
    --checkpoint-dir /tmp/ckpt --db /tmp/restore.db --jsonl --set train.micro_batch=2 --set train.schedule.warmup_steps=2 \
    --set train.schedule.total_steps=4 --set deterministic=true > "$OUT/restore.json" 2> "$OUT/restore.err"
  echo "restore-check exit=$? in $(( $(date +%s) - s )) s" > "$OUT/restore.status"; rm -rf /tmp/ckpt ) &
restore=$!

# GPU 0: the baseline at the ranks' effective batch (2 x 8), recorded for reuse.
$CLI pilot --config preset:llama-3.2-1b --device cuda:0 --steps $STEPS --warmup 3 --db $DB --jsonl --set train.grad_accum=2 \
  > "$OUT/baseline.jsonl" 2> "$OUT/baseline.err"
echo "baseline exit=$? at $(elapsed) s"
base=$(tail -1 "$OUT/baseline.jsonl" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["run_id"]); import sys as s; print("baseline %.1f ms/step %.0f tok/s peak %.2f GiB losses %s" % (d["step_time_mean_ms"], d["tokens_per_s"], d["peak_allocated_bytes"]/2**30, d["losses"][-3:]), file=s.stderr)')
echo "baseline run $base"
CUDA_VISIBLE_DEVICES=0 timeout 200 build-cuda/tests/bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b --quick > "$OUT/estimator_cuda.txt" 2>&1
echo "estimator exit=$? at $(elapsed) s"; tail -4 "$OUT/estimator_cuda.txt"
wait $restore; cat "$OUT/restore.status"; tail -c 2500 "$OUT/restore.json"; echo; grep -v Warning "$OUT/restore.err" | tail -3
echo "scaling from $(elapsed) s"
for st in ddp fsdp zero2; do
  [ $(elapsed) -gt 520 ] && { echo "$st skipped: out of time"; continue; }
  timeout $(( 585 - $(elapsed) )) $CLI scale --config preset:llama-3.2-1b --device cuda --gpus 2 --strategy $st --steps $STEPS --warmup 3 --db $DB --jsonl \
    --baseline-run "$base" > "$OUT/scale_$st.jsonl" 2> "$OUT/scale_$st.err"
  echo "$st exit=$? at $(elapsed) s"; grep -v Warning "$OUT/scale_$st.err" | tail -2
  grep '"summary"' "$OUT/scale_$st.jsonl" | python3 -c '
import json,sys
s=json.loads(sys.stdin.read()); g=lambda b: "n/a" if b is None else "%.2f GiB" % (b/2**30)
print("%s x %d: baseline %.0f tok/s, scaled %.0f tok/s, efficiency %.3f, comm %.1f ms of %.1f ms/step; peak per rank %s (predicted %s)" % (
 s["strategy"], s["gpus"], s["baseline_tokens_per_s"], s["tokens_per_s"], s["scaling_efficiency"], s["comm_ms_per_step"], s["step_time_ms"],
 ", ".join(g(p) for p in s["per_rank_peak_allocated_bytes"]), g(s.get("predicted_per_rank_peak_allocated_bytes"))))'
done
