#!/usr/bin/env bash
# H200, issue 31: fp8-rowwise against bf16-mixed and against the plain-PyTorch float8 reference, in
# one call. Llama-3.1-8B's widths (LAYERS, default 8), full fine-tuning, seq 4096, micro-batch
# MICRO (default 1), the fused path:
#   1. the float8 and NF4 kernel tests on the card, and bench_float8_casts (each cast of one layer's
#      operands at seq x MICRO tokens: time and GB/s; wide rows held against two passes);
#   2. bench_probe_overhead under each precision (bare and instrumented step) with a Kineto trace
#      of two bare steps and its top kernels (PROFILE=0 skips);
#   3. with EXTRA=1, bench_probe_overhead for fp8-tensorwise, and for bf16-mixed and fp8-rowwise at
#      micro-batch 2 (no traces);
#   4. tests/bench/fp8_reference.py, bf16 and fp8 (REFERENCE=0 skips);
#   5. pilots of STEPS steps (default 200; 0 skips) from the same seed on learnable data: step time,
#      tokens/s, peak against the estimate, and the loss curve against bf16-mixed's.
# Text goes to $OUT/log.txt; the traces, reference.json and fp8.jsonl beside it. From the
# repository root with .cuda-deps staged:  bash tests/bench/h200_fp8_speed.sh
PB_TARGETS="pilotbench-cli bench_probe_overhead bench_float8_casts engine_tst_fp8 engine_tst_nf4" . tests/bench/h200_build.sh
LOG=$OUT/log.txt
LAYERS=${LAYERS:-8} MICRO=${MICRO:-1} STEPS=${STEPS:-200}
SHAPE="--set model.layers=$LAYERS --set train.seq_len=4096 --set train.micro_batch=$MICRO --set train.kernels=fused"
stamp() { echo "== $(date +%T) $*" | tee -a $LOG; }
stamp "card: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader)"
for t in engine_tst_fp8 engine_tst_nf4; do
  $BUILD_DIR/tests/$t > /tmp/$t.txt 2>&1; grep -E "FAIL|Totals" -A2 /tmp/$t.txt | tee -a $LOG
done
stamp "float8 casts, $((4096 * MICRO)) tokens"
$BUILD_DIR/tests/bench_float8_casts --tokens $((4096 * MICRO)) 2>&1 | tee -a $LOG
if [ "${PROFILE:-1}" = 1 ]; then
  for P in bf16-mixed fp8-rowwise; do
    stamp "probe $P"
    $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 $SHAPE --set train.precision=$P --trace /tmp/trace-$P.json 2>&1 | tail -3 | tee -a $LOG
    python3 tests/bench/trace_top_kernels.py /tmp/trace-$P.json --steps 2 --top 22 --label "8b x$LAYERS mb$MICRO $P" | tee -a $LOG
    gzip -c /tmp/trace-$P.json > $OUT/trace-$P.json.gz
  done
fi
if [ "${EXTRA:-0}" = 1 ]; then
  # fp8-tensorwise beside them, and both recipes' neighbours at micro-batch 2 (8192 tokens a step).
  for run in "fp8-tensorwise 1" "bf16-mixed 2" "fp8-rowwise 2"; do
    set -- $run
    stamp "probe $1, micro-batch $2"
    $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 --set model.layers=$LAYERS --set train.seq_len=4096 \
      --set train.micro_batch=$2 --set train.kernels=fused --set train.precision=$1 2>&1 | tail -1 | tee -a $LOG
  done
fi
if [ "${REFERENCE:-1}" = 1 ]; then
  stamp "reference"
  PYTHONUNBUFFERED=1 python3 tests/bench/fp8_reference.py --layers $LAYERS --batch $MICRO --json $OUT/reference.json 2>&1 | tee -a $LOG
fi
[ "$STEPS" -gt 0 ] || exit 0
W=/tmp/fp8; rm -rf $W; mkdir -p $W
for prec in ${PRECISIONS:-bf16-mixed fp8-rowwise}; do
  stamp "pilot $prec, $STEPS steps"
  $CLI pilot --config preset:llama-3.1-8b $SHAPE --set train.precision=$prec --set data.learnable=true --device cuda:0 --steps $STEPS --warmup 2 \
      --db $W/h.db --jsonl --memory-snapshot $W/$prec.json 2>$W/$prec.err > $W/$prec.jsonl || tail -3 $W/$prec.err | tee -a $LOG
  tail -1 $W/$prec.jsonl | python3 tests/bench/pilot_row.py $W/$prec.json "{\"row\": \"$prec\", \"micro_batch\": $MICRO}" | tee -a $OUT/fp8.jsonl
done
python3 - "$W" <<'PY' | tee -a $OUT/fp8.jsonl
import json, sys, os
w = sys.argv[1]
def losses(p):
    out = []
    for line in open(os.path.join(w, p + ".jsonl")):
        d = json.loads(line)
        if d.get("event") == "step" and d.get("phase") == "train":
            out.append(d["loss"])
    return out
base = losses("bf16-mixed")
for p in ("fp8-rowwise", "fp8-tensorwise"):
    if not os.path.exists(os.path.join(w, p + ".jsonl")):
        continue
    l = losses(p)
    n = min(len(l), len(base))
    if n < 50: continue
    tail = lambda v: sum(v[n - 50:n]) / 50
    worst = max(abs(a - b) / b for a, b in zip(l[:n], base[:n]))
    print(json.dumps({"curve": p, "steps": n, "last50_mean": tail(l), "bf16_last50_mean": tail(base), "first": [l[0], base[0]], "last": [l[n - 1], base[n - 1]],
                      "last50_rel_diff_pct": round(100 * (tail(l) - tail(base)) / tail(base), 3), "worst_step_rel_diff_pct": round(100 * worst, 3)}))
PY
stamp done
