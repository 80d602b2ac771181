#!/usr/bin/env bash
# On the H200 host (Transformers 5.17), from the repository root: Transformers' own counts of
# GLM-4.5-Air and the tiny glm4_moe parity fixture, packed as $OUT/glm4_moe.tgz
# (counts.json, configs/, hf-parity/glm4_moe/) with the script's log in $OUT/glm4_moe.log.
OUT=${OUT:-/tmp/pb-out}; G=$(mktemp -d)
{ python3 tests/bench/hf_family_fixtures.py --counts --only glm-4.5-air --out $G
  python3 tests/bench/hf_family_fixtures.py --only glm4_moe --out $G; } > $OUT/glm4_moe.log 2>&1
tar czf $OUT/glm4_moe.tgz -C $G .
