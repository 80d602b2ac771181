#!/usr/bin/env bash
# On the H200 host (Transformers 5.17), from the repository root: Transformers' own counts of
# Qwen3-Next-80B-A3B and the tiny qwen3_next (sparse) and qwen3_5_text (dense) parity fixtures, packed
# as $OUT/qwen_hybrid.tgz (counts.json, configs/, hf-parity/qwen3_next/, hf-parity/qwen3_5_text/) with
# the script's log in $OUT/qwen_hybrid.log. Whether the fla / causal-conv1d fast path ran is in the log
# (Transformers warns when it falls back to the torch implementation).
OUT=${OUT:-/tmp/pb-out}; G=$(mktemp -d)
{ python3 -c 'import importlib.util as u; print({m: bool(u.find_spec(m)) for m in ("fla", "causal_conv1d")})'
  python3 tests/bench/hf_family_fixtures.py --counts --only qwen3-next-80b-a3b,qwen3.5-9b --out $G
  python3 tests/bench/hf_family_fixtures.py --only qwen3_next,qwen3_5_text --out $G; } > $OUT/qwen_hybrid.log 2>&1
tar czf $OUT/qwen_hybrid.tgz -C $G .
