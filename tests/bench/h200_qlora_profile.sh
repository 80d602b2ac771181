#!/usr/bin/env bash
# H200, issue 31: where QLoRA's extra step time goes. Kineto traces of two bare steps of
# Llama-3.1-8B, rank 16 over all linear layers, seq 2048, bf16-mixed, eager, under qlora and lora,
# and each trace's top kernels. From the repository root with .cuda-deps staged:
#   bash tests/bench/h200_qlora_profile.sh
PB_TARGETS="bench_probe_overhead" . tests/bench/h200_build.sh
for M in ${MODES:-qlora lora}; do
  $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 --set train.mode=$M --set train.lora.targets=all-linear \
    --set train.seq_len=2048 --trace $OUT/trace-$M.json 2>&1 | tail -3 | tee -a $OUT/probe-overhead.txt
  python3 tests/bench/trace_top_kernels.py $OUT/trace-$M.json --steps 2 --top 15 --label "8b $M" | tee -a $OUT/top-kernels.txt
  gzip -f $OUT/trace-$M.json
done
