#!/bin/sh
# run-probes.sh OUTDIR [N]: N (default 2) whole dmalab probe runs one after
# the other on the device machine, plus topo and nvidia-smi, for
# "dmalab calibrate" from one run and "dmalab validate" on another.
# Run from the repository root with ./dmalab carried
# (CGO_ENABLED=0 go build -o dmalab ./cmd/dmalab).
set -u
out=${1:?usage: run-probes.sh OUTDIR [N]}
n=${2:-2}
mkdir -p "$out"
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
./dmalab topo --json > "$out/topo.json" 2> "$out/topo.err"
./dmalab topo > "$out/topo.txt" 2>&1
i=1
while [ "$i" -le "$n" ]; do
  s=$(date +%s)
  ./dmalab probe --json > "$out/probe-$i.json" 2> "$out/probe-$i.err"
  echo "probe $i: rc $? in $(( $(date +%s) - s )) s"
  ./dmalab probe --input "$out/probe-$i.json" > "$out/probe-$i.txt" 2>&1
  i=$((i + 1))
done
