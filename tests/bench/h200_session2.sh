#!/usr/bin/env bash
# Second H200 batch, from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_session2.sh
# Probe overhead (issue 4), the restoration proof on llama-3.2-1b (issue 6), then the estimator's
# closed loop on 1B-class presets (issue 5). Each result lands in $OUT as soon as it exists.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$(date +%s)
PB_TARGETS="pilotbench-cli bench_probe_overhead bench_estimator" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "build_seconds=$(( $(date +%s) - start ))"; grep -i openssl build-cuda/CMakeCache.txt | head -2
build-cuda/tests/bench_probe_overhead --device cuda:0 --preset llama-3.2-1b --steps 10 2>&1 | tee "$OUT/probe_overhead.txt"
build-cuda/app/pilotbench-cli restore-check --config preset:llama-3.2-1b --device cuda:0 --steps-before 3 --steps-after 3 \
  --checkpoint-dir /tmp/ckpt --db /tmp/h.db --jsonl --set train.micro_batch=2 --set train.schedule.warmup_steps=2 \
  --set train.schedule.total_steps=6 --set train.precision=bf16 --set deterministic=true --set train.attention=math 2>&1 | tail -3 | tee "$OUT/restore_bf16_det.json"
build-cuda/tests/bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b --quick 2>&1 | tee "$OUT/estimator_cuda.txt"
