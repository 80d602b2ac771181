#!/usr/bin/env bash
# H200, issue 33: where a full fine-tuning MoE's unattributed bytes ("other tensors" in the memory
# snapshot) come from. A Qwen2-MoE-architecture config without its shared expert (60 experts of
# 2048 x 1408, 6 layers, seq 2048 x 4, bf16-mixed) against variants that change one thing each:
# vocabulary, expert count, optimizer, precision. Found: each 11 MiB fp32 expert matrix holds a
# 12 MiB caching-allocator block (cudaCachingBlockBytes). From the repository root with .cuda-deps
# staged:  bash tests/bench/h200_moe_other.sh
. tests/bench/h200_build.sh
W=/tmp/diag; rm -rf $W; mkdir -p $W
QMOE=(--config preset:tiny-moe --set model.layers=6 --set model.hidden_size=2048 --set model.attention_heads=16 --set model.kv_heads=16 --set model.qk_norm=none
      --set model.vocab_size=151936 --set model.max_positions=8192 --set model.intermediate_size=5632 --set model.rope_theta=1000000 --set model.moe.experts=60
      --set model.moe.experts_per_token=4 --set model.moe.expert_intermediate_size=1408 --set model.moe.dense_layers=[] --set model.moe.aux_loss_weight=0.001
      --set train.seq_len=2048 --set train.micro_batch=4 --set train.precision=bf16-mixed --set model.attention_bias=true
      --set model.moe.shared_expert_intermediate_size=0 --set model.moe.shared_expert_gate=false)
r() { local name=$1; shift; $CLI pilot "${QMOE[@]}" "$@" --device cuda:0 --steps 1 --warmup 1 --db $W/h.db --jsonl --memory-snapshot $OUT/$name.json 2>$W/e | tail -1 \
  | python3 tests/bench/pilot_row.py $OUT/$name.json "{\"row\": \"$name\"}" | cut -c1-330; python3 -c "
import json; s=json.load(open('$OUT/$name.json'))
print('   ', [(r['part'], r['difference_bytes']) for r in s['comparison'] if r['part'] in ('trainable_weights','blas_workspaces_and_other','activations')])"; }
r base
r vocab32k --set model.vocab_size=32000
r experts8 --set model.moe.experts=8 --set model.moe.experts_per_token=2
r sgd --set train.optimizer=sgd
r fp32 --set train.precision=fp32
r bf16 --set train.precision=bf16
