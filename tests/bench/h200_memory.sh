#!/usr/bin/env bash
# Where the memory is at the peak, on a CUDA card (issue 18): pilots with --memory-snapshot, each
# snapshot's measured attribution beside the estimator's breakdown, written under $OUT. From the
# repository root on a CUDA host with .cuda-deps staged:  bash tests/bench/h200_memory.sh [ROWS...]
# Rows: mha-full mha-lora mha-recompute mha-lora-fp32 olmoe-lora-recompute llama-full (all when none named).
# mha-* is a 1.7B dense decoder of the shape issue 18 describes (as many KV heads as query heads,
# tied embeddings, 49k vocabulary); olmoe-* is the 4-layer OLMoE of tests/bench/h200_moe.sh.
. tests/bench/h200_build.sh
W=/tmp/memory; rm -rf $W; mkdir -p $W
MHA=(--preset llama-3.2-1b --set model.layers=24 --set model.kv_heads=32 --set model.vocab_size=49152)
$CLI config new "${MHA[@]}" --out $W/mha.json > /dev/null || exit 1
$CLI config new --preset olmoe-1b-7b --set model.layers=4 --set train.micro_batch=4 --out $W/olmoe.json > /dev/null || exit 1
$CLI config new --preset llama-3.2-1b --out $W/llama.json > /dev/null || exit 1
LORA=(--set train.mode=lora --set train.lora.rank=16)
row() {
  local name=$1 cfg=$2; shift 2
  echo "== $name"
  $CLI pilot --config $W/$cfg.json --device cuda:0 --steps 1 --warmup 2 --db $W/h.db --memory-snapshot $OUT/snapshot_$name.json "$@" 2>&1 \
    | grep -v "^\s*$" | tail -12
}
ROWS=("$@"); [ ${#ROWS[@]} -eq 0 ] && ROWS=(mha-full mha-lora mha-recompute mha-lora-fp32 olmoe-lora-recompute llama-full)
for r in "${ROWS[@]}"; do
  case $r in
    mha-full) row $r mha --set train.micro_batch=4 ;;
    mha-lora) row $r mha --set train.micro_batch=4 "${LORA[@]}" ;;
    mha-recompute) row $r mha --set train.micro_batch=8 --set train.recompute=true ;;
    mha-lora-fp32) row $r mha --set train.micro_batch=2 --set train.precision=fp32 "${LORA[@]}" ;;
    olmoe-lora-recompute) row $r olmoe --set train.seq_len=1024 --set train.recompute=true "${LORA[@]}" ;;
    llama-full) row $r llama ;;
    *) echo "unknown row $r"; exit 2 ;;
  esac
done
