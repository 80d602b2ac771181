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
#   3b. with DEPTHS (e.g. "2 4 8"), bare steps of both recipes at each depth: per-layer and fixed
#      time of each, and the ratio they give at the full 32 layers ($OUT/depths.jsonl);
#   4. tests/bench/fp8_reference.py, bf16 and fp8 (REFERENCE=0 skips);
#   5. pilots of STEPS steps (default 200; 0 skips) from the same seed on learnable data: step time,
#      tokens/s, peak against the estimate, and the loss curve against bf16-mixed's.
# Text goes to $OUT/log.txt; the traces, reference.json and fp8.jsonl beside it. From the
# repository root with .cuda-deps staged:  bash tests/bench/h200_fp8_speed.sh
# FP8_TARGETS: fewer targets to build, for a call that runs only some of the steps below.
PB_TARGETS="${FP8_TARGETS:-pilotbench-cli bench_probe_overhead bench_float8_casts engine_tst_fp8 engine_tst_nf4}" . tests/bench/h200_build.sh
LOG=$OUT/log.txt
LAYERS=${LAYERS:-8} MICRO=${MICRO:-1} STEPS=${STEPS:-200}
SHAPE="--set model.layers=$LAYERS --set train.seq_len=4096 --set train.micro_batch=$MICRO --set train.kernels=fused"
stamp() { echo "== $(date +%T) $*" | tee -a $LOG; }
stamp "card: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader)"
for t in engine_tst_fp8 engine_tst_nf4; do
  [ -x $BUILD_DIR/tests/$t ] || continue
  $BUILD_DIR/tests/$t > /tmp/$t.txt 2>&1; grep -E "FAIL|Totals" -A2 /tmp/$t.txt | tee -a $LOG
done
if [ -x $BUILD_DIR/tests/bench_float8_casts ]; then
  stamp "float8 casts, $((4096 * MICRO)) tokens"
  $BUILD_DIR/tests/bench_float8_casts --tokens $((4096 * MICRO)) 2>&1 | tee -a $LOG
fi
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
if [ -n "${DEPTHS:-}" ]; then
  # Bare steps of both recipes at each depth in $DEPTHS (e.g. "2 4 8"). The head, the embeddings
  # and the loss are the same at every depth, so the step is fixed + layers x per-layer: a line
  # through the points gives each recipe's per-layer time, the fixed part, and the ratio at
  # Llama-3.1-8B's full 32 layers (a projection from those measured points, printed as one).
  for L in $DEPTHS; do
    for P in bf16-mixed fp8-rowwise; do
      stamp "probe $P, $L layers"
      $BUILD_DIR/tests/bench_probe_overhead --device cuda:0 --preset llama-3.1-8b --steps 6 --set model.layers=$L --set train.seq_len=4096 \
        --set train.micro_batch=$MICRO --set train.kernels=fused --set train.precision=$P 2>&1 | tail -1 | tee -a $LOG \
        | sed -n "s/.*bare \([0-9.]*\) ms.*/{\"layers\": $L, \"precision\": \"$P\", \"bare_ms\": \1}/p" >> $OUT/depths.jsonl
    done
  done
  python3 - $OUT/depths.jsonl <<'PY' | tee -a $LOG
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Each depth's measured ratio first: a call of one depth (DEPTHS="16") still gives its step.
for x, y in sorted((r["layers"], r["bare_ms"]) for r in rows if r["precision"] == "bf16-mixed"):
    f = [r["bare_ms"] for r in rows if r["precision"] == "fp8-rowwise" and r["layers"] == x]
    if f: print(json.dumps({"layers": x, "measured_ratio": round(y / f[0], 4)}))
fit = {}
for p in ("bf16-mixed", "fp8-rowwise"):
    pts = sorted((r["layers"], r["bare_ms"]) for r in rows if r["precision"] == p)
    n = len(pts)
    if n < 2: sys.exit("fewer than two depths measured for " + p + ": no line")
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    worst = max(abs(y - (my + slope * (x - mx))) / y for x, y in pts)
    fit[p] = (slope, my - slope * mx)
    print(json.dumps({"precision": p, "per_layer_ms": round(slope, 2), "fixed_ms": round(my - slope * mx, 2), "worst_point_off_line_pct": round(100 * worst, 2)}))
(sb, fb), (s8, f8) = fit["bf16-mixed"], fit["fp8-rowwise"]
print(json.dumps({"per_layer_ratio": round(sb / s8, 4), "projected_ratio_at_32_layers": round((fb + 32 * sb) / (f8 + 32 * s8), 4)}))
PY
fi
if [ "${REFERENCE:-1}" = 1 ]; then
  stamp "reference"
  PYTHONUNBUFFERED=1 python3 tests/bench/fp8_reference.py --layers $LAYERS --batch $MICRO --json $OUT/reference.json 2>&1 | tee -a $LOG
fi
[ "$STEPS" -gt 0 ] || exit 0
# KEEP_W=1: a later call adds the other precision's pilot beside an earlier one (one curve, two jobs).
W=/tmp/fp8; [ "${KEEP_W:-0}" = 1 ] || rm -rf $W; mkdir -p $W
for prec in ${PRECISIONS:-bf16-mixed fp8-rowwise}; do
  stamp "pilot $prec, $STEPS steps"
  $CLI pilot --config preset:llama-3.1-8b $SHAPE --set train.precision=$prec --set data.learnable=true --device cuda:0 --steps $STEPS --warmup 2 \
      --db $W/h.db --jsonl --memory-snapshot $W/$prec.json 2>$W/$prec.err > $W/$prec.jsonl || tail -3 $W/$prec.err | tee -a $LOG
  tail -1 $W/$prec.jsonl | python3 tests/bench/pilot_row.py $W/$prec.json "{\"row\": \"$prec\", \"micro_batch\": $MICRO}" | tee -a $OUT/fp8.jsonl
done
python3 - "$W" "$OUT" <<'PY' | tee -a $OUT/fp8.jsonl
import json, sys, os
w, outdir = sys.argv[1], sys.argv[2]
def losses(p):
    out = []
    for line in open(os.path.join(w, p + ".jsonl")):
        d = json.loads(line)
        if d.get("event") == "step" and d.get("phase") == "train":
            out.append(d["loss"])
    return out
if not os.path.exists(os.path.join(w, "bf16-mixed.jsonl")):
    sys.exit(0)  # no bf16-mixed pilot this call (PRECISIONS): no curve to compare with
base = losses("bf16-mixed")
for p in ("fp8-rowwise", "fp8-tensorwise"):
    if not os.path.exists(os.path.join(w, p + ".jsonl")):
        continue
    l = losses(p)
    n = min(len(l), len(base))
    if n < 50: continue
    tail = lambda v: sum(v[n - 50:n]) / 50
    worst = max(abs(a - b) / b for a, b in zip(l[:n], base[:n]))
    # Every step's loss of both, so a note can say where the curves part (the summary alone cannot).
    json.dump({"bf16-mixed": base[:n], p: l[:n]}, open(os.path.join(outdir, p + "-curve.json"), "w"))
    print(json.dumps({"curve": p, "steps": n, "last50_mean": tail(l), "bf16_last50_mean": tail(base), "first": [l[0], base[0]], "last": [l[n - 1], base[n - 1]],
                      "last50_rel_diff_pct": round(100 * (tail(l) - tail(base)) / tail(base), 3), "worst_step_rel_diff_pct": round(100 * worst, 3)}))
PY
stamp done
