# What no card has run yet, in priority order, as tests/bench/device_queue.sh jobs: every call of a
# card session is the same command,  bash tests/bench/device_queue.sh tests/bench/queue_pending.sh
# (from the device snapshot's root, BUILD_DIR=/tmp/build-1, .cuda-deps staged). Written for the
# session after stop 72; each session rewrites it with what is still missing.
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
BIG=$(( ${mem:-0} > 100000 )) # an H200
# The cold build (stop 72 on an H100: 205 s, FusedKernels.cu 202 s of it, everything else beside it
# and done by 152 s; stop 71's was 334 s with the engine waiting behind nvcc). Cut by the deadline,
# the next call resumes it. The kernel check (KC_BASELINE: a tree holding the kernels to time
# against, e.g. .pbbase with the core/kernels of the commit before the ones under test) compiles its
# own libraries in its job, not beside the build.
KC=(python3 tests/bench/h200_fused_kernels_check.py --out /tmp/kc ${KC_BASELINE:+--baseline "$KC_BASELINE"})
job build 30 "PB_TARGETS='pilotbench-cli bench_probe_overhead' . tests/bench/h200_build.sh"
# Issue 31 (16 layers at Llama-3.1-8B's widths do not fit 80 GB): the 16-layer step on an H200.
fp8_depth16() {
job fp8depth16 300 'FP8_TARGETS=bench_probe_overhead MICRO=4 PROFILE=0 REFERENCE=0 DEPTHS=16 STEPS=0 bash tests/bench/h200_fp8_speed.sh'
}
# The 200-step curve as two pilots (each fits a call alone): 16 layers and micro-batch 4 on an H200;
# on an H100 8 layers and micro-batch 1 (stop 72 ran that: the last 50 steps' means 0.13% apart, the
# worst step 2.57%; again for the per-step curves the script now returns, to say where they part).
fp8_curve() {
local shape; shape=$([ $BIG = 1 ] && echo 'LAYERS=16 MICRO=4' || echo 'LAYERS=8 MICRO=1')
job fp8curvebf16 330 "FP8_TARGETS=pilotbench-cli PRECISIONS=bf16-mixed $shape PROFILE=0 REFERENCE=0 STEPS=200 bash tests/bench/h200_fp8_speed.sh"
job fp8curvefp8 330 "FP8_TARGETS=pilotbench-cli KEEP_W=1 PRECISIONS=fp8-rowwise $shape PROFILE=0 REFERENCE=0 STEPS=200 bash tests/bench/h200_fp8_speed.sh"
}
# Issue 34's goal rows: ours fused against Transformers + compile (PEFT's for LoRA), then ours with
# train.cuda_graph, one call (stop 72 ran them on an H100).
rows34() {
job rows34 420 'KERNELS=fused COMPILE_ONLY=1 bash tests/bench/h200_kernels.sh all && EXTRA="--set train.cuda_graph=true" KERNELS=fused bash tests/bench/h200_kernels.sh ours'
}
# Both eager paths against Transformers eager (stop 72's call ended inside this job), and every
# kernel of ours at a step's shape against the eager ops it replaces (the table of achieved bandwidth).
eager34() {
job eager34 150 'KERNELS=eager bash tests/bench/h200_kernels.sh ours llama-3.2-1b qwen2.5-0.5b && for C in llama-3.2-1b qwen2.5-0.5b; do python3 tests/bench/hf_reference.py --config /tmp/kern/$C.json --steps 10 --warmup 3 >> $OUT/hf_eager.jsonl; done'
job kcheck 270 "${KC[*]} > \$OUT/kcheck.txt 2>&1; grep -E 'failed|lora dropout|rmsnorm bwd' \$OUT/kcheck.txt"
}
# Ran in stop 72 on an H100; on an H200 they are that card's rows: Transformers' eager step with
# gradients rescaled only above the bound, issue 31's float8 step beside the plain-PyTorch reference,
# issue 28's E2B LoRA rows.
h100_done() {
job eagerclip 150 '[ -f /tmp/kern/llama-3.2-1b.json ] || KERNELS=eager bash tests/bench/h200_kernels.sh ours llama-3.2-1b; for f in "" --clip-only-above; do python3 tests/bench/hf_reference.py --config /tmp/kern/llama-3.2-1b.json --steps 10 --warmup 3 $f >> $OUT/hf_eager_clip.jsonl; done'
job fp8ref 240 'FP8_TARGETS=bench_probe_overhead PROFILE=0 DEPTHS=8 STEPS=0 bash tests/bench/h200_fp8_speed.sh'
job e2blora 300 'LAYERS=10 EXTRA="--set model.kv_shared_layers=4 --set train.mode=lora" KERNELS="eager fused" COMPILE=1 bash tests/bench/h200_families.sh all gemma-4-e2b'
}
if [ $BIG = 1 ]; then fp8_depth16; fp8_curve; rows34; eager34; h100_done; else eager34; fp8_curve; fi
# Last, where time is left: whether nvcc --split-compile=0 (stop 69) changed the kernels' SASS.
job splitcheck 300 'bash tests/bench/split_compile_check.sh'
[ $BIG = 1 ] || rows34
