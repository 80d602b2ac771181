#!/usr/bin/env bash
# H200 step profile (issue 16), from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_profile.sh [CONFIG [KERNELS...]]
# For each train.kernels path (eager and fused when none is named): bench_probe_overhead's bare
# loop against the instrumented pilot (probe overhead), a Kineto trace of two bare steps, and that
# trace's top kernels. CONFIG is a preset (llama-3.2-1b by default) at micro-batch 8.
PB_TARGETS="${PB_TARGETS:-bench_probe_overhead}"
. tests/bench/h200_build.sh
C=${1:-llama-3.2-1b}; shift || true
PATHS=("$@"); [ ${#PATHS[@]} = 0 ] && PATHS=(eager fused)
for K in "${PATHS[@]}"; do
  $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset $C --steps 10 --set train.micro_batch=8 --set train.kernels=$K \
    --trace $OUT/trace-$C-$K.json 2>&1 | tee -a $OUT/probe-overhead.txt
  [ -f $OUT/trace-$C-$K.json ] || continue
  python3 tests/bench/trace_top_kernels.py $OUT/trace-$C-$K.json --steps 2 --top 15 --label "$C $K" | tee -a $OUT/top-kernels.txt
  gzip -f $OUT/trace-$C-$K.json
done
