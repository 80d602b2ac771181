#!/bin/bash
# CPU: the estimate against the measured training steps' peak for each family named, in full and
# LoRA (r8, all linear layers), eager and fused, with and without recompute: the models of
# tests/data/hf-parity widened to a vocabulary of 2048 and 2 x 256 tokens, bf16-mixed, without
# weights, `pilot --steps 2 --warmup 1 --memory-snapshot` (the setup of tst_cli_pilot's
# estimatorMatchesEachFamily). PRECISION (bf16-mixed) sets train.precision (fp32, bf16: the
# estimator's paths outside autocast), RANK (8) the LoRA rank, DROPOUT (0) train.lora.dropout. From the
# repository root:
#   bash tests/bench/cpu_family_estimates.sh build/app/pilotbench-cli phi3 gemma3_text llama gemma2
#   PRECISION=fp32 bash tests/bench/cpu_family_estimates.sh build/app/pilotbench-cli qwen3_next gemma2
CLI=$(realpath "$1"); shift
PARITY=$(cd "$(dirname "$0")/../data/hf-parity" && pwd)
W=$(mktemp -d); cd "$W" || exit 1
for f in "$@"; do for mode in full lora; do for k in eager fused; do for rc in false true; do
  $CLI --log-level error config import-hf "$PARITY/$f" --set model.vocab_size=2048 --set model.max_positions=256 --set model.weights_path= \
    --set train.seq_len=256 --set train.micro_batch=2 --set train.lora.targets=all-linear --set train.lora.rank=${RANK:-8} --set train.mode=$mode \
    --set train.kernels=$k --set train.recompute=$rc --set train.precision=${PRECISION:-bf16-mixed} --set train.lora.dropout=${DROPOUT:-0} --out c.json >/dev/null 2>&1 || { echo "$f $mode $k recompute=$rc: import failed"; continue; }
  r=$($CLI --log-level error pilot --config c.json --steps 2 --warmup 1 --db r.db --memory-snapshot s.json 2>&1 | grep "training steps" | awk '{print $NF}')
  echo "$f $mode $k recompute=$rc: $r"
done; done; done; done
rm -rf "$W"
