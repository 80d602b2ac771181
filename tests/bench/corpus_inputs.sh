#!/bin/bash
# The inputs-and-limits corpus of issue 35 against a pilotbench-cli: exit code, time and first error line
# of each case (durations, empty MoE sections, HF revision FIFO and /dev/zero, SIGTERM while a pilot starts).
#   bash tests/bench/corpus_inputs.sh build/app/pilotbench-cli
CLI=$(realpath "$1"); DATA=$(cd "$(dirname "$0")/../data" && pwd); D=$(mktemp -d); cd $D
t() { local s=$(date +%s.%N); timeout 20 "$@" >out.txt 2>err.txt; local rc=$?; echo "exit $rc in $(echo "$(date +%s.%N) - $s" | bc | cut -c1-5) s: $(head -c 150 err.txt | tr '\n' ' ')"; }
for g in 3000000 inf 1e12; do echo -n "grace $g: "; t $CLI --log-level warn watch --no-devices --db $D/g.db --grace $g --max-seconds 1 -- sleep 5; done
$CLI config new --preset tiny > tiny.json
python3 -c "import json;c=json.load(open('tiny.json'));c['model']['moe']={};json.dump(c,open('moe.json','w'))"
echo -n "moe {}: "; t $CLI --log-level warn config show moe.json --json
echo -n "--set experts=0: "; t $CLI --log-level warn config show preset:tiny-moe --set model.moe.experts=0
mkdir -p hf1 hf2; cp "$DATA/hf/qwen2.5-7b/config.json" hf1/; cp hf1/config.json hf2/; mkfifo hf1/revision; ln -s /dev/zero hf2/revision
echo -n "revision fifo: "; t $CLI --log-level warn config import-hf hf1
echo -n "revision /dev/zero: "; t $CLI --log-level warn config import-hf hf2
$CLI --log-level warn pilot --config preset:tiny --steps 200 --db $D/e.db >/dev/null 2>&1 & P=$!
for i in $(seq 1 400); do grep -q "^SigCgt:.*" /proc/$P/status 2>/dev/null && [ $(( 0x$(awk '/SigCgt/{print $2}' /proc/$P/status) >> 14 & 1 )) = 1 ] && break; sleep 0.005; done
kill -TERM $P; wait $P; echo "SIGTERM as the pilot first catches it: exit $?"
$CLI --log-level warn pilot --config preset:tiny --steps 200 --db $D/f.db >/dev/null 2>&1 & P=$!; sleep 0.15; kill -TERM $P; wait $P; echo "SIGTERM 0.15 s after start: exit $?"
rm -rf $D
