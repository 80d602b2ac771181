#!/usr/bin/env bash
# H200, issues 29 and 33: per-expert MoE families with their experts in pools (one allocation per
# layer and projection kind) and run as grouped GEMMs. From the repository root with .cuda-deps
# staged:  bash tests/bench/h200_pooled_experts.sh [qmoe|moonlight|all]
#  qmoe:      issue 33's Qwen2-MoE-architecture config (60 experts of 2048 x 1408, top-4, shared expert
#             5632 with its gate, 6 layers, seq 2048 x 4, bf16-mixed, 2 warm-up steps): full and
#             LoRA all-linear with and without the shared expert, the variants that were past 1%
#             (fp32, vocabulary 32000) and pure bf16; the full shared row again with
#             PILOTBENCH_EXPERTS=loop. Each row: step time and the estimate against the training
#             steps' and the whole run's peak (pilot_row.py).
#             $ROWS picks rows by name.
#  moonlight: moonlight-16b-a3b at 4 layers, seq 2048 x 2, full and LoRA r16 (attention): our eager
#             and fused paths grouped and looped, beside Transformers eager (h200_sparse.sh speed).
. tests/bench/h200_build.sh
WHAT=${1:-all}
W=/tmp/pooled; rm -rf $W; mkdir -p $W
if [ $WHAT = qmoe ] || [ $WHAT = all ]; then
  QMOE=(--config preset:tiny-moe --set model.layers=6 --set model.hidden_size=2048 --set model.attention_heads=16 --set model.kv_heads=16 --set model.qk_norm=none
        --set model.vocab_size=151936 --set model.max_positions=8192 --set model.intermediate_size=5632 --set model.rope_theta=1000000 --set model.moe.experts=60
        --set model.moe.experts_per_token=4 --set model.moe.expert_intermediate_size=1408 --set model.moe.dense_layers=[] --set model.moe.aux_loss_weight=0.001
        --set train.seq_len=2048 --set train.micro_batch=4 --set train.precision=bf16-mixed --set model.attention_bias=true)
  SHARED_ON=(--set model.moe.shared_expert_intermediate_size=5632 --set model.moe.shared_expert_gate=true)
  SHARED_OFF=(--set model.moe.shared_expert_intermediate_size=0 --set model.moe.shared_expert_gate=false)
  r() { local name=$1; shift; $CLI pilot "${QMOE[@]}" "$@" --device cuda:0 --steps ${STEPS:-2} --warmup 2 --db $W/h.db --jsonl --memory-snapshot $W/$name.json 2>$W/$name.err | tail -1 \
        | python3 tests/bench/pilot_row.py $W/$name.json "{\"row\": \"$name\", \"experts\": \"${PILOTBENCH_EXPERTS:-default}\"}" | tee -a $OUT/pooled_qmoe.jsonl || tail -3 $W/$name.err; }
  for row in ${ROWS:-full-shared full-noshared lora-shared lora-noshared full-shared-vocab32k full-shared-bf16 full-shared-fp32 full-shared-loop}; do
    case $row in
      full-shared) r $row "${SHARED_ON[@]}" ;;
      full-noshared) r $row "${SHARED_OFF[@]}" ;;
      lora-shared) r $row "${SHARED_ON[@]}" --set train.mode=lora --set train.lora.targets=all-linear ;;
      lora-noshared) r $row "${SHARED_OFF[@]}" --set train.mode=lora --set train.lora.targets=all-linear ;;
      full-shared-vocab32k) r $row "${SHARED_ON[@]}" --set model.vocab_size=32000 ;;
      full-shared-bf16) r $row "${SHARED_ON[@]}" --set train.precision=bf16 ;;
      full-shared-fp32) r $row "${SHARED_ON[@]}" --set train.precision=fp32 ;;
      full-shared-loop) PILOTBENCH_EXPERTS=loop r $row "${SHARED_ON[@]}" ;;
    esac
  done
fi
if [ $WHAT = moonlight ] || [ $WHAT = all ]; then
  STEPS=${STEPS:-4} MODES=${MODES:-full lora} bash tests/bench/h200_sparse.sh speed moonlight-16b-a3b
fi
