#!/usr/bin/env bash
# H200 sparse families (issue 29), from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_sparse.sh [parity|speed|rows|all] [PRESET...]
# Each preset reduced to as many layers as let full fine-tuning fit one card ($LAYERS_<preset> or the
# table below), seq $SEQ (2048) x micro-batch $MB (2).
#  parity: our pilot trains 1 step on a token file whose samples are all one sequence and checkpoints;
#          Transformers 5.17 loads that checkpoint (its own from_pretrained, hub names) and computes
#          the loss on that sequence, beside our own loss of step 2 (same weights, same tokens); fp32
#          and bf16-mixed; full fine-tuning, then LoRA (r16 on the preset's attention targets) whose
#          trained adapters PEFT takes over the base from the same checkpoint. Rows say mode=full|lora
#          ($PARITY_MODES, default "full lora"; $PARITY_PRECISIONS, default "fp32 bf16-mixed").
#  speed:  ms/step and peak allocated, our eager and fused paths beside Transformers eager (same
#          depth, bf16 autocast over fp32 masters, fused AdamW), full and LoRA; with
#          PILOTBENCH_EXPERTS=loop our experts take the per-expert loop instead of the grouped GEMM.
#  rows:   the estimator against the whole run's peak (pilot_row.py: every phase) for full/LoRA x
#          eager/fused.
. tests/bench/h200_build.sh
WHAT=${1:-all}; shift || true
PRESETS=("$@"); [ ${#PRESETS[@]} = 0 ] && PRESETS=(gpt-oss-20b moonlight-16b-a3b llama-4-scout-17b-16e)
declare -A LAYERS=([gpt-oss-20b]=4 [moonlight-16b-a3b]=4 [llama-4-scout-17b-16e]=2)
[ -n "${LAYERS_ALL:-}" ] && for p in "$@"; do LAYERS[$p]=$LAYERS_ALL; done
SEQ=${SEQ:-2048}; MB=${MB:-2}; STEPS=${STEPS:-5}
W=${W:-/tmp/sparse}; mkdir -p $W  # one per concurrent run of this script
W=$W python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
seq = rng.integers(0, 32000, size=513, dtype=np.uint16)  # one parity sample: seq 512 + 1  # below every vocabulary here
import os
np.tile(seq, 256).tofile(os.environ.get("W", "/tmp/sparse") + "/same.bin")
PY
DATA=(--set data.kind=tokens --set data.path=$W/same.bin --set data.token_dtype=uint16)
for P in "${PRESETS[@]}"; do
  L=${LAYERS[$P]:-4}
  # $SETS: more overrides for the reduced model (Gemma 4 E2B: --set model.kv_shared_layers=4 at 10 layers).
  $CLI config new --preset $P --set model.layers=$L ${SETS:-} --set train.seq_len=$SEQ --set train.micro_batch=$MB --out $W/$P.json || continue
  HFC=tests/data/hf/$P/config.json
  if [ $WHAT = parity ] || [ $WHAT = all ]; then
    for mode in ${PARITY_MODES:-full lora}; do
      # LoRA: lora_B starts at zero, and the preset's schedule (warm-up from lr/100) would leave it
      # near zero after one step, so the parity would only be the base's. A constant $LORA_LR from
      # step 1 moves the adapters (1-layer Moonlight, seq 512, on the CPU in fp32: 1e-2 moved the loss
      # by 0.0044, near bf16's noise; 1e-1 by 0.044, clipping at 1 as the run). Our step-1 loss is
      # the base alone; the reference reports its loss_without_adapters beside it.
      # Still SGD without momentum: no optimizer state to store.
      extra=(); [ $mode = lora ] && extra=(--set train.mode=lora --set train.lora.rank=16 --set train.lr=${LORA_LR:-1e-1} --set train.schedule.kind=constant --set train.schedule.warmup_steps=0)
      for prec in ${PARITY_PRECISIONS:-fp32 bf16-mixed}; do
        echo "== $P (${PARITY_LAYERS:-1} layers) parity, $mode, $prec"
        tag=$P-$mode-$prec
        rm -rf $W/ck-*  # one at a time; SGD without momentum keeps no optimizer state (Scout's was 48 GB)
        $CLI pilot --config $W/$P.json --set model.layers=${PARITY_LAYERS:-1} ${PARITY_SETS:-} --device cuda:0 "${DATA[@]}" "${extra[@]}" --set train.precision=$prec --set train.seq_len=512 --set train.micro_batch=1 \
            --set train.optimizer=sgd --set train.momentum=0 --steps 2 --warmup 0 --set checkpoint.every_steps=1 --checkpoint-dir $W/ck-$tag --db $W/h.db --jsonl 2>$W/$tag.parity.err | tail -1 > $W/$tag.parity.json
        python3 -c "import json; d=json.load(open('$W/$tag.parity.json')); print(json.dumps({'preset': '$P', 'mode': '$mode', 'precision': '$prec', 'ours_losses': d.get('losses'), 'verdict': d.get('verdict'), 'message': d.get('message')}))" | tee -a ${PARITY_OUT:-$OUT/sparse_parity.jsonl}
        # The reference reads the run config the step folder holds: the run as it ran (depth,
        # precision, mode, LoRA rank/alpha/targets), nothing rebuilt beside it.
        step=$(ls -d $W/ck-$tag/step-* | head -1)
        python3 tests/bench/hf_sparse_reference.py --config $step/config.json --hf-config $HFC --weights $step --tokens $W/same.bin --steps 0 2>$W/$tag.hfw.err \
            | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d.update(preset='$P', mode='$mode', precision='$prec'); print(json.dumps(d))" | tee -a ${PARITY_OUT:-$OUT/sparse_parity.jsonl}
        # A failed load keeps its whole report (Transformers prints which keys and shapes differ above the error).
        [ ${PIPESTATUS[0]} = 0 ] || { tail -5 $W/$tag.hfw.err | tee -a $OUT/sparse.err; cp $W/$tag.hfw.err $OUT/; }
        tail -2 $W/$tag.parity.err | grep -i error | tee -a $OUT/sparse.err
      done
    done
    rm -rf $W/ck-*
  fi
  if [ $WHAT = speed ] || [ $WHAT = all ]; then
    for mode in ${MODES:-full lora}; do
      extra=(); [ $mode = lora ] && extra=(--set train.mode=lora --set train.lora.rank=16)
      for K in eager fused; do
        snap=$W/snap-$P-$mode-$K.json
        $CLI pilot --config $W/$P.json --device cuda:0 "${extra[@]}" --set train.kernels=$K --steps $STEPS --warmup 3 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/$P-$K.err | tail -1 \
          | python3 tests/bench/pilot_row.py $snap "{\"config\": \"$P\", \"mode\": \"$mode\", \"impl\": \"pilotbench $K\"}" | tee -a $OUT/sparse_speed.jsonl || tail -3 $W/$P-$K.err
        if [ $K = fused ]; then
          PILOTBENCH_EXPERTS=loop $CLI pilot --config $W/$P.json --device cuda:0 "${extra[@]}" --set train.kernels=$K --steps $STEPS --warmup 3 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/$P-loop.err | tail -1 \
            | python3 tests/bench/pilot_row.py $snap "{\"config\": \"$P\", \"mode\": \"$mode\", \"impl\": \"pilotbench $K experts-loop\"}" | tee -a $OUT/sparse_speed.jsonl || tail -3 $W/$P-loop.err
        fi
      done
      $CLI config new --preset $P --set model.layers=$L ${SETS:-} --set train.seq_len=$SEQ --set train.micro_batch=$MB "${extra[@]}" --out $W/$P-$mode.json >/dev/null
      python3 tests/bench/hf_sparse_reference.py --config $W/$P-$mode.json --hf-config $HFC --steps $STEPS --warmup 3 2>$W/$P-hf.err \
        | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d.update(config='$P', mode='$mode'); print(json.dumps(d))" | tee -a $OUT/sparse_speed.jsonl || tail -3 $W/$P-hf.err
    done
  fi
done
python3 - "$OUT/sparse_speed.jsonl" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    sys.exit(0)
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%-24s %-5s %-34s %9s %10s %10s %9s %9s" % ("config", "mode", "implementation", "ms/step", "tokens/s", "peak GiB", "est/step", "est/run"))
for r in rows:
    print("%-24s %-5s %-34s %9.1f %10.0f %10.2f %9s %9s" % (r.get("config"), r.get("mode"), r.get("impl"), r.get("step_ms") or 0, r.get("tokens_per_s") or 0,
          (r.get("training_peak_bytes") or r.get("peak_allocated_bytes") or 0) / 2**30,
          "%+.2f%%" % r["estimate_error_pct"] if r.get("estimate_error_pct") is not None else "",
          "%+.2f%%" % r["run_peak_error_pct"] if r.get("run_peak_error_pct") is not None else ""))
PY
