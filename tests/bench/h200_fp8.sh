#!/usr/bin/env bash
# H200, issue 31 (FP8): an 8B-class shape (Llama-3.1-8B's widths, 8 layers), full fine-tuning, seq
# 4096, micro-batch 1, learnable synthetic data, the fused path, 200 steps from the same seed under
# bf16-mixed, fp8-rowwise and fp8-tensorwise: step time, tokens/s, peak against the estimate, and
# the loss curve against bf16-mixed's (mean of the last 50 steps, worst step). From the repository
# root with .cuda-deps staged:  bash tests/bench/h200_fp8.sh   (STEPS, LAYERS, PRECISIONS narrow it)
PB_TARGETS="pilotbench-cli engine_tst_fp8" . tests/bench/h200_build.sh
$BUILD_DIR/tests/engine_tst_fp8 > $OUT/tst_fp8.txt 2>&1; tail -2 $OUT/tst_fp8.txt
W=/tmp/fp8; rm -rf $W; mkdir -p $W
for prec in ${PRECISIONS:-bf16-mixed fp8-rowwise fp8-tensorwise}; do
  $CLI pilot --config preset:llama-3.1-8b --set model.layers=${LAYERS:-8} --set train.seq_len=4096 --set train.kernels=fused --set train.precision=$prec \
      --set data.learnable=true --device cuda:0 --steps ${STEPS:-200} --warmup 2 --db $W/h.db --jsonl --memory-snapshot $W/$prec.json 2>$W/$prec.err > $W/$prec.jsonl \
    || tail -3 $W/$prec.err
  tail -1 $W/$prec.jsonl | python3 tests/bench/pilot_row.py $W/$prec.json "{\"row\": \"$prec\"}" | tee -a $OUT/fp8.jsonl
done
cp $W/*.json $OUT/ 2>/dev/null
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
    l = losses(p)
    n = min(len(l), len(base))
    if n < 50: continue
    tail = lambda v: sum(v[n - 50:n]) / 50
    worst = max(abs(a - b) / b for a, b in zip(l[:n], base[:n]))
    print(json.dumps({"curve": p, "steps": n, "last50_mean": tail(l), "bf16_last50_mean": tail(base),
                      "last50_rel_diff_pct": round(100 * (tail(l) - tail(base)) / tail(base), 3), "worst_step_rel_diff_pct": round(100 * worst, 3)}))
PY
