#!/usr/bin/env bash
# What the last sessions built and no card has run yet, in calls that each fit the device's 600 s,
# from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_pending.sh check   # build, then the kernel tests that skip on the CPU
#   bash tests/bench/h200_pending.sh ab      # one-process A/Bs: flash's window, the loss chunk, the CUDA graph
# (the families, QLoRA and gpt-oss rows have their own scripts: h200_families.sh, h200_qlora.sh, h200_sparse.sh).
PB_TARGETS="${PB_TARGETS:-pilotbench-cli bench_probe_overhead engine_tst_windowed_attention engine_tst_step_graph}"
. tests/bench/h200_build.sh
B=$BUILD_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $OUT/pending.txt
case "${1:-check}" in
check)
  for t in engine_tst_windowed_attention engine_tst_step_graph; do
    echo "== $t" | tee -a $OUT/pending.txt
    timeout 120 $B/tests/$t 2>&1 | grep -v "^PASS" | tail -40 | tee -a $OUT/pending.txt
  done
  ;;
ab)
  P=$B/tests/bench_probe_overhead
  G3=(--preset gemma-3-12b --set model.layers=4 --set train.seq_len=2048 --set train.micro_batch=4 --set train.kernels=fused)
  E2B=(--preset gemma-4-e2b --set model.layers=10 --set model.kv_shared_layers=4 --set train.seq_len=2048 --set train.micro_batch=4 --set train.kernels=fused)
  L1B=(--preset llama-3.2-1b --set train.seq_len=2048 --set train.micro_batch=8 --set train.kernels=fused)
  Q05=(--preset qwen2.5-0.5b --set train.seq_len=512 --set train.micro_batch=1 --set train.kernels=fused)
  for args in "${G3[*]} --window-ab" "${E2B[*]} --window-ab" "${G3[*]} --loss-chunk-ab 8192" "${L1B[*]} --graph-ab" "${Q05[*]} --graph-ab"; do
    echo "== bench_probe_overhead $args" | tee -a $OUT/pending.txt
    # shellcheck disable=SC2086
    timeout 150 $P --device cuda:0 $args 2>&1 | tail -4 | tee -a $OUT/pending.txt
  done
  ;;
esac
