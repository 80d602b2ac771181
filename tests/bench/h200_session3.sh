#!/usr/bin/env bash
# Third H200 batch, from the repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_session3.sh restore     # build, environment, NaN diagnosis, restoration proof (issue 6)
#   bash tests/bench/h200_session3.sh estimator   # the estimator's closed loop on 1B-class presets (issue 5)
# Each result lands in $OUT as soon as it exists; every stage has its own time limit so the
# later ones still run.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CLI=build-cuda/app/pilotbench-cli
start=$(date +%s)
PB_TARGETS="pilotbench-cli bench_estimator" scripts/build-cuda > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "build_seconds=$(( $(date +%s) - start ))"
case "${1:-restore}" in
restore)
  $CLI --version
  pilot=(pilot --config preset:llama-3.2-1b --device cuda:0 --warmup 1 --steps 3 --db /tmp/h.db --jsonl --set train.micro_batch=2)
  # The environment event (driver, cuDNN, device) of a real run.
  timeout 120 $CLI "${pilot[@]}" > "$OUT/pilot_bf16mixed.jsonl" 2> "$OUT/pilot_bf16mixed.err"; echo "bf16-mixed pilot exit=$?"
  tail -1 "$OUT/pilot_bf16mixed.jsonl" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d.get("environment")); print({k: d.get(k) for k in ("step_time_mean_ms","tokens_per_s","peak_allocated_bytes","peak_reserved_bytes","peak_device_used_bytes","losses")})'
  # Diagnosis of the NaN losses seen with pure bf16 + deterministic + math attention.
  for variant in "bf16 math det" "bf16 math nodet" "bf16 sdpa det"; do
    set -- $variant
    extra=(--set train.precision=$1 --set train.attention=$2)
    [ "$3" = det ] && extra+=(--set deterministic=true)
    timeout 90 $CLI "${pilot[@]}" "${extra[@]}" > "$OUT/pilot_${1}_${2}_${3}.jsonl" 2>&1
    echo "$variant exit=$? losses: $(grep -o '"loss":[^,]*' "$OUT/pilot_${1}_${2}_${3}.jsonl" | head -5 | tr '\n' ' ')"
  done
  # The proof: bf16 autocast (fp32 masters), deterministic algorithms, fused attention.
  s=$(date +%s)
  timeout 330 $CLI restore-check --config preset:llama-3.2-1b --device cuda:0 --steps-before 3 --steps-after 3 \
    --checkpoint-dir /tmp/ckpt --db /tmp/h.db --jsonl --set train.micro_batch=2 --set train.schedule.warmup_steps=2 \
    --set train.schedule.total_steps=6 --set deterministic=true > "$OUT/restore_bf16mixed_det.json" 2> "$OUT/restore_bf16mixed_det.err"
  echo "restore-check exit=$? in $(( $(date +%s) - s )) s"; tail -c 3000 "$OUT/restore_bf16mixed_det.json"; tail -5 "$OUT/restore_bf16mixed_det.err"
  ;;
diag)
  # Which part of a CUDA step makes the second step's loss NaN: optimizer path, clipping, tying, length.
  pilot=(pilot --device cuda:0 --warmup 1 --steps 2 --db /tmp/h.db --jsonl --set train.micro_batch=2)
  while read -r name args; do
    timeout 60 $CLI "${pilot[@]}" $args < /dev/null > "$OUT/diag_$name.jsonl" 2>&1
    echo "$name exit=$? $(grep -o '"\(loss\|grad_norm\)":[^,]*' "$OUT/diag_$name.jsonl" | head -6 | tr '\n' ' ')"
  done <<'VARIANTS'
fused --config preset:llama-3.2-1b
adam --config preset:llama-3.2-1b --set train.optimizer.name=adam
sgd --config preset:llama-3.2-1b --set train.optimizer.name=sgd
noclip --config preset:llama-3.2-1b --set train.grad_clip=0
untied --config preset:llama-3.2-1b --set model.tie_embeddings=false
short --config preset:llama-3.2-1b --set train.seq_len=256
fp32 --config preset:llama-3.2-1b --set train.precision=fp32 --set train.seq_len=256
small --config preset:small
tiny --config preset:tiny
VARIANTS
  ;;
all)
  # After the fused AdamW fix: the engine against Transformers again (losses beside the timings),
  # the restoration proof, then the estimator's closed loop, each with its own limit.
  $CLI config new --preset llama-3.2-1b --out /tmp/l1b.json
  timeout 100 $CLI pilot --config /tmp/l1b.json --device cuda:0 --steps 10 --warmup 3 --jsonl --db /tmp/h.db > "$OUT/pilot_l1b.jsonl" 2> "$OUT/pilot_l1b.err"
  echo "pilot exit=$?"
  timeout 100 python3 tests/bench/hf_reference.py --config /tmp/l1b.json --steps 10 --warmup 3 > "$OUT/hf_l1b.json"
  tail -1 "$OUT/pilot_l1b.jsonl" | python3 -c '
import json,sys
s=json.loads(sys.stdin.read()); h=json.load(open(sys.argv[1]))
print("pilotbench: %.1f ms/step, %.0f tok/s, MFU %s, peak alloc %.2f GiB, reserved %.2f GiB, device used %.2f GiB, optimizer %s, attention %s, losses %s" % (
 s["step_time_mean_ms"], s["tokens_per_s"], s["mfu"], s["peak_allocated_bytes"]/2**30, s["peak_reserved_bytes"]/2**30, s["peak_device_used_bytes"]/2**30, s["optimizer_path"], s["attention_path"], s["losses"]))
print("transformers: %.1f ms/step, %.0f tok/s, MFU %.3f, peak alloc %.2f GiB, last loss %.4f" % (h["step_ms"], h["tokens_per_s"], h["mfu"], h["peak_allocated_bytes"]/2**30, h["loss"]))
print("ratio tokens/s %.3f, peak allocated %.3f" % (s["tokens_per_s"]/h["tokens_per_s"], s["peak_allocated_bytes"]/h["peak_allocated_bytes"]))
' "$OUT/hf_l1b.json"
  s=$(date +%s)
  timeout 240 $CLI restore-check --config preset:llama-3.2-1b --device cuda:0 --steps-before 2 --steps-after 2 \
    --checkpoint-dir /tmp/ckpt --db /tmp/h.db --jsonl --set train.micro_batch=2 --set train.schedule.warmup_steps=2 \
    --set train.schedule.total_steps=4 --set deterministic=true > "$OUT/restore_bf16mixed_det.json" 2> "$OUT/restore_bf16mixed_det.err"
  echo "restore-check exit=$? in $(( $(date +%s) - s )) s"; tail -c 3000 "$OUT/restore_bf16mixed_det.json"; echo; tail -3 "$OUT/restore_bf16mixed_det.err"
  rm -rf /tmp/ckpt
  left=$(( 590 - ($(date +%s) - start) ))
  echo "estimator with ${left} s left"
  timeout $left build-cuda/tests/bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b --quick 2>&1 | tee "$OUT/estimator_cuda.txt"
  ;;
estimator)
  timeout 560 build-cuda/tests/bench_estimator --device cuda:0 --presets llama-3.2-1b,qwen2.5-0.5b --quick 2>&1 | tee "$OUT/estimator_cuda.txt"
  ;;
esac
