#!/usr/bin/env bash
# A list of card jobs run across device calls with one and the same command, so a warm machine (it
# idles off 30 s after a call) gets its next call at once, and no call outruns its 600 s:
#   bash tests/bench/device_queue.sh JOBS [DEADLINE_S]
# JOBS is a bash file of lines `job NAME SECONDS COMMAND...` (run from the repository root, with
# $BUILD_DIR and the staged dependencies as h200_build.sh leaves them). A job starts only where its
# SECONDS fit before DEADLINE_S (default 570) from this call's start, runs under a timeout of what is
# left, and is done once it ends (its mark in /tmp/pb-queue, so a later call on the same machine goes
# on with the next; a fresh machine starts over), except where the deadline cut it: then it is the
# next call's first (a build resumes, ninja keeping what it built). Each job writes under its
# own $OUT, packed after it as $OUT/NAME.tgz (the device returns at most 8 files); $OUT/queue.txt
# says what ran, for how long and how it ended, and what is left. QUEUE_DRY=1 prints the commands.
set -uo pipefail
JOBS=${1:?usage: device_queue.sh JOBS [DEADLINE_S]}
DEADLINE=$((SECONDS + ${2:-570}))
RESULTS=${OUT:-/tmp/pb-out}
STATE=/tmp/pb-queue
mkdir -p "$RESULTS" "$STATE"
LOG=$RESULTS/queue.txt
say() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
left=()
job() {
  local name=$1 need=$2; shift 2
  [ -e "$STATE/$name.done" ] && return 0
  if [ ${#left[@]} -gt 0 ] || [ $((DEADLINE - SECONDS)) -lt "$need" ]; then
    left+=("$name"); return 0
  fi
  [ "${QUEUE_DRY:-0}" = 1 ] && { echo "would run $name ($need s): $*"; return 0; }
  local dir=$STATE/out/$name start=$SECONDS
  mkdir -p "$dir"
  say "$name: start ($((DEADLINE - SECONDS)) s left)"
  OUT=$dir timeout $((DEADLINE - SECONDS)) bash -c "$*" > "$dir/stdout.txt" 2>&1
  local rc=$?
  tail -12 "$dir/stdout.txt" >> "$LOG"
  tar -czf "$RESULTS/$name.tgz" -C "$STATE/out" "$name"
  if [ $rc = 0 ]; then
    touch "$STATE/$name.done"; say "$name: done in $((SECONDS - start)) s"
  else
    say "$name: exit $rc after $((SECONDS - start)) s"
    # Cut by the deadline (a build, or a job that took more than its SECONDS): again first in the
    # next call; any other failure is not run again.
    if [ $rc = 124 ]; then left+=("$name"); else touch "$STATE/$name.done"; fi
  fi
}
# shellcheck disable=SC1090
. "$JOBS"
say "left for the next call: ${left[*]:-nothing}"
