#!/usr/bin/env bash
# The warm call after tests/bench/h200_lora_node.sh (the same BUILD_DIR, whose cold build takes
# nearly all of a 600 s call), from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_lora_followup.sh
#   1. engine_tst_lora_dropout_grads' and engine_tst_mixed_linear's card rows of LoRA dropout's
#      gradient kernels (addDroppedLowRank, droppedInputProduct), against float64 and the adapters added after;
#   2. the LoRA node A/B with dropout 0.05 (Llama-3.2-1B, Qwen2.5-0.5B; r16 q,k,v,o, 2048 x 8, fused);
#   3. the CUDA graph A/B (bench_probe_overhead --graph-ab) of Llama-3.2-1B full and LoRA;
#   4. Llama-3.2-1B full and LoRA against Transformers + torch.compile (PEFT's for LoRA) with
#      train.cuda_graph on (h200_kernels.sh, ours fused only).
# Text goes to $OUT/followup.txt, the rows of 4 to $OUT/kernels.jsonl.
PB_TARGETS="${PB_TARGETS:-pilotbench-cli bench_probe_overhead engine_tst_mixed_linear engine_tst_lora_dropout_grads}" . tests/bench/h200_build.sh
LOG=$OUT/followup.txt
stamp() { echo "== $(date +%T) $*" | tee -a $LOG; }
stamp "card: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
$BUILD_DIR/tests/engine_tst_lora_dropout_grads 2>&1 | grep -E "FAIL|Totals" -A2 | tee -a $LOG
$BUILD_DIR/tests/engine_tst_mixed_linear adaptersInsideMatchTheAddAfter 2>&1 | grep -E "FAIL|Totals" -A2 | tee -a $LOG
B=$BUILD_DIR/tests/bench_probe_overhead
LORA=(--set train.mode=lora)
for P in llama-3.2-1b qwen2.5-0.5b; do
  stamp "lora node A/B with dropout 0.05, $P"
  $B --device cuda:0 --preset $P --steps 10 --set train.micro_batch=8 --set train.kernels=fused "${LORA[@]}" --set train.lora.dropout=0.05 --lora-node-ab 2>&1 | tail -1 | tee -a $LOG
done
for MODE in full lora; do
  stamp "CUDA graph A/B, llama-3.2-1b $MODE"
  $B --device cuda:0 --preset llama-3.2-1b --steps 10 --set train.micro_batch=8 --set train.kernels=fused $([ $MODE = lora ] && echo "${LORA[@]}") --graph-ab 2>&1 | tail -1 | tee -a $LOG
done
stamp "against Transformers + compile, train.cuda_graph on"
EXTRA="--set train.cuda_graph=true" PB_TARGETS=pilotbench-cli KERNELS=fused COMPILE_ONLY=1 bash tests/bench/h200_kernels.sh all llama-3.2-1b llama-3.2-1b-lora 2>&1 | tail -5 | tee -a $LOG
stamp done
