#!/usr/bin/env bash
# H200 restoration proof (issue 6) on the llama-3.2-1b preset, run from the repository root on a
# CUDA host with .cuda-deps staged:  bash tests/bench/h200_restore.sh
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PB_TARGETS="pilotbench-cli" scripts/build-cuda > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
CLI=build-cuda/app/pilotbench-cli
common=(--config preset:llama-3.2-1b --device cuda:0 --steps-before 3 --steps-after 3 --checkpoint-dir /tmp/ckpt --db /tmp/h.db --jsonl
        --set train.micro_batch=2 --set train.schedule.warmup_steps=2 --set train.schedule.total_steps=6)
echo "== bf16 (pure), deterministic algorithms, math attention"
$CLI restore-check "${common[@]}" --set train.precision=bf16 --set deterministic=true --set train.attention=math | tee "$OUT/restore_bf16_det.json"
