#!/usr/bin/env bash
# H200, issue 31 (QLoRA): the NF4 kernel against the composite path (engine_tst_nf4 on the GPU), then
# Llama-3.1-8B at full depth under train.mode = qlora beside bf16 LoRA on the same shape (all
# linear layers, rank 16, bf16-mixed): seq 4096 with recompute (eager and fused), seq 2048 without
# (eager and fused) and seq 8192 with recompute (fused); peak, estimate and step time per row. From the repository root with .cuda-deps staged:
#   bash tests/bench/h200_qlora.sh        (MODES, ROWS narrow it)
PB_TARGETS="pilotbench-cli engine_tst_nf4" . tests/bench/h200_build.sh
$BUILD_DIR/tests/engine_tst_nf4 > $OUT/tst_nf4.txt 2>&1; tail -3 $OUT/tst_nf4.txt
W=/tmp/qlora; rm -rf $W; mkdir -p $W
row() { # name, then pilot arguments
  local name=$1; shift
  local snap=$W/$name.json
  $CLI pilot "$@" --device cuda:0 --steps ${STEPS:-4} --warmup 1 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/err.txt | tail -1 \
    | python3 tests/bench/pilot_row.py $snap "{\"row\": \"$name\"}" | tee -a $OUT/qlora.jsonl
  [ ${PIPESTATUS[0]} = 0 ] || tail -2 $W/err.txt
}
common="--config preset:llama-3.1-8b --set train.lora.rank=16 --set train.lora.targets=all-linear --set train.precision=bf16-mixed"
for mode in ${MODES:-qlora lora}; do
  for r in ${ROWS:-4096-recompute 4096-recompute-fused 2048 2048-fused 8192-recompute-fused}; do
    case $r in
      4096-recompute) extra="--set train.seq_len=4096 --set train.recompute=true" ;;
      4096-recompute-fused) extra="--set train.seq_len=4096 --set train.recompute=true --set train.kernels=fused" ;;
      2048) extra="--set train.seq_len=2048" ;;
      2048-fused) extra="--set train.seq_len=2048 --set train.kernels=fused" ;;
      8192-recompute-fused) extra="--set train.seq_len=8192 --set train.recompute=true --set train.kernels=fused" ;;
    esac
    row "llama-3.1-8b-$mode-$r" $common --set train.mode=$mode $extra
  done
done
