#!/usr/bin/env bash
# H200 kernels comparison (issue 16), from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_kernels.sh [ours|all] [CONFIG...]
# CONFIG: llama-3.2-1b, llama-3.2-1b-lora (LoRA r16 on q,k,v,o), qwen2.5-0.5b (all three when none
# is named). Each row in one call: our pilot with train.kernels eager and fused, then (with `all`)
# Transformers eager and + torch.compile (PEFT for the LoRA row, its base in bf16 as ours; then
# eager with an fp32 base, and eager without PEFT's input casts), 3 warm-up + 10 measured steps.
# Prints one table (our rows with the estimator's error against their training steps' peak, from
# --memory-snapshot); every row's JSON goes to $OUT/kernels.jsonl. KERNELS="fused" runs one path only;
# COMPILE_ONLY=1 runs only Transformers + torch.compile (PEFT's for the LoRA row) beside ours. EXTRA
# adds --set options to every config (EXTRA="--set train.lora.dropout=0.05": PEFT's rows take it too;
# with train.cuda_graph=true our rows are labelled "+ CUDA graph").
. tests/bench/h200_build.sh
WHAT=${1:-all}; shift || true
CONFIGS=("$@"); [ ${#CONFIGS[@]} = 0 ] && CONFIGS=(llama-3.2-1b llama-3.2-1b-lora qwen2.5-0.5b)
W=/tmp/kern; mkdir -p $W
graph=""; [[ "${EXTRA:-}" == *cuda_graph=true* ]] && graph=" + CUDA graph"
for C in "${CONFIGS[@]}"; do
  preset=${C%-lora}; extra=(); [ $C != $preset ] && extra=(--set train.mode=lora)
  $CLI config new --preset $preset "${extra[@]}" --set train.micro_batch=8 ${EXTRA:-} --out $W/$C.json
  for K in ${KERNELS:-eager fused}; do
    snap=$W/snapshot-$C-$K.json
    $CLI pilot --config $W/$C.json --device cuda:0 --set train.kernels=$K --steps 10 --warmup 3 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/$C-$K.err | tail -1 \
      | python3 tests/bench/pilot_row.py $snap "{\"config\": \"$C\", \"impl\": \"pilotbench $K$graph\"}" \
      >> $OUT/kernels.jsonl || tail -3 $W/$C-$K.err
  done
  [ $WHAT = ours ] && continue
  variants=("" --compile); [ $C != $preset ] && variants+=("--lora-base fp32" --peft-no-input-cast)
  [ "${COMPILE_ONLY:-0}" = 1 ] && variants=(--compile)
  for variant in "${variants[@]}"; do
    python3 tests/bench/hf_reference.py --config $W/$C.json --steps 10 --warmup 3 $variant 2>$W/$C-hf.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['config']='$C'; print(json.dumps(d))" >> $OUT/kernels.jsonl || tail -3 $W/$C-hf.err
  done
done
python3 - "$OUT/kernels.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# MFU of every row at our count of the step's model FLOPs (frozen weights get no weight gradient,
# embeddings are looked up, a sliding layer scores its window): hf_reference.py's own "mfu" counts
# 6 x parameters a token, which for LoRA (and Gemma 4's per-layer table) is work no step does, so its
# rows' MFU read higher than ours at a slower step. A config's rows do the same work.
work = {r["config"]: r["mfu"] * r["step_ms"] for r in rows if r.get("impl", "").startswith("pilotbench") and r.get("mfu") and r.get("step_ms")}
print("%-18s %-42s %9s %10s %6s %10s %9s" % ("config", "implementation", "ms/step", "tokens/s", "MFU", "peak GiB", "estimate"))
for r in rows:
    mfu, err = (work[r["config"]] / r["step_ms"] if r["config"] in work and r.get("step_ms") else None), r.get("estimate_error_pct")
    print("%-18s %-42s %9.1f %10.0f %6s %10.2f %9s" % (r["config"], r.get("impl"), r.get("step_ms") or 0, r.get("tokens_per_s") or 0,
          "%.1f%%" % (100 * mfu) if mfu else "-", (r.get("peak_allocated_bytes") or 0) / 2**30, "%+.2f%%" % err if err is not None else ""))
PY
