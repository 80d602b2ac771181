#!/usr/bin/env bash
# H200, issue 28: loss on the same weights and tokens, ours against Transformers 5.17, for the dense
# families' presets (h200_sparse.sh parity: one decoder layer, seq 512; fp32 and bf16-mixed; full
# fine-tuning and LoRA), in $STREAMS (3) concurrent streams of presets on the one card. From the
# repository root with .cuda-deps staged:   bash tests/bench/h200_dense_parity.sh [PRESET...]
. tests/bench/h200_build.sh
PRESETS=("$@"); [ ${#PRESETS[@]} = 0 ] && PRESETS=(qwen3-8b gemma-3-12b gemma-2-9b olmo-2-7b olmo-3-7b phi-4 smollm3-3b glm-4-9b granite-3.3-8b ministral-3-8b)
S=${STREAMS:-3}
for ((k = 0; k < S; k++)); do
  mine=(); for ((i = k; i < ${#PRESETS[@]}; i += S)); do mine+=(${PRESETS[$i]}); done
  [ ${#mine[@]} = 0 ] && continue
  # Every row goes straight to $OUT, so a call cut short still brings back the rows it finished.
  # (Named before the stream's own OUT: in `OUT=x P=$OUT/y cmd`, P already sees x.)
  ROWS=$OUT/dense_parity.jsonl
  (W=/tmp/dense-parity-$k OUT=/tmp/dense-parity-out-$k PARITY_OUT=$ROWS bash tests/bench/h200_sparse.sh parity "${mine[@]}" > $OUT/dense-parity-$k.log 2>&1) &
done
wait
cat /tmp/dense-parity-out-*/sparse.err 2>/dev/null | head -40
python3 - $OUT/dense_parity.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ours = {(r["preset"], r["mode"], r["precision"]): r for r in rows if "ours_losses" in r}
for r in rows:
    if "ours_losses" in r:
        continue
    k = (r["preset"], r["mode"], r["precision"]); o = ours.get(k, {})
    mine = (o.get("ours_losses") or [None, None])[-1]
    theirs = r.get("loss_at_weights")
    rel = (mine - theirs) / theirs if mine is not None and theirs else None
    print("%-16s %-5s %-10s ours %s  transformers %s  relative %s  (without adapters %s vs our step 1 %s)" % (
        k[0], k[1], k[2], mine, theirs, "%.2e" % rel if rel is not None else "-", r.get("loss_without_adapters"), (o.get("ours_losses") or [None])[0]))
PY
