#!/bin/sh
# run_fuzzer.sh FUZZER SEEDS WORK SECONDS: runs FUZZER for SECONDS on a fresh copy of the seed
# corpus (libFuzzer adds what it finds to it), with SEEDS.dict as its dictionary when there is one.
# Exits non-zero on any finding (crash, sanitizer report, leak, input over 10 s or 2 GB); the
# input that caused it is left in WORK as crash-*, leak-*, timeout-* or oom-*.
set -eu
fuzzer=$1 seeds=$2 work=$3 seconds=$4
# ASan records a stack per allocation; unwinding into Qt (no frame pointers) makes most of them
# unique, which halves the speed at the default depth of 30. Rerun a finding with ASAN_OPTIONS= for
# full allocation stacks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=2}
rm -rf "$work"
mkdir -p "$work/corpus"
cp "$seeds"/* "$work/corpus/"
dict="$seeds.dict"
[ -f "$dict" ] && set -- -dict="$dict" || set --
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus"
