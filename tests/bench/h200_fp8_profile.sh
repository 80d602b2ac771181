#!/usr/bin/env bash
# H200, issue 31: where an fp8 step's time goes against bf16's. Kineto traces of two bare steps of
# Llama-3.1-8B's widths (LAYERS, default 8), full fine-tuning, seq 4096, the fused path, under
# bf16-mixed and fp8-rowwise, and each trace's top kernels. Also runs the float8 and NF4 kernel
# tests on the card. From the repository root with .cuda-deps staged:
#   bash tests/bench/h200_fp8_profile.sh
PB_TARGETS="pilotbench-cli bench_probe_overhead engine_tst_fp8 engine_tst_nf4" . tests/bench/h200_build.sh
for t in engine_tst_fp8 engine_tst_nf4; do
  $BUILD_DIR/tests/$t > $OUT/$t.txt 2>&1; grep -E "FAIL|Totals" -A2 $OUT/$t.txt | head -20
done
for P in ${PRECISIONS:-bf16-mixed fp8-rowwise}; do
  $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 --set model.layers=${LAYERS:-8} --set train.seq_len=4096 \
    --set train.kernels=fused --set train.precision=$P --trace $OUT/trace-$P.json 2>&1 | tail -3 | tee -a $OUT/probe-overhead.txt
  python3 tests/bench/trace_top_kernels.py $OUT/trace-$P.json --steps 2 --top 25 --label "8b x${LAYERS:-8} $P" | tee -a $OUT/top-kernels.txt
  gzip -f $OUT/trace-$P.json
done
