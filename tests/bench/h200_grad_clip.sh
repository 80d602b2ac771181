#!/usr/bin/env bash
# H200: gradient clipping, LibTorch's per-parameter clip_grad_norm_ against the engine's
# multi-tensor clipGradNorm on 8 layers of Llama-3.1-8B's widths (one run, bench_grad_clip), then
# bare fused steps of that shape (seq 4096) in bf16-mixed and fp8-rowwise. From the repository
# root with .cuda-deps staged:
#   bash tests/bench/h200_grad_clip.sh
PB_TARGETS="bench_grad_clip bench_probe_overhead engine_tst_optimizer" . tests/bench/h200_build.sh
$BUILD_DIR/tests/engine_tst_optimizer > $OUT/engine_tst_optimizer.txt 2>&1; grep -E "FAIL|Totals" -A2 $OUT/engine_tst_optimizer.txt | head
$BUILD_DIR/tests/bench_grad_clip --device cuda:0 | tee $OUT/grad_clip.txt
for P in ${PRECISIONS:-bf16-mixed fp8-rowwise}; do
  $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 --set model.layers=${LAYERS:-8} --set train.seq_len=4096 \
    --set train.kernels=fused --set train.precision=$P 2>&1 | tail -3 | tee -a $OUT/steps.txt
done
