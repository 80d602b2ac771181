#!/usr/bin/env bash
# Where a dense family's fused step goes against Transformers + torch.compile (issues 28, 34), from the
# repository root on a CUDA host with .cuda-deps staged:   bash tests/bench/h200_family_profile.sh [PRESET]
# The preset ($1, qwen3-8b) at $LAYERS (4) layers, seq $SEQ (2048) x micro-batch $MB (4), fp32 masters,
# bf16 autocast, fused AdamW: our bare fused loop (bench_probe_overhead) and Transformers' own model of
# the family compiled, each timed and then traced for two steps; the two traces' top kernels.
PB_TARGETS="${PB_TARGETS:-pilotbench-cli bench_probe_overhead}"
. tests/bench/h200_build.sh
P=${1:-qwen3-8b}; LAYERS=${LAYERS:-4}; SEQ=${SEQ:-2048}; MB=${MB:-4}
SETS=(--set model.layers=$LAYERS --set train.seq_len=$SEQ --set train.micro_batch=$MB ${EXTRA:-})
# $EXTRA: more --set arguments for both sides (e.g. "--set train.mode=lora"); HF=0 leaves Transformers out;
# $TAG names the files (default: the preset).
T=${TAG:-$P}
$BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset $P --steps 5 "${SETS[@]}" --set train.kernels=${KERNELS:-fused} \
  --trace $OUT/trace-$T-ours.json 2>&1 | tee -a $OUT/profile.txt
[ "${HF:-1}" = 1 ] && $CLI config new --preset $P "${SETS[@]}" --out /tmp/$P-prof.json >/dev/null
HFCMD=(python3 tests/bench/hf_reference.py --config /tmp/$P-prof.json --hf-config tests/data/hf/$P/config.json --steps 5 --warmup 3)
[ "${COMPILE:-1}" = 1 ] && HFCMD+=(--compile)
[ "${HF:-1}" = 1 ] && { "${HFCMD[@]}" --trace $OUT/trace-$T-hf.json 2>$OUT/hf-$T.err | tee -a $OUT/profile.txt || tail -5 $OUT/hf-$T.err; }
for side in ours hf; do
  [ -f $OUT/trace-$T-$side.json ] || continue
  # Our side's wall time per step (the bench's summary line) gives the card's idle share.
  STEP=(); [ $side = ours ] && STEP=(--step-ms $(grep -o "measured steps: bare [0-9.]* ms" $OUT/profile.txt | tail -1 | grep -o "[0-9.]* ms" | cut -d' ' -f1))
  [ "${STEP[1]:-}" = "" ] && STEP=()
  python3 tests/bench/trace_top_kernels.py $OUT/trace-$T-$side.json --steps 2 --top 25 --label "$T $side" --by-op ${BYOP:-45} "${STEP[@]}" | tee -a $OUT/profile.txt
  gzip -f $OUT/trace-$T-$side.json; mkdir -p /tmp/traces; mv $OUT/trace-$T-$side.json.gz /tmp/traces/  # only a few files come back
done
