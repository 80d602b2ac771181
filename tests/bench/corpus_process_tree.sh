#!/bin/bash
# The process-tree corpus of issue 35 against a pilotbench-cli: each case, its exit code and how many
# of its processes (by a marker in their environment or argv) are left 3-4 s after watch ended.
#   bash tests/bench/corpus_process_tree.sh build/app/pilotbench-cli
CLI=$(realpath "$1"); D=$(mktemp -d)
count() { local n=0; for f in /proc/[0-9]*/environ; do p=${f#/proc/}; p=${p%/environ}; [ "$p" = "$$" ] && continue; if grep -qa "$1" $f /proc/$p/cmdline 2>/dev/null; then n=$((n+1)); fi; done; echo $n; }
killall_m() { for f in /proc/[0-9]*/environ; do p=${f#/proc/}; p=${p%/environ}; [ "$p" = "$$" ] && continue; grep -qa "$1" $f 2>/dev/null && kill -9 $p 2>/dev/null; done; }
run() { local name=$1 script=$2; m="pbmark$RANDOM$RANDOM"; timeout 60 $CLI --log-level error watch --no-devices --db $D/$m.db --grace 1 --env PB_TREE_MARK=$m -- /bin/sh -c "$script" $m >/dev/null 2>&1; rc=$?; sleep 3; echo "$name: exit $rc, left $(count $m)"; killall_m $m; }
run "setsid child" "setsid sh -c 'sleep 300; :' \"\$0\" & exit 0"
run "python double fork" "/usr/bin/python3 -c 'import os,sys,time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
os.wait()' \"\$0\"; exit 0"
run "background job own group" "set -m; sleep 300 & sleep 300 & exit 0"
run "ignores TERM keeps stdout" "(trap '' TERM; while :; do sleep 1; echo alive; done) & exit 0"
# Ctrl-C twice 0.3 s apart, a job ignoring TERM, grace 60
set -m; m="pbmark$RANDOM$RANDOM"; $CLI --log-level error watch --no-devices --db $D/$m.db --grace 60 --env PB_TREE_MARK=$m -- /bin/sh -c "trap '' TERM INT; setsid sh -c 'trap \"\" TERM; sleep 300' \"\$0\" & sleep 300; :" $m >/dev/null 2>&1 & W=$!; sleep 2; kill -INT $W; sleep 0.3; kill -INT $W; wait $W; rc=$?; sleep 3; echo "Ctrl-C twice: exit $rc, left $(count $m)"; killall_m $m
# SIGKILL of watch
m="pbmark$RANDOM$RANDOM"; $CLI --log-level error watch --no-devices --db $D/$m.db --grace 1 --env PB_TREE_MARK=$m -- /bin/sh -c "setsid sh -c 'trap \"\" TERM; sleep 300' \"\$0\" & sleep 300 & wait" $m >/dev/null 2>&1 & W=$!; sleep 2; kill -9 $W; wait $W 2>/dev/null; sleep 4; echo "SIGKILL of watch: left $(count $m)"; killall_m $m
rm -rf $D
