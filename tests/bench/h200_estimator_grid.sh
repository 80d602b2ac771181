#!/usr/bin/env bash
# The estimator across architectures on a CUDA card (issue 18), from the repository root on a CUDA
# host with .cuda-deps staged:  bash tests/bench/h200_estimator_grid.sh K/N
# Runs rows K, K+N, ... of bench_estimator --architectures (64 rows, 5.5 minutes on an H200: 0/1 fits one call),
# each pilot's peak against the estimate, Accelerate's and DeepSpeed's formulas, and the part the
# estimate misses most against the measured attribution. Output: $OUT/estimator_grid_K_of_N.txt.
PB_TARGETS="pilotbench-cli bench_estimator" . tests/bench/h200_build.sh
PART=${1:-0/2}
"$BUILD_DIR/tests/bench_estimator" --device cuda:0 --architectures --part "$PART" 2>&1 | tee "$OUT/estimator_grid_${PART/\//_of_}.txt"
