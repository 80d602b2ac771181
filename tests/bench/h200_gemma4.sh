#!/usr/bin/env bash
# H200, issue 28 (Gemma 4's dense text model), in one call from the repository root with .cuda-deps
# staged:   bash tests/bench/h200_gemma4.sh [fixtures] [parity]
#  fixtures: Transformers 5.17 makes the tiny parity fixtures named by $FIXTURES (default gemma4_text_e,
#            E2B/E4B's traits; gemma4_text is the 31B's: tests/data/hf-parity/<name>) and counts the text
#            models of the 31B, E2B and E4B on the meta device (--counts, from tests/data/hf/gemma-4-*/config.json). No build.
#  speed:    $PRESET (gemma-4-31b) at $LAYERS (6) layers, $MODE (full): h200_families.sh with COMPILE=1
#            ($SETS adds --set options: E2B at 10 layers needs --set model.kv_shared_layers=4).
#  parity:   $PRESET (the 31B) at $PARITY_LAYERS (6: five sliding layers and one global) through
#            h200_sparse.sh parity: our step-2 loss against Transformers' on the weights of our step-1
#            checkpoint, fp32 and bf16-mixed, full fine-tuning ($PARITY_MODES). Needs the CUDA build.
# Files ($OUT): <fixture>/ (config.json, model.safetensors, meta.json, reference.safetensors),
# counts.json, gemma4_parity.jsonl, gemma4.log.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}; mkdir -p "$OUT"
WHAT=("$@"); [ ${#WHAT[@]} = 0 ] && WHAT=(fixtures)
for w in "${WHAT[@]}"; do
  if [ "$w" = fixtures ]; then
    for f in ${FIXTURES:-gemma4_text_e}; do
      python3 tests/bench/hf_family_fixtures.py --out /tmp/g4 --only $f 2>&1 | tail -5 | tee -a $OUT/gemma4.log
      mkdir -p $OUT/$f && cp /tmp/g4/hf-parity/$f/{config.json,model.safetensors,meta.json} $OUT/$f/ \
        && cp /tmp/g4/hf-parity/$f/reference/reference.safetensors $OUT/$f/
    done
    python3 tests/bench/hf_family_fixtures.py --counts --out /tmp/g4c --only gemma-4-31b,gemma-4-e2b,gemma-4-e4b 2>&1 | tail -8 | tee -a $OUT/gemma4.log
    cp /tmp/g4c/counts.json $OUT/counts.json 2>/dev/null
  elif [ "$w" = parity ]; then
    PB_TARGETS=pilotbench-cli W=/tmp/g4p PARITY_OUT=$OUT/gemma4_parity.jsonl PARITY_LAYERS=${PARITY_LAYERS:-6} PARITY_MODES="${PARITY_MODES:-full}" \
      PARITY_SETS="${SETS:-}" SETS="${SETS:-}" LAYERS_ALL=${PARITY_LAYERS:-6} bash tests/bench/h200_sparse.sh parity ${PRESET:-gemma-4-31b} 2>&1 | tail -30 | tee -a $OUT/gemma4.log
  elif [ "$w" = speed ]; then
    # Ours (eager, fused) beside Transformers eager and + torch.compile at $LAYERS layers ($MODE full|lora).
    extra="${SETS:-}"; [ "${MODE:-full}" = lora ] && extra="$extra --set train.mode=lora --set train.lora.rank=16"
    COMPILE=1 LAYERS=${LAYERS:-6} MB=${MB:-4} EXTRA="$extra" bash tests/bench/h200_families.sh ${SPEED_WHAT:-all} ${PRESET:-gemma-4-31b} 2>&1 | tail -12 | tee -a $OUT/gemma4.log
  fi
done
ls -la $OUT
