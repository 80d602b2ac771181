#!/usr/bin/env bash
# Does nvcc --split-compile=0 (core/CMakeLists.txt, stop 69) change the kernels' code? The build's
# FusedKernels.cu object against the same nvcc command without the flag, their SASS compared (the
# addresses in cuobjdump's comments dropped). Needs a CUDA build in $BUILD_DIR; text to $OUT.
set -euo pipefail
obj=${SPLIT_OBJ:-core/CMakeFiles/pb_kernels.dir/kernels/FusedKernels.cu.o}  # SPLIT_OBJ: another object (a test of this script)
cd "$BUILD_DIR"
[ -f "$obj" ] || { echo "no $obj in $BUILD_DIR: build first" >&2; exit 1; }
cmd=$(ninja -t commands "$obj" | tail -1)
case "$cmd" in *--split-compile=0*) ;; *) echo "the build's command has no --split-compile=0: $cmd" >&2; exit 1 ;; esac
# The same command without the flag, writing beside /tmp instead of over the build's object and depfile.
plain=${cmd//--split-compile=0/}
plain=${plain//$obj//tmp/nosplit.o}
nvcc=${cmd%% *}
SECONDS=0
eval "$plain"
echo "FusedKernels.cu without --split-compile: ${SECONDS} s (the build's with it: ninja_log.txt)" | tee "$OUT/splitcheck.txt"
sass() { "$(dirname "$nvcc")/cuobjdump" -sass "$1" | sed 's@/\*[0-9a-f]*\*/@@g'; }
sass "$obj" > /tmp/split.sass
sass /tmp/nosplit.o > /tmp/nosplit.sass
echo "SASS lines: $(wc -l < /tmp/split.sass) with, $(wc -l < /tmp/nosplit.sass) without" | tee -a "$OUT/splitcheck.txt"
if cmp -s /tmp/split.sass /tmp/nosplit.sass; then
  echo "SASS identical" | tee -a "$OUT/splitcheck.txt"
elif cmp -s <(sort /tmp/split.sass) <(sort /tmp/nosplit.sass); then
  echo "SASS identical up to the order of functions" | tee -a "$OUT/splitcheck.txt"
else
  echo "SASS differs: $(diff /tmp/split.sass /tmp/nosplit.sass | grep -c '^[<>]') lines" | tee -a "$OUT/splitcheck.txt"
  diff /tmp/split.sass /tmp/nosplit.sass | head -40 >> "$OUT/splitcheck.txt"
fi
