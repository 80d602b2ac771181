#!/usr/bin/env bash
# H200, issue 33 (second call): the whole run's peak (construction, warm-up, steps, validation)
# against the estimate, LoRA r16/r64 over attention and all linear layers of a 7B (mistral-7b) and
# an 8B (llama-3.1-8b) model, seq 2048 and 4096, micro-batch 2, bf16-mixed and pure bf16; then the
# issue's own row (7B, r64 all-linear, seq 4096, micro-batch 4, recompute, fused), which peaked
# while the model was built. From the repository root with .cuda-deps staged:
#   bash tests/bench/h200_run_peak.sh        (MODELS, RANKS, TARGETS, SEQS, PRECISIONS narrow it)
. tests/bench/h200_build.sh
W=/tmp/runpeak; rm -rf $W; mkdir -p $W
row() { # name, then pilot arguments
  local name=$1; shift
  local snap=$W/$name.json
  $CLI pilot "$@" --device cuda:0 --steps 1 --warmup 1 --set validation.every_steps=2 --set validation.batches=1 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/err.txt | tail -1 \
    | python3 tests/bench/pilot_row.py $snap "{\"row\": \"$name\"}" | tee -a $OUT/run_peak.jsonl
  [ ${PIPESTATUS[0]} = 0 ] || tail -2 $W/err.txt
}
for model in ${MODELS:-mistral-7b llama-3.1-8b}; do for prec in ${PRECISIONS:-bf16-mixed bf16}; do for seq in ${SEQS:-2048 4096}; do
  for rank in ${RANKS:-16 64}; do for targets in ${TARGETS:-q_proj,k_proj,v_proj,o_proj all-linear}; do
    t=$([ $targets = all-linear ] && echo all || echo attn)
    row "$model-$prec-$seq-r$rank-$t" --config preset:$model --set train.mode=lora --set train.lora.rank=$rank --set train.lora.targets=$targets \
        --set train.precision=$prec --set train.seq_len=$seq --set train.micro_batch=2
  done; done
done; done; done
row "issue-mistral-7b-r64-all-4096x4-recompute-fused" --config preset:mistral-7b --set train.mode=lora --set train.lora.rank=64 --set train.lora.targets=all-linear \
    --set train.seq_len=4096 --set train.micro_batch=4 --set train.recompute=true --set train.kernels=fused
