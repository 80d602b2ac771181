#!/usr/bin/env bash
# H200, issue 30 (hybrid linear attention: Qwen3-Next), the goal table in one call. From the
# repository root on a CUDA host with .cuda-deps staged:
#   bash tests/bench/h200_qwen_hybrid.sh [parity|speed|all]
# The model: preset qwen3-next-80b-a3b reduced to $LAYERS (4) layers, Gated DeltaNet on 0..2 and gated
# full attention on 3 (full_attention every 4th layer, as published), $EXPERTS (64) experts per layer
# instead of 512 (top-k 10, shared expert as published), so full fine-tuning fits one card; micro-batch 1,
# bf16 autocast over fp32 masters. Transformers builds the same model: hf_sparse_reference.py reads
# the run config's depth, expert count and layer pattern (layer_types spelled out).
#  parity: as h200_sparse.sh: our pilot trains 1 step (SGD without momentum, so the checkpoint holds no
#          optimizer state) on a token file whose samples are all one sequence of $PARITY_SEQ (2048)
#          tokens and checkpoints under the hub's names; Transformers 5.17 loads that step folder with
#          its own from_pretrained (eager attention) and computes the loss on the same tokens, beside our
#          step 2 loss (same weights, same tokens). fp32 and bf16-mixed, full and LoRA (r16 on the
#          preset's default targets q/k/v/o_proj + in_proj_qkvz, in_proj_ba, out_proj; constant lr
#          $LORA_LR so the adapters move; PEFT gets our adapters). Transformers' loads run in the
#          background while our next parity pilot runs (no timing is taken there).
#  speed:  for seq $SEQS (2048 8192 32768) x $MODES (full lora): our pilot on the eager and the fused
#          path ($KERNELS), $WARMUP (2) warm-up + $STEPS (3) measured steps, with --memory-snapshot, so
#          each row holds ms/step, tokens/s, the training steps' and the whole run's peak and the
#          estimator's error against both (pilot_row.py); then Transformers' model of the same run
#          ($HF_ATTN attention, sdpa by default: its eager attention holds [16, s, s] scores, out of
#          reach at 32k; fused AdamW; PEFT's LoRA) timed at every length in one process per mode
#          (hf_sparse_reference.py --seq-lens). Its Gated DeltaNet path is named in each row (fla and
#          causal-conv1d are not installed on the H200, so Transformers runs its torch fallback).
#          A run that fails (out of memory, a timeout) is a row with its error; the next one still runs.
# Budget: no run starts after $BUDGET_S (420) seconds from the end of the build, nor so late that the
# call's $CALL_LIMIT_S (590) seconds would be passed (each run is also capped by `timeout`); the rows
# not run are recorded as skipped. Files ($OUT): qwen_hybrid.jsonl (every row: env, params, parity,
# speed, skipped), qwen_hybrid.log (progress and each failure's stderr tail), qwen_hybrid.txt (the
# summary table, also printed at the end; build.log from h200_build.sh when it had to build).
. tests/bench/h200_build.sh
WHAT=${1:-all}
T0=$SECONDS
P=qwen3-next-80b-a3b; HFC=tests/data/hf/$P/config.json
LAYERS=${LAYERS:-4}; EXPERTS=${EXPERTS:-64}; SEQS=${SEQS:-2048 8192 32768}; MODES=${MODES:-full lora}; KERNELS=${KERNELS:-eager fused}
STEPS=${STEPS:-3}; WARMUP=${WARMUP:-2}; HF_ATTN=${HF_ATTN:-sdpa}
PARITY_SEQ=${PARITY_SEQ:-2048}; PARITY_MODES=${PARITY_MODES:-full lora}; PARITY_PRECISIONS=${PARITY_PRECISIONS:-fp32 bf16-mixed}; LORA_LR=${LORA_LR:-1e-1}
BUDGET_S=${BUDGET_S:-420}; CALL_LIMIT_S=${CALL_LIMIT_S:-590}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-150}; HF_TIMEOUT_S=${HF_TIMEOUT_S:-300}; MIN_START_S=${MIN_START_S:-20}
J=$OUT/qwen_hybrid.jsonl; LOG=$OUT/qwen_hybrid.log; SUM=$OUT/qwen_hybrid.txt
W=/tmp/qwen-hybrid; rm -rf $W; mkdir -p $W; : > $J; : > $LOG
DEADLINE=$(( T0 + BUDGET_S )); [ $DEADLINE -gt $(( CALL_LIMIT_S - 20 )) ] && DEADLINE=$(( CALL_LIMIT_S - 20 ))

log() { echo "[$(( SECONDS - T0 ))s] $*" | tee -a $LOG; }
limit() { # the seconds a run may take: its cap, or what is left before the deadline
  local left=$(( DEADLINE - SECONDS )); [ $left -lt $1 ] && echo $left || echo $1; }
emit() { # one JSON object (argument) appended to the rows
  python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])))' "$1" >> $J; }
skipped() { # kind, fields
  log "skipped (budget): $2"; emit "{\"kind\": \"$1\", \"skipped\": \"budget: under ${MIN_START_S}s left of ${BUDGET_S}s\", $2}"; }
tail_err() { # a failure's stderr tail into the log
  { echo "---- $1"; tail -${2:-8} $1; } >> $LOG 2>/dev/null; }

# A pilot's row: pilot_row.py over its last --jsonl line and memory snapshot when both exist, else the
# verdict and message it left (or its stderr tail); rc, timed_out, error for a run that did not fit.
ours_row() { # fields-json, snapshot, jsonl, stderr, rc
  python3 - "$@" "$J" <<'PY'
import json, os, subprocess, sys
fields, snap, lines, err, rc, out = sys.argv[1:7]
row, rc = json.loads(fields), int(rc)
last = None
for line in (open(lines) if os.path.exists(lines) else []):
    line = line.strip()
    if line.startswith("{"):
        try:
            last = json.loads(line)
        except ValueError:
            pass
if last is not None and os.path.exists(snap) and os.path.getsize(snap) > 0:
    p = subprocess.run([sys.executable, "tests/bench/pilot_row.py", snap, fields], input=json.dumps(last), capture_output=True, text=True)
    if p.returncode == 0 and p.stdout.strip():
        row = json.loads(p.stdout)
if last is not None:
    row.setdefault("verdict", last.get("verdict"))
    row.setdefault("message", last.get("message"))
    row.setdefault("losses", last.get("losses"))
    row["attention_path"], row["kernels_path"] = last.get("attention_path"), last.get("kernels_path")
lines = [l.strip() for l in open(err, errors="replace") if l.strip()] if os.path.exists(err) else []
said = ([l for l in lines if "rror" in l] or lines or [""])[-1][:400]  # its last error line, else its last line
if rc != 0 or row.get("verdict") != "fits":
    row["rc"], row["timed_out"] = rc, rc in (124, 137)
    row["error"] = row.get("message") or ("timed out" if rc in (124, 137) else "") or said or "no output"
open(out, "a").write(json.dumps(row) + "\n")
def gib(b):
    return "%.2f GiB" % (b / 2**30) if b else "-"
print("   %s %s seq %s: %s ms/step, step peak %s, run peak %s, estimate %s (%s vs step, %s vs run)%s" % (
    row.get("impl"), row.get("mode"), row.get("seq"), "%.1f" % row["step_ms"] if row.get("step_ms") else "-", gib(row.get("training_peak_bytes")),
    gib(row.get("peak_allocated_bytes")), gib(row.get("estimated_bytes")), row.get("estimate_error_pct"), row.get("run_peak_error_pct"),
    "; " + str(row.get("error"))[:200] if row.get("error") else ""))
PY
}

# The environment: versions, the GPU, whether Transformers can take the Gated DeltaNet fast path.
python3 - > $W/env.json 2>>$LOG <<'PY'
import importlib.util, json, torch
d = {"kind": "env", "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
     "installed": {m: importlib.util.find_spec(m) is not None for m in ("fla", "causal_conv1d")}}
for m in ("transformers", "peft"):
    try:
        d[m] = __import__(m).__version__
    except Exception as e:
        d[m] = "missing: %s" % e
print(json.dumps(d))
PY
[ -s $W/env.json ] && cat $W/env.json >> $J && log "env $(cat $W/env.json)"

# The reduced run: one base config; the runs vary seq, mode, kernels and precision by --set.
BASE=(--preset $P --set model.layers=$LAYERS --set model.moe.experts=$EXPERTS --set train.micro_batch=1)
$CLI config new "${BASE[@]}" --out $W/base.json >> $LOG 2>&1 || { log "config new failed"; exit 1; }
LORA_ARGS=(--set train.mode=lora --set train.lora.rank=16)
$CLI config new "${BASE[@]}" --out $W/run-full.json >> $LOG 2>&1
$CLI config new "${BASE[@]}" "${LORA_ARGS[@]}" --out $W/run-lora.json >> $LOG 2>&1
for mode in full lora; do
  $CLI config show $W/run-$mode.json --json 2>>$LOG | python3 -c "
import json, sys
d = json.load(sys.stdin); m = d['model']
print(json.dumps({'kind': 'params', 'mode': '$mode', 'total_params': d['total_params'], 'trainable_params': d['trainable_params'], 'lora_params': d['lora_params'],
                  'layers': m['layers'], 'experts': m['moe']['experts'], 'experts_per_token': m['moe']['experts_per_token'],
                  'full_layers': m['linear_attention']['full_layers'], 'lora_targets': d['train']['lora']['targets']}))" >> $J
done
$CLI config show $W/base.json >> $LOG 2>&1

if [ $WHAT = parity ] || [ $WHAT = all ]; then
  python3 - $PARITY_SEQ $W/same.bin <<'PY'
import sys
import numpy as np
n = int(sys.argv[1])
seq = np.random.default_rng(7).integers(0, 32000, size=n + 1, dtype=np.uint16)  # one sample: seq + 1 tokens
np.tile(seq, 64).tofile(sys.argv[2])
PY
  DATA=(--set data.kind=tokens --set data.path=$W/same.bin --set data.token_dtype=uint16)
  tags=()
  for mode in $PARITY_MODES; do
    # LoRA: lora_B starts at zero and the preset's warm-up would leave it there after one step; a
    # constant $LORA_LR from step 1 moves the adapters (see h200_sparse.sh). Our step 1 loss is the
    # base alone; the reference reports its loss_without_adapters beside it.
    extra=(); [ $mode = lora ] && extra=("${LORA_ARGS[@]}" --set train.lr=$LORA_LR --set train.schedule.kind=constant --set train.schedule.warmup_steps=0)
    for prec in $PARITY_PRECISIONS; do
      tag=$mode-$prec; ck=$W/ck-$tag
      fields="\"mode\": \"$mode\", \"precision\": \"$prec\", \"seq\": $PARITY_SEQ"
      lim=$(limit $RUN_TIMEOUT_S); [ $lim -lt $MIN_START_S ] && { skipped parity "\"side\": \"pilotbench\", $fields"; continue; }
      log "parity: pilotbench $mode $prec, seq $PARITY_SEQ (limit ${lim}s)"
      timeout -k 10 $lim $CLI pilot --config $W/base.json --device cuda:0 "${DATA[@]}" "${extra[@]}" --set train.precision=$prec --set train.seq_len=$PARITY_SEQ \
          --set train.optimizer=sgd --set train.momentum=0 --steps 2 --warmup 0 --set checkpoint.every_steps=1 --checkpoint-dir $ck --db $W/h.db --jsonl \
          > $W/$tag.parity.jsonl 2> $W/$tag.parity.err
      rc=$?; [ $rc = 0 ] || tail_err $W/$tag.parity.err
      ours_row "{\"kind\": \"parity\", \"side\": \"pilotbench\", \"impl\": \"pilotbench\", $fields}" /dev/null $W/$tag.parity.jsonl $W/$tag.parity.err $rc
      # Step 1's weights are what our step 2 loss is taken at; step 2's folder only fills the disk.
      step=$(ls -d $ck/step-* 2>/dev/null | sort | head -1)
      ls -d $ck/step-* 2>/dev/null | sort | tail -n +2 | xargs -r rm -rf
      if [ -z "$step" ]; then
        emit "{\"kind\": \"parity\", \"side\": \"transformers\", $fields, \"error\": \"no checkpoint from our pilot\"}"; continue
      fi
      hlim=$(limit $HF_TIMEOUT_S); [ $hlim -lt $MIN_START_S ] && { skipped parity "\"side\": \"transformers\", $fields"; continue; }
      log "parity: transformers at $step, in the background (limit ${hlim}s)"
      # The reference reads the run config the step folder holds (depth, experts, precision, mode, LoRA).
      ( timeout -k 10 $hlim python3 tests/bench/hf_sparse_reference.py --config $step/config.json --hf-config $HFC --weights $step --tokens $W/same.bin --steps 0 \
          > $W/$tag.hfw.json 2> $W/$tag.hfw.err; echo $? > $W/$tag.hfw.rc; rm -rf $ck ) &
      tags+=($tag)
    done
  done
  log "parity: waiting for Transformers' loads"
  wait
  for tag in "${tags[@]}"; do
    rc=$(cat $W/$tag.hfw.rc 2>/dev/null || echo 1); [ "$rc" = 0 ] || tail_err $W/$tag.hfw.err 12
    grep -i "fast path\|fall.*back" $W/$tag.hfw.err 2>/dev/null | head -2 >> $LOG
    python3 - $tag $rc $W/$tag.hfw.json $W/$tag.hfw.err >> $J <<'PY'
import json, os, sys
tag, rc, out, err = sys.argv[1:5]
mode, prec = tag.split("-", 1)
row = {"kind": "parity", "side": "transformers", "mode": mode, "precision": prec}
text = open(out).read().strip() if os.path.exists(out) else ""
try:
    d = json.loads(text.splitlines()[-1])
    if (d.get("mode"), d.get("precision")) != (mode, prec):  # the step folder's config says otherwise
        row["step_config"] = {"mode": d.get("mode"), "precision": d.get("precision")}
    d.update(row)
    row = d
except (ValueError, IndexError):
    lines = [l.strip() for l in open(err, errors="replace") if l.strip()] if os.path.exists(err) else []
    own = [i for i, l in enumerate(lines) if l.startswith("hf_sparse_reference.py:")]  # its own exit: the lines after it say what
    said = (" | ".join(lines[own[-1]:][-4:]) if own else ([l for l in lines if "rror" in l] or lines or [""])[-1])[:400]
    row.update(rc=int(rc), error=("timed out" if rc in ("124", "137") else said) or "no output")
print(json.dumps(row))
PY
  done
  rm -rf $W/ck-*
fi

if [ $WHAT = speed ] || [ $WHAT = all ]; then
  for mode in $MODES; do
    extra=(); [ $mode = lora ] && extra=("${LORA_ARGS[@]}")
    for seq in $SEQS; do
      for K in $KERNELS; do
        tag=$mode-$seq-$K; snap=$W/snap-$tag.json; rm -f $snap
        fields="\"mode\": \"$mode\", \"seq\": $seq, \"impl\": \"pilotbench $K\""
        lim=$(limit $RUN_TIMEOUT_S); [ $lim -lt $MIN_START_S ] && { skipped speed "$fields"; continue; }
        log "speed: pilotbench $K, $mode, seq $seq (limit ${lim}s)"
        timeout -k 10 $lim $CLI pilot --config $W/base.json --device cuda:0 "${extra[@]}" --set train.seq_len=$seq --set train.kernels=$K \
            --steps $STEPS --warmup $WARMUP --db $W/h.db --jsonl --memory-snapshot $snap > $W/$tag.jsonl 2> $W/$tag.err
        rc=$?; [ $rc = 0 ] || tail_err $W/$tag.err
        ours_row "{\"kind\": \"speed\", $fields}" $snap $W/$tag.jsonl $W/$tag.err $rc | tee -a $LOG
      done
    done
    # Transformers: one process for every length of this mode (the model built once).
    hlim=$(limit $HF_TIMEOUT_S)
    if [ $hlim -lt $MIN_START_S ]; then
      for seq in $SEQS; do skipped speed "\"mode\": \"$mode\", \"seq\": $seq, \"impl\": \"transformers qwen3_next $HF_ATTN\""; done
      continue
    fi
    log "speed: transformers ($HF_ATTN), $mode, seq ${SEQS// /,} (limit ${hlim}s)"
    timeout -k 10 $hlim python3 tests/bench/hf_sparse_reference.py --config $W/run-$mode.json --hf-config $HFC --steps $STEPS --warmup $WARMUP --attn $HF_ATTN \
        --seq-lens "${SEQS// /,}" > $W/hf-$mode.jsonl 2> $W/hf-$mode.err
    rc=$?; [ $rc = 0 ] || tail_err $W/hf-$mode.err 12
    grep -i "fast path\|fall.*back" $W/hf-$mode.err 2>/dev/null | head -2 >> $LOG
    python3 - $mode "$SEQS" $rc $W/hf-$mode.jsonl $W/hf-$mode.err "$HF_ATTN" $J <<'PY' | tee -a $LOG
import json, os, sys
mode, seqs, rc, out, err, attn, J = sys.argv[1:8]
got = {}
for line in (open(out) if os.path.exists(out) else []):
    try:
        d = json.loads(line)
        got[d.get("seq_len")] = d
    except ValueError:
        pass
lines = [l.strip() for l in open(err, errors="replace") if l.strip()] if os.path.exists(err) else []
said = ([l for l in lines if "rror" in l] or lines or [""])[-1][:400]
impl = next((d["impl"] for d in got.values() if d.get("impl")), "transformers qwen3_next %s" % attn)
for seq in map(int, seqs.split()):
    row = {"kind": "speed", "mode": mode, "seq": seq}
    if seq in got:
        row = dict(got[seq], **row)
    else:  # the process ended before this length: killed, timed out, or an error it could not catch
        row.update(impl=impl, rc=int(rc), error=("timed out" if rc in ("124", "137") else said) or "no output")
    open(J, "a").write(json.dumps(row) + "\n")
    print("   %s %s seq %d: %s ms/step, peak %s%s" % (row["impl"], mode, seq, "%.1f" % row["step_ms"] if row.get("step_ms") else "-",
          "%.2f GiB" % (row["peak_allocated_bytes"] / 2**30) if row.get("peak_allocated_bytes") else "-",
          "; " + str(row["error"])[:200] if row.get("error") else ""))
PY
  done
fi
log "done; summary follows"

python3 - $J $LAYERS $EXPERTS $LOG <<'PY' | tee $SUM
import json, math, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
G = 2**30
def num(x):
    return x if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else None
def pct(x):
    return "%+.2f%%" % x if num(x) is not None else "-"
env = next((r for r in rows if r["kind"] == "env"), {})
print("Qwen3-Next reduced: %s layers (layer_types from full_layers), %s experts; torch %s, transformers %s, peft %s, %s" % (
    sys.argv[2], sys.argv[3], env.get("torch"), env.get("transformers"), env.get("peft"), env.get("gpu")))
print("installed on the device: %s" % env.get("installed"))
paths = sorted({(r.get("linear_attention_path") or {}).get("path") for r in rows if r.get("linear_attention_path")} - {None})
# Transformers 5.17 says so itself when it falls back (the module attribute the row reads may be absent).
log = open(sys.argv[4], errors="replace").read() if len(sys.argv) > 4 else ""
warned = [f for f in ("chunk_gated_delta_rule", "causal_conv1d_fn") if "`%s` is falling back" % f in log]
if not paths and warned:
    paths = ["torch fallback (Transformers warned that %s fell back to its reference PyTorch implementation)" % " and ".join(warned)]
print("Transformers' Gated DeltaNet ran: %s" % (", ".join(paths) or "unknown (no Transformers row)"))
for r in rows:
    if r.get("linear_attention_path"):
        lp = r["linear_attention_path"]
        print("  %s; conv: %s; norm: %s; layer_types %s; experts implementation %s" % (lp.get("chunk_gated_delta_rule"), lp.get("causal_conv1d"), lp.get("norm"),
                                                                                     r.get("layer_types"), r.get("experts_implementation")))
        break

print("\nParameters (ours from config show, Transformers' counted on its model; LoRA: with PEFT's adapters)")
ours = {r["mode"]: r for r in rows if r["kind"] == "params"}
for mode, p in sorted(ours.items()):
    want = p["total_params"]  # with train.mode lora, config show's total holds the adapters
    theirs = sorted({r["params"] for r in rows if r.get("side") != "pilotbench" and r.get("mode") == mode and r.get("params")})
    print("  %-4s ours %15s  transformers %-30s %s" % (mode, format(want, ","), ", ".join(format(t, ",") for t in theirs) or "-",
                                                     "equal" if want in theirs else ("DIFFERENT" if theirs else "")))

par = [r for r in rows if r["kind"] == "parity"]
if par:
    print("\nParity at seq %s: our step 2 loss against Transformers' loss at our step-1 checkpoint, same tokens" % (
        next((r.get("seq") for r in par if r.get("seq")), "?")))
    print("  %-4s %-10s %12s %12s %12s %10s %12s %12s %8s  %s" % ("mode", "precision", "ours step1", "ours step2", "HF at step1", "diff", "HF no-adapt", "diff step1",
                                                                "adapters", "note"))
    for mode in ("full", "lora"):
        for prec in ("fp32", "bf16-mixed"):
            o = next((r for r in par if r.get("side") == "pilotbench" and r["mode"] == mode and r["precision"] == prec), None)
            h = next((r for r in par if r.get("side") == "transformers" and r["mode"] == mode and r["precision"] == prec), None)
            if not o and not h:
                continue
            losses = (o or {}).get("losses") or []
            l1, l2 = (losses + [None, None])[:2]
            hl, hn = (h or {}).get("loss_at_weights"), (h or {}).get("loss_without_adapters")
            d2 = l2 - hl if num(l2) is not None and num(hl) is not None else None
            d1 = l1 - hn if num(l1) is not None and num(hn) is not None else None
            note = "; ".join(str(x)[:160] for x in ((o or {}).get("error"), (h or {}).get("error"), (h or {}).get("skipped"), (o or {}).get("skipped"),
                                                   (h or {}).get("loading")) if x)
            f = lambda x: "%.6f" % x if num(x) is not None else "-"
            g = lambda x: "%+.2e" % x if x is not None else "-"
            print("  %-4s %-10s %12s %12s %12s %10s %12s %12s %8s  %s" % (mode, prec, f(l1), f(l2), f(hl), g(d2), f(hn), g(d1),
                                                                        (h or {}).get("adapters_matched", "-"), note))

sp = [r for r in rows if r["kind"] == "speed"]
if sp:
    print("\nSpeed and memory (micro-batch 1; ours: training-step peak / whole-run peak; est: the estimator's peak and its error against each)")
    print("  %6s %-4s %-52s %9s %9s %9s %9s %9s %9s %9s %7s  %s" % ("seq", "mode", "implementation", "ms/step", "tokens/s", "step GiB", "run GiB", "est GiB",
                                                                 "est/step", "est/run", "HF/ours", "error"))
    for r in sp:
        hf = next((x for x in sp if x["seq"] == r["seq"] and x["mode"] == r["mode"] and str(x.get("impl", "")).startswith("transformers")), None)
        ratio = hf["step_ms"] / r["step_ms"] if hf and num(hf.get("step_ms")) and num(r.get("step_ms")) and not str(r.get("impl")).startswith("transformers") else None
        step = r.get("training_peak_bytes") or r.get("peak_allocated_bytes")
        err = r.get("error") or r.get("skipped") or ""
        print("  %6s %-4s %-52s %9s %9s %9s %9s %9s %9s %9s %7s  %s" % (
            r["seq"], r["mode"], str(r.get("impl"))[:52], "%.1f" % r["step_ms"] if num(r.get("step_ms")) else "-",
            "%.0f" % r["tokens_per_s"] if num(r.get("tokens_per_s")) else "-", "%.2f" % (step / G) if step else "-",
            "%.2f" % (r["peak_allocated_bytes"] / G) if r.get("peak_allocated_bytes") and "training_peak_bytes" in r else "-",
            "%.2f" % (r["estimated_bytes"] / G) if r.get("estimated_bytes") else "-", pct(r.get("estimate_error_pct")), pct(r.get("run_peak_error_pct")),
            "%.2fx" % ratio if ratio else "-", str(err)[:120]))

    print("\nPeak growth per added token (KiB/token; measured: ours the training-step peak, Transformers its peak; est: the estimator's)")
    seqs = sorted({r["seq"] for r in sp})
    pairs = list(zip(seqs, seqs[1:]))
    print("  %-4s %-52s " % ("mode", "implementation") + " ".join("%17s" % ("%d->%d" % p) for p in pairs) + " " + " ".join("%17s" % ("est %d->%d" % p) for p in pairs))
    for key in sorted({(r["mode"], r.get("impl")) for r in sp}, key=str):
        every = {r["seq"]: r for r in sp if (r["mode"], r.get("impl")) == key}
        ran = {s: r for s, r in every.items() if not r.get("error") and not r.get("skipped")}  # measured: runs that fit
        def growth(by, field, a, b):
            pa, pb = (by.get(a) or {}).get(field), (by.get(b) or {}).get(field)
            return "%17.1f" % ((pb - pa) / (b - a) / 1024) if pa and pb else "%17s" % "-"
        meas = "training_peak_bytes" if any("training_peak_bytes" in r for r in every.values()) else "peak_allocated_bytes"
        print("  %-4s %-52s " % (key[0], str(key[1])[:52]) + " ".join(growth(ran, meas, *p) for p in pairs) + " "
              + " ".join(growth(every, "estimated_bytes", *p) for p in pairs))

    fit = [r for r in sp if str(r.get("impl", "")).startswith("pilotbench") and r.get("verdict") == "fits"]
    print("\nEstimator over our %d rows that fit (goal: within 1%% median, 2.5%% worst of the whole run's peak)" % len(fit))
    for field, what in (("run_peak_error_pct", "whole run's peak"), ("estimate_error_pct", "training steps' peak")):
        v = [abs(r[field]) for r in fit if num(r.get(field)) is not None]
        if v:
            print("  vs the %-20s median |error| %.2f%%, worst %.2f%% (%s)" % (what, statistics.median(v), max(v),
                  "meets the goal" if statistics.median(v) <= 1 and max(v) <= 2.5 else "misses the goal"))
    print("\nSpeed against Transformers (goal: ours at least as fast), best of our paths per row:")
    for seq in seqs:
        for mode in ("full", "lora"):
            ours_ = [r for r in fit if r["seq"] == seq and r["mode"] == mode and num(r.get("step_ms"))]
            hf = next((r for r in sp if r["seq"] == seq and r["mode"] == mode and str(r.get("impl", "")).startswith("transformers")), None)
            if not ours_ and not hf:
                continue
            best = min(ours_, key=lambda r: r["step_ms"]) if ours_ else None
            if best and hf and num(hf.get("step_ms")):
                print("  %6d %-4s %s %.1f ms vs Transformers %.1f ms: %.2fx" % (seq, mode, best["impl"], best["step_ms"], hf["step_ms"], hf["step_ms"] / best["step_ms"]))
            else:
                print("  %6d %-4s %s vs Transformers: %s" % (seq, mode, "%s %.1f ms" % (best["impl"], best["step_ms"]) if best else "ours did not fit",
                                                         (hf or {}).get("error") or (hf or {}).get("skipped") or "no row"))
PY
