#!/usr/bin/env bash
# Issue 34's LoRA adapters inside the MixedLinear node, in one call of under 600 s from a cold
# build, from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_lora_node.sh
#   1. engine_tst_mixed_linear on the card (its card rows: the node against autocast's linear, and
#      the adapters inside against LoraLinearImpl's add after it);
#   2. bench_probe_overhead --lora-node-ab on Llama-3.2-1B and Qwen2.5-0.5B, LoRA r16 on q,k,v,o,
#      seq 2048 x 8, fused: both forms of the step in one process;
#   2b. the fused kernels' check and bandwidth table (h200_fused_kernels_check.py; with
#      KC_BASELINE=DIR, a tree holding core/kernels, each kernel timed beside that tree's), its two
#      libraries compiled beside the build;
#   3. where the card has more than 100 GB (an H200), issue 31's 16-layer FP8 step: h200_fp8_speed.sh's
#      bare steps of bf16-mixed and fp8-rowwise at Llama-3.1-8B's widths, seq 4096 x 4 (DEPTHS=16);
#   4. the LoRA row against PEFT + torch.compile (h200_kernels.sh, ours fused only, with the
#      estimator against the peak recorder);
# and, beside the build, the counts of tests/data/hf/olmo-3-7b (Transformers' own, for the preset's test).
# Text goes to $OUT/log.txt (the kernel check's whole output to $OUT/kcheck.txt), rows to $OUT/kernels.jsonl and $OUT/depths.jsonl.
# The count needs no build: it runs beside it.
mkdir -p "${OUT:=/tmp/pb-out}"
python3 tests/bench/hf_family_fixtures.py --counts --out /tmp/counts --only olmo-3-7b > $OUT/counts.txt 2>&1 &
KC=(python3 tests/bench/h200_fused_kernels_check.py --out /tmp/kc ${KC_BASELINE:+--baseline "$KC_BASELINE"})
"${KC[@]}" --compile-only > $OUT/kcheck-build.txt 2>&1 &
PB_TARGETS="${PB_TARGETS:-pilotbench-cli bench_probe_overhead engine_tst_mixed_linear}" . tests/bench/h200_build.sh
LOG=$OUT/log.txt
wait; tail -1 $OUT/counts.txt | tee -a $LOG
stamp() { echo "== $(date +%T) $*" | tee -a $LOG; }
stamp "card: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
$BUILD_DIR/tests/engine_tst_mixed_linear > $OUT/tst_mixed_linear.txt 2>&1
grep -E "FAIL|Totals" -A2 $OUT/tst_mixed_linear.txt | tee -a $LOG
B=$BUILD_DIR/tests/bench_probe_overhead
for P in llama-3.2-1b qwen2.5-0.5b; do
  stamp "lora node A/B, $P"
  $B --device cuda:0 --preset $P --steps 10 --set train.micro_batch=8 --set train.kernels=fused --set train.mode=lora --lora-node-ab 2>&1 | tail -1 | tee -a $LOG
done
stamp "fused kernels (check and bandwidth)"
"${KC[@]}" > $OUT/kcheck.txt 2>&1
grep -E "failed|rmsnorm bwd|add \+ rmsnorm|lora dropout|device copy" $OUT/kcheck.txt | cut -c1-200 | tee -a $LOG
if [ "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)" -gt 100000 ]; then
  stamp "fp8 depth 16"
  FP8_TARGETS=bench_probe_overhead MICRO=4 PROFILE=0 REFERENCE=0 DEPTHS=16 STEPS=0 bash tests/bench/h200_fp8_speed.sh 2>&1 | grep -E "probe|measured_ratio"
fi
stamp "LoRA row against PEFT + compile"
PB_TARGETS=pilotbench-cli KERNELS=fused COMPILE_ONLY=1 bash tests/bench/h200_kernels.sh all llama-3.2-1b-lora 2>&1 | tail -4 | tee -a $LOG
stamp done
