#!/usr/bin/env bash
# What the last sessions built and no card has run yet, in calls that each fit the device's 600 s,
# from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_pending.sh check   # build, then the kernel tests that skip on the CPU
#   bash tests/bench/h200_pending.sh ab      # one-process A/Bs: flash's window, the loss chunk, the CUDA graph
#   bash tests/bench/h200_pending.sh gemma2  # stop 56's capped softmax: its card check while the build runs,
#                                            # then Gemma-2-9B full and LoRA, eager and fused, against Transformers
#                                            # eager and + compile
#                                            # (about 520 s on a cold H100, as stop 56 ran it by hand)
#   bash tests/bench/h200_pending.sh tied    # stop 57's tied lookup gradient and grouped capped attention: the
#                                            # tied families' full rows (Gemma 2, SmolLM3, Granite) fused against
#                                            # Transformers + compile (and the estimator's new terms against the
#                                            # recorder), then Gemma 3 and Phi-4 eager and fused against both
#                                            # (~560 s cold)
#   bash tests/bench/h200_pending.sh layout  # stop 58's head-layout products in the capped attention with the
#                                            # capped softmax's block-a-row kernels (stop 59 took the warp-a-row
#                                            # ones back out: slower): the kernel check while the build runs,
#                                            # the products' card test against the stacked bmms and float64,
#                                            # then Gemma-2-9B LoRA fused against Transformers + compile (stop
#                                            # 59, warp a row: 1.046x on an H100), with the estimator against
#                                            # the recorder (~480 s cold; the full row, which did not fit
#                                            # beside it, is the next call's: HF_EAGER=0 KERNELS=fused COMPILE=1
#                                            # bash tests/bench/h200_families.sh all gemma-2-9b)
# (the families, QLoRA and gpt-oss rows have their own scripts: h200_families.sh, h200_qlora.sh, h200_sparse.sh).
PB_TARGETS="${PB_TARGETS:-pilotbench-cli bench_probe_overhead engine_tst_windowed_attention engine_tst_step_graph}"
[ "${1:-check}" = layout ] && PB_TARGETS="pilotbench-cli engine_tst_head_layout_attention"
# The kernel check builds FusedKernels.cu alone with nvcc, so it runs beside PilotBench's build.
[ "${1:-check}" = gemma2 ] || [ "${1:-check}" = tied ] || [ "${1:-check}" = layout ] && { mkdir -p "${OUT:-/tmp/pb-out}"; python3 tests/bench/h200_new_kernels_check.py --out /tmp/kout > "${OUT:-/tmp/pb-out}/kernels_check.txt" 2>&1 & }
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
gemma2)
  wait # the kernel check
  grep -E "failed|capped softmax Gemma|counting only" $OUT/kernels_check.txt | tee -a $OUT/pending.txt
  KERNELS="eager fused" COMPILE=1 bash tests/bench/h200_families.sh all gemma-2-9b 2>&1 | tail -5 | tee -a $OUT/pending.txt
  mv $OUT/families.jsonl $OUT/families-full.jsonl
  EXTRA="--set train.mode=lora" KERNELS="eager fused" COMPILE=1 bash tests/bench/h200_families.sh all gemma-2-9b 2>&1 | tail -5 | tee -a $OUT/pending.txt
  ;;
tied)
  wait # the kernel check
  grep -E "failed" $OUT/kernels_check.txt | tee -a $OUT/pending.txt
  KERNELS=fused COMPILE=1 bash tests/bench/h200_families.sh all gemma-2-9b smollm3-3b granite-3.3-8b 2>&1 | tail -10 | tee -a $OUT/pending.txt
  mv $OUT/families.jsonl $OUT/families-tied.jsonl
  KERNELS="eager fused" COMPILE=1 bash tests/bench/h200_families.sh all gemma-3-12b phi-4 2>&1 | tail -9 | tee -a $OUT/pending.txt
  ;;
layout)
  wait # the kernel check: the capped softmax at Gemma 2's shape among its rows
  grep -E "failed|capped softmax Gemma" $OUT/kernels_check.txt | tee -a $OUT/pending.txt
  echo "== engine_tst_head_layout_attention groupedHeadsAttentionOnTheCard" | tee -a $OUT/pending.txt
  timeout 120 $B/tests/engine_tst_head_layout_attention groupedHeadsAttentionOnTheCard 2>&1 | grep -v "^PASS   : TestHeadLayoutAttention::\(init\|cleanup\)" | tail -14 | tee -a $OUT/pending.txt
  EXTRA="--set train.mode=lora" HF_EAGER=0 KERNELS=fused COMPILE=1 bash tests/bench/h200_families.sh all gemma-2-9b 2>&1 | tail -3 | tee -a $OUT/pending.txt
  ;;
esac
