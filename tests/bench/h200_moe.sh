#!/usr/bin/env bash
# H200 mixture-of-experts pilot (issue 19), from the repository root on a CUDA host with .cuda-deps
# staged:  bash tests/bench/h200_moe.sh [compare|rows]   (both when neither is named)
# Reduced-layer versions of the MoE presets (so full fine-tuning fits one card), all in one call:
#  1. loss parity: our pilot trains 1 step on a token file whose samples are all one sequence and
#     checkpoints; Transformers loads those weights and computes the loss on that sequence, beside
#     our own loss of the next step (same weights, same tokens);
#  2. step time and peak allocated, our pilot beside Transformers eager (tests/bench/hf_moe_reference.py);
#  3. measured peaks for the estimator rows (full/LoRA x recompute off/on x two sequence lengths;
#     MODES, RECOMPUTE and SEQS narrow them; PRESETS the compared presets).
. tests/bench/h200_build.sh
W=/tmp/moe; rm -rf $W; mkdir -p $W
python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
seq = rng.integers(0, 32000, size=2049, dtype=np.uint16)  # below every vocabulary here
np.tile(seq, 64).tofile("/tmp/moe/same.bin")
PY
DATA=(--set data.kind=tokens --set data.path=$W/same.bin --set data.token_dtype=uint16)
declare -A LAYERS=([olmoe-1b-7b]=4 [qwen3-30b-a3b]=4 [mixtral-8x7b]=2)
for P in olmoe-1b-7b qwen3-30b-a3b mixtral-8x7b; do
  $CLI config new --preset $P --set model.layers=${LAYERS[$P]} --set train.micro_batch=4 --out $W/$P.json
done
WHAT=${1:-both}
for P in ${PRESETS:-olmoe-1b-7b qwen3-30b-a3b mixtral-8x7b}; do
  [ $WHAT = rows ] && break
  echo "== $P (${LAYERS[$P]} layers): loss parity"
  $CLI pilot --config $W/$P.json --device cuda:0 "${DATA[@]}" --steps 2 --warmup 0 --set checkpoint.every_steps=1 --checkpoint-dir $W/ck-$P \
      --db $W/h.db --jsonl 2>$W/$P.parity.err | tail -1 > $W/$P.parity.json
  python3 -c "import json; d=json.load(open('$W/$P.parity.json')); print(json.dumps({'preset': '$P', 'ours_losses': d.get('losses'), 'verdict': d.get('verdict'), 'message': d.get('message')}))" | tee -a $OUT/moe.jsonl
  python3 tests/bench/hf_moe_reference.py --config $W/$P.json --weights $W/ck-$P/step-00000001 --tokens $W/same.bin --steps 0 --warmup 0 2>$W/$P.hfw.err \
      | tee -a $OUT/moe.jsonl; [ ${PIPESTATUS[0]} = 0 ] || tail -5 $W/$P.hfw.err | tee -a $OUT/moe.err
  echo "== $P: step time and peak, ours then Transformers eager"
  $CLI pilot --config $W/$P.json --device cuda:0 "${DATA[@]}" --steps 10 --warmup 3 --db $W/h.db --jsonl 2>/dev/null | tail -1 \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps({k: d.get(k) for k in ['verdict','step_time_mean_ms','tokens_per_s','peak_allocated_bytes','final_loss','message']}))" \
      | tee -a $OUT/moe.jsonl
  python3 tests/bench/hf_moe_reference.py --config $W/$P.json --tokens $W/same.bin --steps 10 --warmup 3 2>$W/$P.hf.err | tee -a $OUT/moe.jsonl; [ ${PIPESTATUS[0]} = 0 ] || tail -5 $W/$P.hf.err | tee -a $OUT/moe.err
done
[ $WHAT = compare ] && exit 0
echo "== estimator rows (olmoe-1b-7b, 4 layers): measured peaks"
for mode in ${MODES:-full lora}; do for rc in ${RECOMPUTE:-false true}; do for seq in ${SEQS:-1024 2048}; do
  extra=(--set train.recompute=$rc --set train.seq_len=$seq)
  [ $mode = lora ] && extra+=(--set train.mode=lora --set train.lora.rank=16)
  snap=$W/moe_snapshot_${mode}_${rc}_${seq}.json
  $CLI pilot --config $W/olmoe-1b-7b.json --device cuda:0 "${extra[@]}" --steps 1 --warmup 2 --db $W/h.db --jsonl --memory-snapshot $snap 2>/dev/null | tail -1 \
    | python3 tests/bench/pilot_row.py $snap "{\"mode\": \"$mode\", \"recompute\": \"$rc\", \"seq\": $seq}" \
    | tee -a $OUT/estimator_rows.jsonl
done; done; done
