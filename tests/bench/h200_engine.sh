#!/usr/bin/env bash
# H200 measurements of the pilot engine (issue 4), run on a CUDA host from the repository root:
#   bash tests/bench/h200_engine.sh        (needs .cuda-deps staged, see ../shared/cuda-host)
# Builds against the host's PyTorch, then runs the llama-3.2-1b preset pilot and the Transformers
# reference on the same configuration, side by side, and prints both.
set -uo pipefail
OUT=${OUT:-/tmp/pb-out}
mkdir -p "$OUT"
. .cuda-deps/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
PB_TARGETS="pilotbench-cli pilotbench" scripts/build-cuda > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
echo "build_seconds=$(( $(date +%s) - start ))"
CLI=build-cuda/app/pilotbench-cli
$CLI --version
build-cuda/app/pilotbench --version
$CLI config new --preset llama-3.2-1b --out /tmp/l1b.json
$CLI pilot --config /tmp/l1b.json --device cuda:0 --steps 10 --warmup 3 --jsonl --db /tmp/h.db > "$OUT/pilot_l1b.jsonl"
echo "pilot exit=$?"
python3 tests/bench/hf_reference.py --config /tmp/l1b.json --steps 10 --warmup 3 | tee "$OUT/hf_l1b.json"
tail -1 "$OUT/pilot_l1b.jsonl" | python3 -c '
import json,sys
s=json.loads(sys.stdin.read()); h=json.load(open(sys.argv[1]))
print("pilotbench: %.1f ms/step, %.0f tok/s, MFU %s, peak alloc %.2f GiB, peak reserved %.2f GiB, device used %.2f GiB, optimizer %s, attention %s" % (
 s["step_time_mean_ms"], s["tokens_per_s"], s["mfu"], s["peak_allocated_bytes"]/2**30, s["peak_reserved_bytes"]/2**30, s["peak_device_used_bytes"]/2**30, s["optimizer_path"], s["attention_path"]))
print("transformers: %.1f ms/step, %.0f tok/s, MFU %.3f, peak alloc %.2f GiB" % (h["step_ms"], h["tokens_per_s"], h["mfu"], h["peak_allocated_bytes"]/2**30))
print("ratio tokens/s %.3f, peak allocated %.3f" % (s["tokens_per_s"]/h["tokens_per_s"], s["peak_allocated_bytes"]/h["peak_allocated_bytes"]))
' "$OUT/hf_l1b.json"
