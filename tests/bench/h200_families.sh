#!/usr/bin/env bash
# H200 dense families (issue 28), from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_families.sh [ours|all] [PRESET...]
# Each family's preset reduced to $LAYERS layers (4), seq $SEQ (2048) x micro-batch $MB (4), bf16
# autocast over fp32 masters, fused AdamW, 3 warm-up + $STEPS (5) measured steps: our pilot on the
# eager and the fused path (with the estimator's error against the training steps' peak and against
# the whole run's peak, from --memory-snapshot), then (with `all`) Transformers 5.17's own model of the
# family built from tests/data/hf/PRESET/config.json at the same depth, eager, and + torch.compile
# where COMPILE=1 (HF_EAGER=0 leaves the eager one out; PEFT_NO_CAST=1 adds PEFT eager without its
# adapter input cast, hf_reference.py --peft-no-input-cast: our eager LoRA makes the cast as PEFT's
# default does since 3399ff3, so that row shows what the cast costs). EXTRA
# adds --set options to every config (EXTRA="--set train.mode=lora"). Rows go to
# $OUT/families.jsonl, a table to stdout, each pilot's peak by layer to $OUT/layers-F-K.txt.
. tests/bench/h200_build.sh
WHAT=${1:-all}; shift || true
FAMILIES=("$@"); [ ${#FAMILIES[@]} = 0 ] && FAMILIES=(qwen3-8b gemma-3-12b gemma-2-9b olmo-2-7b olmo-3-7b phi-4 smollm3-3b glm-4-9b granite-3.3-8b ministral-3-8b)
LAYERS=${LAYERS:-4}; SEQ=${SEQ:-2048}; MB=${MB:-4}; STEPS=${STEPS:-5}
W=/tmp/fam; mkdir -p $W
for F in "${FAMILIES[@]}"; do
  $CLI config new --preset $F --set model.layers=$LAYERS --set train.seq_len=$SEQ --set train.micro_batch=$MB ${EXTRA:-} --out $W/$F.json || continue
  for K in ${KERNELS:-eager fused}; do
    snap=$W/snapshot-$F-$K.json
    $CLI pilot --config $W/$F.json --device cuda:0 --set train.kernels=$K --steps $STEPS --warmup 3 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/$F-$K.err | tail -1 \
      | python3 tests/bench/pilot_row.py $snap "{\"config\": \"$F\", \"impl\": \"pilotbench $K\"}" >> $OUT/families.jsonl || tail -3 $W/$F-$K.err
    # Where the peak sits layer by layer, to place an estimate's difference (snapshot_layers.py).
    python3 tests/bench/snapshot_layers.py $snap --scopes > $OUT/layers-$F-$K.txt 2>&1 || true
  done
  [ $WHAT = ours ] && continue
  variants=(); [ "${HF_EAGER:-1}" = 1 ] && variants+=(""); [ "${PEFT_NO_CAST:-0}" = 1 ] && variants+=(--peft-no-input-cast)
  [ "${COMPILE:-0}" = 1 ] && variants+=(--compile)
  for variant in "${variants[@]}"; do
    python3 tests/bench/hf_reference.py --config $W/$F.json --hf-config tests/data/hf/$F/config.json --steps $STEPS --warmup 3 $variant 2>$W/$F-hf.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['config']='$F'; print(json.dumps(d))" >> $OUT/families.jsonl || tail -3 $W/$F-hf.err
  done
done
python3 - "$OUT/families.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-16s %-34s %9s %10s %10s %10s %9s %9s" % ("config", "implementation", "ms/step", "tokens/s", "peak GiB", "run GiB", "est/step", "est/run"))
for r in rows:
    err, e, run = r.get("estimate_error_pct"), r.get("estimated_bytes"), r.get("peak_allocated_bytes")
    print("%-16s %-34s %9.1f %10.0f %10.2f %10.2f %9s %9s" % (r["config"], r.get("impl"), r.get("step_ms") or 0, r.get("tokens_per_s") or 0,
          (r.get("training_peak_bytes") or r.get("peak_allocated_bytes") or 0) / 2**30, (run or 0) / 2**30,
          "%+.2f%%" % err if err is not None else "", "%+.2f%%" % (100 * (e - run) / run) if e and run and "pilotbench" in r.get("impl", "") else ""))
PY
