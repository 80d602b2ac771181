#!/usr/bin/env bash
# H200 checkpoint throughput and the restore proof (issue 17), from the repository root on a CUDA
# host with .cuda-deps staged:  bash tests/bench/h200_checkpoint.sh PRESET [K M] [--set ...]
# Builds once into $BUILD_DIR (default /tmp/build-cuda), then in one call: the restore proof on
# PRESET (write, verify, restore in a fresh process, all timed), the disk's own fsync'd sequential
# write, safetensors.load_file and torch.save of the same tensors (tests/bench/checkpoint_io.py), a
# cold verify and a cold safetensors load (page cache dropped), and the HF strict load.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export BUILD_DIR=${BUILD_DIR:-/tmp/build-cuda}
PRESET=$1; K=${2:-1}; M=${3:-1}; shift $(( $# >= 3 ? 3 : $# ))
if [ ! -x "$BUILD_DIR/app/pilotbench-cli" ] || [ "${REBUILD:-0}" = 1 ]; then
  PB_TARGETS="pilotbench-cli" scripts/build-cuda > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
fi
CLI=$BUILD_DIR/app/pilotbench-cli
CK=/tmp/ckpt-$PRESET
rm -rf "$CK" /tmp/io; mkdir -p "$CK"
echo "== restore-check $PRESET K=$K M=$M $*"
$CLI restore-check --config preset:$PRESET --device cuda:0 --steps-before "$K" --steps-after "$M" --checkpoint-dir "$CK" --db /tmp/h.db --jsonl "$@" \
  | tail -1 | tee "$OUT/restore_$PRESET.json"
STEP=$(ls -d "$CK"/restore-check/step-* | tail -1)
ls -la "$STEP" | tee "$OUT/files_$PRESET.txt"
echo "== peers on the same files (warm page cache, as the restore above)"
python3 tests/bench/checkpoint_io.py --checkpoint "$STEP" --scratch /tmp/io | tee "$OUT/io_warm_$PRESET.json"
echo "== cold: page cache dropped before each"
python3 tests/bench/checkpoint_io.py --checkpoint "$STEP" --scratch /tmp/io --drop-caches --disk-gb 1 | tee "$OUT/io_cold_$PRESET.json"
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "page cache dropped"
echo "== checkpoint verify, cold (parallel SHA-256 of every file)"
$CLI checkpoint verify --json "$STEP" | tee "$OUT/verify_cold_$PRESET.json"
echo "== resume in a fresh process (verifies, then restores from what the verify left in memory)"
$CLI pilot --config "$STEP/config.json" --device cuda:0 --steps 1 --warmup 0 --resume-from "$STEP" --db /tmp/h.db --jsonl 2>/dev/null | tail -1 \
  | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps({'restore_ms': d.get('restore_ms'), 'verdict': d.get('verdict')}))" \
  | tee "$OUT/resume_$PRESET.json"
