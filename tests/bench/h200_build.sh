# Sourced by the H200 scripts: $OUT, the staged dependencies, and a CUDA build in $BUILD_DIR of the
# targets in $PB_TARGETS (pilotbench-cli when unset) unless their binaries are already there.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
# Run from the device snapshot (.pbsnap, carried afresh each call), the staged dependencies are the
# checkout's, one level up: linked here when missing (a call without the link fails at once).
[ -e .cuda-deps ] || { [ -d ../.cuda-deps ] && ln -s ../.cuda-deps .cuda-deps; }
. .cuda-deps/env.sh
export BUILD_DIR=${BUILD_DIR:-/tmp/build-cuda}
PB_TARGETS=${PB_TARGETS:-pilotbench-cli}
pb_missing=0
for t in $PB_TARGETS; do
  [ -x "$BUILD_DIR/app/$t" ] || [ -x "$BUILD_DIR/tests/$t" ] || pb_missing=1
done
if [ $pb_missing = 1 ]; then
  # The device machines are Hopper cards (sm_90): the kernels for Ampere too would double nvcc's
  # share of a cold build that already fills most of a 600 s call.
  PB_TARGETS="$PB_TARGETS" PB_CMAKE_ARGS="${PB_CMAKE_ARGS:--DCMAKE_CUDA_ARCHITECTURES=90}" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; exit 1; }
  # Each step's start and end (ms), to see what a cold build's time goes to.
  cp "$BUILD_DIR/.ninja_log" "$OUT/ninja_log.txt" 2>/dev/null || true
fi
CLI=$BUILD_DIR/app/pilotbench-cli
