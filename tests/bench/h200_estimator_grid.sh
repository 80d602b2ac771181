#!/usr/bin/env bash
# The estimator across architectures on a CUDA card (issue 18), from the repository root on a CUDA
# host with .cuda-deps staged:  bash tests/bench/h200_estimator_grid.sh K/N
# Runs rows K, K+N, ... of bench_estimator --architectures (64 rows; N=2 fits one 10-minute call),
# each pilot's peak against the estimate, Accelerate's and DeepSpeed's formulas, and the part the
# estimate misses most against the measured attribution. Output: $OUT/estimator_grid_K_of_N.txt.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export BUILD_DIR=${BUILD_DIR:-/tmp/build-cuda}
PART=${1:-0/2}
if [ ! -x "$BUILD_DIR/tests/bench_estimator" ] || [ ! -x "$BUILD_DIR/app/pilotbench-cli" ]; then
  PB_TARGETS="pilotbench-cli bench_estimator" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
fi
"$BUILD_DIR/tests/bench_estimator" --device cuda:0 --architectures --part "$PART" 2>&1 | tee "$OUT/estimator_grid_${PART/\//_of_}.txt"
