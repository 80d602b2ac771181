#!/usr/bin/env bash
# H200, issue 33 (first call): the restore proof on real (non-deterministic) kernels, each twice, on
# the default llama-3.2-1b config and on a mixture of experts (olmoe-1b-7b cut to 2 layers), then
# the shared-expert MoE rows (a Qwen2-MoE-architecture config: 60 experts, top-4, shared expert with
# its gate, 6 layers, seq 2048, micro-batch 4) with and without the shared expert, full and LoRA,
# with their --memory-snapshot files. From the repository root with .cuda-deps staged:
#   [RUNS=2] bash tests/bench/h200_restore_envelope.sh [llama] [moe] [qmoe]   (all three when none is named)
. tests/bench/h200_build.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/env; rm -rf $W; mkdir -p $W
PARTS=" ${*:-llama moe qmoe} "
[[ $PARTS = *" llama "* ]] && for i in $(seq ${RUNS:-2}); do
  echo "== restore-check llama-3.2-1b (default config), run $i"
  $CLI restore-check --config preset:llama-3.2-1b --steps-before 1 --steps-after 1 --device cuda:0 --checkpoint-dir $W/ck --db $W/h.db --jsonl 2>$W/err.txt | tail -1 | tee $OUT/restore_llama_$i.json | cut -c1-600
  tail -2 $W/err.txt
done
[[ $PARTS = *" moe "* ]] && for i in $(seq ${RUNS:-2}); do
  echo "== restore-check olmoe-1b-7b (2 layers), run $i"
  $CLI restore-check --config preset:olmoe-1b-7b --set model.layers=2 --steps-before 2 --steps-after 2 --device cuda:0 --checkpoint-dir $W/ck --db $W/h.db --jsonl 2>$W/err.txt | tail -1 | tee $OUT/restore_moe_$i.json | cut -c1-600
  tail -2 $W/err.txt
done
rm -rf $W/ck
[[ $PARTS = *" qmoe "* ]] || exit 0
QMOE=(--config preset:tiny-moe --set model.layers=6 --set model.hidden_size=2048 --set model.attention_heads=16 --set model.kv_heads=16 --set model.qk_norm=none
      --set model.vocab_size=151936 --set model.max_positions=8192 --set model.intermediate_size=5632 --set model.rope_theta=1000000 --set model.moe.experts=60
      --set model.moe.experts_per_token=4 --set model.moe.expert_intermediate_size=1408 --set model.moe.dense_layers=[] --set model.moe.aux_loss_weight=0.001
      --set train.seq_len=2048 --set train.micro_batch=4 --set train.precision=bf16-mixed --set model.attention_bias=true)
for shared in on off; do for mode in full lora; do
  extra=(--set train.mode=$mode --set train.lora.targets=all-linear)
  [ $shared = on ] && extra+=(--set model.moe.shared_expert_intermediate_size=5632 --set model.moe.shared_expert_gate=true) \
                   || extra+=(--set model.moe.shared_expert_intermediate_size=0 --set model.moe.shared_expert_gate=false)
  snap=$OUT/qmoe_${mode}_${shared}.json
  $CLI pilot "${QMOE[@]}" "${extra[@]}" --device cuda:0 --steps 1 --warmup 2 --db $W/h.db --jsonl --memory-snapshot $snap 2>$W/err.txt | tail -1 \
    | python3 tests/bench/pilot_row.py $snap "{\"model\": \"qwen2-moe-6l\", \"mode\": \"$mode\", \"shared\": \"$shared\"}" | tee -a $OUT/qmoe_rows.jsonl
  tail -1 $W/err.txt
done; done
